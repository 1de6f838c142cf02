package intake_test

import (
	"errors"
	"testing"

	"github.com/payintake/payintake/intake"
	"github.com/payintake/payintake/normalize"
)

func TestCheckFilePattern(t *testing.T) {
	cases := []struct {
		pattern string
		ok      bool
	}{
		{`^run-(?P<seq>\d+)\.csv$`, true},
		{`^pay_(?P<seq>[0-9]{4})_`, true},
		{`(?P<seq>\d+)-(?P<other>[a-z]+)`, true},
		{`^acme-.*\.csv$`, true}, // no sequence group at all
		{`a(?P<seq>[a-z]+)`, false},
		{`(?P<seq>\d+|x)`, false},
		{`(?P<seq>.+)`, false},
		{`(?P<seq>\w+)`, false},
		{`(unclosed`, false},
		{`^seq-(\d+)\.csv$`, false}, // meant a sequence group but did not name it
	}
	for _, c := range cases {
		err := intake.CheckFilePattern(c.pattern)
		if (err == nil) != c.ok {
			t.Errorf("CheckFilePattern(%q) = %v, want ok=%v", c.pattern, err, c.ok)
		}
	}
}

func TestFileSeq(t *testing.T) {
	const p = `^pay_(?P<seq>\d+)\.csv$`
	cases := []struct {
		pattern, name string
		seq           int64 // -1: no sequence number
		code          string
	}{
		{"", "anything.csv", -1, ""},
		{p, "pay_0042.csv", 42, ""},
		{p, "payroll.csv", -1, "file_name_mismatch"},
		{p, "pay_99999999999999999999.csv", -1, "invalid_sequence"},
		{`^x(?P<seq>\d*)\.csv$`, "x.csv", -1, ""},
	}
	for _, c := range cases {
		seq, err := intake.FileSeq(c.pattern, c.name)
		var fr *normalize.ParseError
		switch {
		case c.code != "":
			if !errors.As(err, &fr) || string(fr.Code()) != c.code {
				t.Errorf("FileSeq(%q, %q) error %v, want code %s", c.pattern, c.name, err, c.code)
			}
		case err != nil:
			t.Errorf("FileSeq(%q, %q): %v", c.pattern, c.name, err)
		case c.seq < 0 && seq != nil, c.seq >= 0 && (seq == nil || *seq != c.seq):
			t.Errorf("FileSeq(%q, %q) = %v, want %d", c.pattern, c.name, seq, c.seq)
		}
	}
}
