// Package workbook reads and writes Excel workbooks (.xlsx): a partner's
// payroll sheet read as rows of text for normalize (Open, Sheet), and a
// result file written as a workbook the partner's people can open
// (ResultWorkbook).
//
// # Reading
//
// A sheet is streamed: its XML is decompressed and decoded one row at a
// time, so a million-row workbook is read in flat memory (the shared
// strings, the styles and the workbook's sheet list are held; the sheet is
// not). Cells become the text a partner would otherwise have exported to
// CSV, without ever passing through a float:
//
//   - a number is the decimal text Excel stored ("0.07" stays "0.07");
//     an exponent is written out ("1E-3" is "0.001") and digits beyond
//     Excel's 15 significant ones, which are binary noise Excel never
//     shows ("0.30000000000000004"), are dropped as Excel drops them
//     ("0.3"); a number of more than 15 whole digits, which Excel cannot
//     hold (an identifier typed as a number), is given as Excel shows it,
//     "1.23456789012346E+17", which normalize refuses (mangled_identifier,
//     invalid_amount); with Options.DecimalComma the decimal point is a
//     comma;
//   - a number formatted only with zeros ("00000") is padded as shown
//     ("123" shows as "00123", an identifier Excel keeps as a number);
//   - a date (a serial number with a date format, or an ISO date cell) is
//     YYYY-MM-DD, or in Options.DateFormat; one with a time of day is
//     YYYY-MM-DDTHH:MM:SS, which no
//     date field accepts, so the row is refused rather than the time dropped;
//   - text is as typed (leading zeros kept), booleans TRUE or FALSE; a
//     cell showing an error (#N/A, #DIV/0!) refuses the file
//     (formula_error), naming the cell: as text it would pass for an
//     identifier;
//   - a formula is its cached value, the value Excel computed when it
//     saved the file; a formula without one (a workbook written by a
//     program and never opened in Excel) refuses the file
//     (uncalculated_formula), naming the cell.
//
// The header is the first row with a non-empty cell: a cell of it that is
// empty before the last named column, or merged with another, refuses the
// file (invalid_header_cell), naming the cell; merges are stored after a
// sheet's rows, so a merged header is refused when the sheet has been read,
// which still refuses the file whole. Line numbers are the sheet's row
// numbers. Errors are normalize's: a *normalize.ParseError refuses the file.
//
// Excelize's own row iterator gives each cell's formatted or raw text only,
// not its type, style, formula or merge, and unzips a large sheet to a
// temporary file before reading it; so the reader decodes SpreadsheetML
// (ECMA-376 part 1, §18) itself, with archive/zip, encoding/xml for the
// small parts and its own tokeniser for the sheet (scan.go), and excelize
// writes result workbooks.
package workbook
