package normalize

import (
	"errors"
	"fmt"
)

// Errors are shaped like encoding/csv's: a *ParseError says where (the line
// a row starts on, the line and column where the problem is) and wraps what
// (Err). What is a Code: every code constant (CodeMalformedRow, …) is also a
// sentinel error, so callers test for one with errors.Is and reach the cause
// (a *csv.ParseError, when encoding/csv found it) with errors.As:
//
//	if errors.Is(err, normalize.CodeLineTooLong) { … }
//	var pe *csv.ParseError
//	if errors.As(err, &pe) { … pe.Column … }

// Code is a reason code, as result files give it (snake_case). A Code is an
// error: each code constant is a sentinel usable with errors.Is.
type Code string

// Error returns the code.
func (c Code) Error() string { return string(c) }

// ParseError rejects a whole file (encoding, header problems, limits), or
// another whole-file refusal of the doors above (a file name that does not
// match the partner's pattern, a reused submission key): the result file then
// holds one row, row 0, at StartLine. It is the one file-level error type.
type ParseError struct {
	StartLine int // line where the record at fault starts (the header: 1); 0: the file as a whole
	Line      int // line where the problem was found
	Column    int // 1-based column (a byte index, as encoding/csv's) where it was found; 0 when not known
	// Err is the Code, or an error wrapping the Code and its cause (see
	// Cause): errors.Is(err, CodeX) and errors.As(err, &csvErr) see both.
	Err error
	// Field is the canonical column at fault ("" when none); Message one
	// sentence for a partner's operator, saying what to do.
	Field, Message string
}

// Error returns "line N: code: message" (without "line N: " when StartLine is 0).
func (e *ParseError) Error() string {
	if e.StartLine > 0 {
		return fmt.Sprintf("line %d: %s: %s", e.StartLine, e.Code(), e.Message)
	}
	return string(e.Code()) + ": " + e.Message
}

// Unwrap returns Err.
func (e *ParseError) Unwrap() error { return e.Err }

// Code returns the error's code.
func (e *ParseError) Code() Code { return codeOf(e.Err) }

// RowError is why one row was rejected (the row's own line is Row.Line).
// Code is one of the row codes listed in the package doc, Field the
// canonical column at fault ("" when none) and Message one sentence for a
// partner's operator. Err, when set, is the cause (a *csv.ParseError for a
// malformed row).
type RowError struct {
	Code           Code
	Field, Message string
	Err            error
	// Held: the row is valid and held for a reviewer rather than rejected
	// (a component code the profile does not map, under unknown_component:
	// hold); Reader gives it as Row.Held, with the row's record.
	Held bool
}

// Error returns "code: message".
func (e *RowError) Error() string { return string(e.Code) + ": " + e.Message }

// Unwrap returns the code and the cause, so that errors.Is(err, CodeX) and
// errors.As(err, &csvErr) both work.
func (e *RowError) Unwrap() []error {
	if e.Err == nil {
		return []error{e.Code}
	}
	return []error{e.Code, e.Err}
}

// Cause wraps cause under code, for ParseError.Err.
func Cause(code Code, cause error) error { return fmt.Errorf("%w: %w", code, cause) }

func codeOf(err error) Code {
	var c Code
	errors.As(err, &c)
	return c
}
