// Package normalize turns a partner's payroll CSV file into canonical,
// hashable pay records.
//
// The pipeline is streaming and never holds the whole file in memory:
//
//	bytes → decode (UTF-8 with or without BOM, UTF-16 LE/BE with BOM)
//	      → validate (UTF-8, NUL bytes, line length)
//	      → parse (encoding/csv, one record at a time)
//	      → map columns (header names matched loosely)
//	      → Normalize (one code path shared with other transports)
//
// # File level
//
// A problem that makes the whole file unusable is a *ParseError (codes
// empty_file, invalid_encoding, nul_byte, missing_column, duplicate_column,
// line_too_long, too_many_columns, and malformed_row for an unparsable
// header). NewReader returns it for header problems; Reader.Next returns it
// when it is found mid-stream, after which every call returns the same error.
//
// # Row level
//
// A bad row is reported in Row.Err as a *RowError and reading continues.
// When several fields of a row are bad, the first in the order employee_ref,
// pay_period, component, currency, amount, hours, rate, pay_date is reported
// (currency comes before amount because the amount's scale depends on it).
//
// Row codes: missing_value, mangled_identifier, invalid_identifier, invalid_amount, invalid_rate,
// invalid_hours, too_many_decimals, invalid_currency, currency_mismatch,
// invalid_date, too_many_cells, malformed_row.
//
// # Decisions where the spec is silent
//
//   - Blank lines, and lines whose cells are all empty (such as ",,,,"), are
//     skipped and are not counted as data rows (Row.Index does not advance).
//   - Cells that are empty or only whitespace at the end of a row are ignored.
//   - Money with more decimals than the currency allows is accepted only if
//     the extra digits are zeros ("12.500" USD is 12.50); otherwise the row is
//     rejected with too_many_decimals. Nothing is ever rounded.
//   - Money with more than 30 digits (not counting trailing zeros of the
//     fraction) is rejected as invalid, and so is a
//     leading "+", a bare decimal point (".5", "12.") and mixed grouping
//     separators. Dot-decimal money accepts "," and "'" as thousands
//     separators; decimal-comma money accepts ".", space, no-break space and
//     "'". Groups after the first must have exactly three digits.
//   - Hours accept no thousands separators and no sign.
//   - A leading "$" is accepted for any dollar currency (USD, CAD, AUD, ...);
//     a symbol or code that cannot denote the row's currency is
//     currency_mismatch.
//   - employee_ref looks mangled by a spreadsheet when it is digits, an
//     optional decimal part, E/e and an exponent, and it either has a decimal
//     part or an explicit exponent sign ("1.23E+05", "1,23E+05", "4.5e7",
//     "1E+05"). "12E3" is accepted as an identifier.
//   - Text fields (employee_ref, pay_period, component) are put in Unicode
//     NFC form, so composed and decomposed accents hash equal. Inner spaces
//     are kept.
//   - A partner date format that has the same shape as ISO (for example
//     "YYYY-DD-MM") takes precedence over ISO for values of that shape;
//     otherwise ISO YYYY-MM-DD is always accepted as well.
//   - Currency codes are those known to golang.org/x/text/currency, minus
//     the non-money X codes (XXX, XTS, XAU, ...), plus codes introduced after
//     its data snapshot (VES, VED, MRU, SLE, ZWG).
//   - A malformed CSV row (bare or unterminated quote) has an empty Display:
//     encoding/csv gives no cells for it.
//   - Limits bound physical lines and cells per row; a single quoted cell
//     spanning many short lines is not bounded beyond that.
//   - Display values are always passed through SafeCell, including normalised
//     text, so an employee_ref "=cmd()" cannot run in a spreadsheet either;
//     SafeCell looks past leading whitespace, control and format characters
//     (FormulaLead), so " =1+1" and NBSP + "=1+1" are escaped too.
package normalize
