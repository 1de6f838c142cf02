package normalize

import (
	"bytes"
	"strings"
	"testing"
)

func TestReadResultLines(t *testing.T) {
	data := ResultHeader +
		"2,1,created,E1,2026-11,BASE,1.00,USD,,,\n" +
		"3,2,rejected,\"E,2\",2026-11,BASE,x,USD,invalid_amount,amount,\"two\nlines \"\"quoted\"\"\"\n"
	var got []ResultLine
	if err := ReadResultLines([]byte(data), func(l ResultLine) error { got = append(got, l); return nil }); err != nil {
		t.Fatal(err)
	}
	if len(got) != 3 || !got[0].Header || got[1].Header || got[2].Header {
		t.Fatalf("lines %+v: want the header then two rows", got)
	}
	if string(got[0].Raw)+"\n" != ResultHeader || string(got[1].Raw) != "2,1,created,E1,2026-11,BASE,1.00,USD,,," {
		t.Errorf("raw lines %q %q", got[0].Raw, got[1].Raw)
	}
	if c := got[2].Cells; c[3] != "E,2" || c[10] != "two\nlines \"quoted\"" || !strings.HasSuffix(string(got[2].Raw), `"""`) {
		t.Errorf("quoted cells %q, raw %q", c, got[2].Raw)
	}
	if err := ReadResultLines([]byte("1,2,3\n"), func(ResultLine) error { return nil }); err == nil {
		t.Error("a line of 3 cells was read as a result line")
	}
}

// The Excel form is the same lines after a BOM, each LF as CR LF, however
// the writes cut the lines.
func TestExcelResultWriter(t *testing.T) {
	plain := ResultHeader + "2,1,created,00042,2026-11,\"BASE (REG)\",4000.00,EUR,,,\n3,2,rejected,Zoë,2026-11,X,1.00,EUR,unknown_component,component,\"two\nlines\"\n"
	var b bytes.Buffer
	w := NewExcelResultWriter(&b)
	for _, part := range []string{plain[:5], plain[5:90], plain[90:91], plain[91:]} {
		if n, err := w.Write([]byte(part)); err != nil || n != len(part) {
			t.Fatalf("Write = %d, %v; want %d", n, err, len(part))
		}
	}
	want := "\ufeff" + strings.ReplaceAll(plain, "\n", "\r\n")
	if b.String() != want {
		t.Fatalf("got %q\nwant %q", b.String(), want)
	}
	if b.Len() != len(plain)+3+strings.Count(plain, "\n") {
		t.Errorf("size %d is not the CSV's + 3 + its line feeds", b.Len())
	}
}
