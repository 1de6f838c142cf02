package strictjson

import (
	"errors"
	"strconv"
	"strings"
	"testing"
)

type leg struct {
	Row    int    `json:"row"`
	Amount string `json:"amount"`
}

type body struct {
	DryRun bool   `json:"dry_run"`
	File   string `json:"file"`
	Rows   []leg  `json:"rows"`
	Nested struct {
		C int `json:"c"`
	} `json:"b"`
}

func TestUnmarshalRefuses(t *testing.T) {
	for _, c := range []struct {
		body, member, other string
		want                error
	}{
		{`{"file":"a","file":"b"}`, "file", "file", ErrDuplicate},
		{`{"dry_run":true,"DRY_RUN":false}`, "DRY_RUN", "dry_run", ErrDuplicate},
		{`{"file":"x.csv","File":""}`, "File", "file", ErrDuplicate},
		{`{"b":{"c":1,"C":2}}`, "b.C", "c", ErrDuplicate},
		{`{"rows":[{"row":1},{"row":2,"amount":"1","AMOUNT":"2"}]}`, "rows[1].AMOUNT", "amount", ErrDuplicate},
		{`{"rows":[{"row":1}],"ROWS":[{"row":2}]}`, "ROWS", "rows", ErrDuplicate},
		{`{"fil\u0065":"1","file":"2"}`, "file", "file", ErrDuplicate},         // the same name, escaped
		{`{"file":"a","\u212Aey":1,"key":2}`, "key", "\u212Aey", ErrDuplicate}, // the Kelvin sign folds to k
		{`{"DRY_RUN":true}`, "DRY_RUN", "", ErrUnknown},                        // names are matched exactly
		{`{"rows":[{"row":1,"amout":"1"}]}`, "rows[0].amout", "", ErrUnknown},
		{`{"dry_run":"yes"}`, "dry_run", "", ErrType},
		{`not json`, "", "", ErrMalformed},
		{`{"file":"a"} {}`, "", "", ErrMalformed},
		{`{"file":"a","file":`, "file", "file", ErrDuplicate}, // repeated before it broke off
	} {
		var v body
		err := Unmarshal([]byte(c.body), &v)
		var e *Error
		if !errors.As(err, &e) || !errors.Is(err, c.want) || e.Member != c.member || e.Other != c.other {
			t.Errorf("Unmarshal(%s) = %v (%+v); want %v at %q (other %q)", c.body, err, e, c.want, c.member, c.other)
			continue
		}
		if c.member != "" && !strings.Contains(err.Error(), strconv.Quote(c.member)) {
			t.Errorf("Unmarshal(%s): %q does not name %q", c.body, err, c.member)
		}
	}
}

func TestUnmarshalAccepts(t *testing.T) {
	var v body
	if err := Unmarshal([]byte(`{"dry_run":true,"file":"x","rows":[{"row":1,"amount":"2"},{"row":2,"amount":"3"}],"b":{"c":4}}`), &v); err != nil {
		t.Fatal(err)
	}
	if !v.DryRun || v.File != "x" || len(v.Rows) != 2 || v.Rows[1].Amount != "3" || v.Nested.C != 4 {
		t.Errorf("decoded %+v", v)
	}
	// One name per object: the same name in sibling objects is no repeat.
	if err := Unmarshal([]byte(`{"rows":[{"row":1},{"row":1}]}`), &v); err != nil {
		t.Errorf("sibling objects: %v", err)
	}
}

// Linear: 100,000 distinct members and one case-variant repeat at the end.
func TestUnmarshalLarge(t *testing.T) {
	var b strings.Builder
	b.WriteString("{")
	for i := range 100000 {
		b.WriteString(`"k` + strconv.Itoa(i) + `":1,`)
	}
	b.WriteString(`"k0x":2,"K0X":3}`)
	var m map[string]int
	err := Unmarshal([]byte(b.String()), &m)
	var e *Error
	if !errors.As(err, &e) || e.Member != "K0X" {
		t.Errorf("large object: %v", err)
	}
}
