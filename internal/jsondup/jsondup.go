// Package jsondup finds a member name that one JSON object repeats. RFC
// 8259 leaves such a document's meaning open, and encoding/json silently
// keeps the last value: a body with "amount" twice would be applied with
// whichever one the decoder happened to take. Every JSON body payintake
// reads is checked with Find first and refused when a name repeats.
//
// The check is jsontext's (github.com/go-json-experiment/json, the
// encoding/json/v2 candidate of the Go team), which rejects duplicate names
// by default, in one pass and linear time.
package jsondup

import (
	"bytes"
	"errors"
	"strconv"
	"strings"

	"github.com/go-json-experiment/json/jsontext"
)

// Find reports the first member name repeated within one object of the
// JSON value at the start of body, as a path such as "amount" or
// "rows[2].amount". A body that is not valid JSON is not its concern (found
// is false): the caller's decoder reports that.
func Find(body []byte) (path string, found bool) {
	_, err := jsontext.NewDecoder(bytes.NewReader(body)).ReadValue()
	var se *jsontext.SyntacticError
	if err == nil || !errors.As(err, &se) || !errors.Is(se.Err, jsontext.ErrDuplicateName) {
		return "", false
	}
	var b strings.Builder
	for tok := range se.JSONPointer.Tokens() {
		if _, err := strconv.Atoi(tok); err == nil && b.Len() > 0 {
			b.WriteString("[" + tok + "]")
			continue
		}
		if b.Len() > 0 {
			b.WriteByte('.')
		}
		b.WriteString(tok)
	}
	return b.String(), true
}
