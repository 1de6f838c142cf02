// Package strictjson is the one decoder of every JSON body payintake reads
// (submissions' replays, webhooks, the review API). A body means one thing
// or it is refused:
//
//   - a member repeated within one object is refused, whether the names are
//     equal (RFC 8259 leaves such a document's meaning open; encoding/json
//     silently keeps the last value) or differ only in case (encoding/json
//     matches names case-insensitively, so {"dry_run":true,"DRY_RUN":false}
//     would be decided by the last spelling);
//   - names are matched exactly, case included, and a member the target
//     does not know is refused (a misspelt filter must not widen a
//     decision);
//   - a value of the wrong JSON type, or data after the value, is refused.
//
// It is github.com/go-json-experiment/json (the encoding/json/v2 candidate
// of the Go team: case-sensitive, duplicate names rejected, unknown members
// rejected on request) plus a pass that folds names' case, which v2 leaves
// to the caller.
package strictjson

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
	"golang.org/x/text/cases"
)

// The reasons a body is refused; an *Error wraps one of them.
var (
	ErrDuplicate = errors.New("member repeated")
	ErrUnknown   = errors.New("unknown member")
	ErrType      = errors.New("wrong JSON type")
	ErrMalformed = errors.New("not valid JSON")
)

// Error says why a body was refused and which member (if any) made it so.
type Error struct {
	// Member is the member's path, as "amount" or "rows[2].amount"; empty
	// for a body that is not JSON at all.
	Member string
	// Other is, for a repeated member, the spelling it repeats ("dry_run"
	// for Member "DRY_RUN"); equal to Member's last name for an exact repeat.
	Other string
	Err   error // ErrDuplicate, ErrUnknown, ErrType or ErrMalformed
	cause error
}

func (e *Error) Unwrap() error { return e.Err }

func (e *Error) Error() string {
	switch {
	case errors.Is(e.Err, ErrDuplicate) && e.Other != "" && e.Other != lastName(e.Member):
		return fmt.Sprintf("the member %q repeats %q: names that differ only in case are the same member; send it once", e.Member, e.Other)
	case errors.Is(e.Err, ErrDuplicate):
		return fmt.Sprintf("the body has the member %q more than once; send it once (a repeated member is never resolved by taking one of its values)", e.Member)
	case errors.Is(e.Err, ErrUnknown):
		return fmt.Sprintf("the member %q is not one this body takes (names are matched exactly, case included)", e.Member)
	case errors.Is(e.Err, ErrType) && e.Member != "":
		return fmt.Sprintf("the member %q has the wrong JSON type: %v", e.Member, e.cause)
	case e.cause != nil:
		return fmt.Sprintf("the body is not valid JSON: %v", e.cause)
	}
	return e.Err.Error()
}

// Unmarshal decodes the one JSON value of body into v (a pointer to a
// struct, whose json tags name the members it takes). It returns an *Error
// when the body is refused.
func Unmarshal(body []byte, v any) error {
	if err := checkNames(body); err != nil {
		return err
	}
	err := json.Unmarshal(body, v, json.RejectUnknownMembers(true))
	if err == nil {
		return nil
	}
	var se *json.SemanticError
	if errors.As(err, &se) {
		member := path(se.JSONPointer)
		if errors.Is(se.Err, json.ErrUnknownName) {
			return &Error{Member: member, Err: ErrUnknown}
		}
		return &Error{Member: member, Err: ErrType, cause: err}
	}
	return &Error{Err: ErrMalformed, cause: err}
}

// checkNames reads body's tokens once, refusing a name that repeats
// another of its object with equal case folding, and a body that is not
// exactly one JSON value.
func checkNames(body []byte) error {
	dec := jsontext.NewDecoder(bytes.NewReader(body))
	fold := cases.Fold()            // Unicode case folding, as encoding/json's matching (K and the Kelvin sign K alike)
	var objects []map[string]string // per open object: folded name → first spelling (nil for an array)
	for {
		kind, n := dec.StackIndex(dec.StackDepth())
		tok, err := dec.ReadToken()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			var se *jsontext.SyntacticError
			if errors.As(err, &se) && errors.Is(se.Err, jsontext.ErrDuplicateName) {
				return &Error{Member: path(se.JSONPointer), Other: lastName(path(se.JSONPointer)), Err: ErrDuplicate}
			}
			return &Error{Err: ErrMalformed, cause: err}
		}
		switch k := tok.Kind(); {
		case kind == '{' && n%2 == 0 && k == '"':
			name := tok.String()
			folded := fold.String(name)
			seen := objects[len(objects)-1]
			if first, ok := seen[folded]; ok {
				return &Error{Member: path(dec.StackPointer()), Other: first, Err: ErrDuplicate}
			}
			seen[folded] = name
		case k == '{':
			objects = append(objects, map[string]string{})
		case k == '[':
			objects = append(objects, nil)
		case k == '}' || k == ']':
			objects = objects[:len(objects)-1]
		}
	}
}

// path writes a JSON pointer as "rows[2].amount".
func path(p jsontext.Pointer) string {
	var b strings.Builder
	for tok := range p.Tokens() {
		if _, err := strconv.Atoi(tok); err == nil && b.Len() > 0 {
			b.WriteString("[" + tok + "]")
			continue
		}
		if b.Len() > 0 {
			b.WriteByte('.')
		}
		b.WriteString(tok)
	}
	return b.String()
}

func lastName(member string) string {
	if i := strings.LastIndexAny(member, ".]"); i >= 0 {
		return member[i+1:]
	}
	return member
}
