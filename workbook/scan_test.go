package workbook

import (
	"archive/zip"
	"bytes"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"

	"github.com/payintake/payintake/normalize"
)

// scanned is a scanner's tokens as text, an empty element as a start and
// an end (as encoding/xml gives it).
func scanned(in []byte) ([]string, error) {
	sc := newScanner(bytes.NewReader(in))
	var out []string
	for {
		err := sc.next()
		if err == io.EOF {
			return out, nil
		}
		if err != nil {
			return out, err
		}
		switch sc.kind {
		case tokText:
			out = append(out, fmt.Sprintf("text %q", sc.text))
		case tokStart, tokEmpty:
			s := "start " + string(sc.name)
			for _, a := range sc.attrs {
				s += fmt.Sprintf(" %s=%q", a.name, a.value)
			}
			out = append(out, s)
			if sc.kind == tokEmpty {
				out = append(out, "end "+string(sc.name))
			}
		case tokEnd:
			out = append(out, "end "+string(sc.name))
		}
	}
}

// decoded is encoding/xml's raw tokens of in, in scanned's form (comments
// and instructions left out, adjacent texts joined as the scanner cannot
// split them); ok false when encoding/xml refuses in or it has a
// directive, which the scanner refuses.
func decoded(in []byte) ([]string, bool) {
	d := xml.NewDecoder(bytes.NewReader(in))
	var out []string
	var text []byte
	flush := func() {
		if len(text) > 0 {
			out = append(out, fmt.Sprintf("text %q", text))
			text = nil
		}
	}
	for {
		tok, err := d.RawToken()
		if err == io.EOF {
			flush()
			return out, true
		}
		if err != nil {
			return nil, false
		}
		switch t := tok.(type) {
		case xml.CharData:
			text = append(text, t...)
			continue
		case xml.Comment, xml.ProcInst:
			continue // the scanner skips them: the texts around stay two tokens
		case xml.Directive:
			return nil, false
		}
		flush()
		switch t := tok.(type) {
		case xml.StartElement:
			s := "start " + t.Name.Local
			for _, a := range t.Attr {
				s += fmt.Sprintf(" %s=%q", a.Name.Local, a.Value)
			}
			out = append(out, s)
		case xml.EndElement:
			out = append(out, "end "+t.Name.Local)
		}
	}
}

// joinTexts joins adjacent text tokens (a comment or CDATA section splits
// the scanner's, not encoding/xml's after decoded's joining).
func joinTexts(toks []string) []string {
	var out []string
	for _, t := range toks {
		if n := len(out); n > 0 && strings.HasPrefix(t, "text ") && strings.HasPrefix(out[n-1], "text ") {
			var a, b string
			fmt.Sscanf(out[n-1], "text %q", &a)
			fmt.Sscanf(t, "text %q", &b)
			out[n-1] = fmt.Sprintf("text %q", a+b)
			continue
		}
		out = append(out, t)
	}
	return out
}

var scanSeeds = []string{
	`<?xml version="1.0" encoding="UTF-8" standalone="yes"?>` + "\n" + `<worksheet xmlns="http://schemas.openxmlformats.org/spreadsheetml/2006/main"><sheetData><row r="1"><c r="A1" t="s"><v>0</v></c><c r='B1' t="inlineStr"><is><t xml:space="preserve"> a &amp; b &lt;&#233;&#x4E2D;</t></is></c></row><row r="2"/></sheetData><mergeCells count="1"><mergeCell ref="A1:B1"/></mergeCells></worksheet>`,
	`<x:worksheet xmlns:x="urn:x"><x:sheetData><x:row r="1"><x:c r="A1"><x:f>SUM(A2:A3)</x:f><x:v>3</x:v></x:c></x:row></x:sheetData></x:worksheet>`,
	"<a>line\r\nbreak\rend<!-- note --><![CDATA[<raw> & \r\n]]>tail</a>",
	`<a b = "1" c='&quot;x&apos;'>t</a >`,
	`<!DOCTYPE a [<!ENTITY e "x">]><a>&e;</a>`,
}

// FuzzScanner holds the sheet tokeniser to encoding/xml: whatever both
// read, they read alike; whatever it is given, it ends without a panic.
func FuzzScanner(f *testing.F) {
	for _, s := range scanSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		got, err := scanned(in)
		want, ok := decoded(in)
		if !ok {
			return
		}
		if err != nil {
			// encoding/xml reads what the scanner refuses: only its
			// limits, and references to what is no character (a
			// surrogate), which encoding/xml turns into U+FFFD.
			if bytes.Contains(in, []byte("<!")) || errors.Is(err, io.ErrUnexpectedEOF) || strings.Contains(err.Error(), "longer than") ||
				strings.Contains(err.Error(), "invalid character reference") {
				return
			}
			t.Fatalf("encoding/xml reads %q, the scanner refuses it: %v", in, err)
		}
		if g, w := strings.Join(joinTexts(got), "\n"), strings.Join(joinTexts(want), "\n"); g != w {
			t.Fatalf("%q:\nscanner:\n%s\nencoding/xml:\n%s", in, g, w)
		}
	})
}

// FuzzSheet reads any sheet XML in a workbook: rows or a
// *normalize.ParseError, never a panic or another error.
func FuzzSheet(f *testing.F) {
	for _, s := range scanSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, sheet []byte) {
		sh, err := Open(bytes.NewReader(minimalBook(t, sheet)), Options{})
		if err != nil {
			t.Fatalf("the package around the sheet is valid: %v", err)
		}
		defer sh.Close()
		for range 10000 {
			_, _, err := sh.Row()
			if err == io.EOF {
				return
			}
			var pe *normalize.ParseError
			if err != nil && !errors.As(err, &pe) {
				t.Fatalf("%q: %v is not a ParseError", sheet, err)
			}
			if err != nil {
				return
			}
		}
	})
}

// minimalBook is a workbook of one sheet with shared strings "a", "b".
func minimalBook(t testing.TB, sheet []byte) []byte {
	var b bytes.Buffer
	z := zip.NewWriter(&b)
	for name, body := range map[string]string{
		"_rels/.rels":                `<Relationships xmlns="http://schemas.openxmlformats.org/package/2006/relationships"><Relationship Id="rId1" Type="http://schemas.openxmlformats.org/officeDocument/2006/relationships/officeDocument" Target="xl/workbook.xml"/></Relationships>`,
		"xl/workbook.xml":            `<workbook xmlns="http://schemas.openxmlformats.org/spreadsheetml/2006/main" xmlns:r="http://schemas.openxmlformats.org/officeDocument/2006/relationships"><sheets><sheet name="S" sheetId="1" r:id="rId1"/></sheets></workbook>`,
		"xl/_rels/workbook.xml.rels": `<Relationships xmlns="http://schemas.openxmlformats.org/package/2006/relationships"><Relationship Id="rId1" Type="http://schemas.openxmlformats.org/officeDocument/2006/relationships/worksheet" Target="worksheets/sheet1.xml"/></Relationships>`,
		"xl/sharedStrings.xml":       `<sst xmlns="http://schemas.openxmlformats.org/spreadsheetml/2006/main"><si><t>a</t></si><si><t>b</t></si></sst>`,
		"xl/worksheets/sheet1.xml":   string(sheet),
	} {
		w, err := z.Create(name)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := io.WriteString(w, body); err != nil {
			t.Fatal(err)
		}
	}
	if err := z.Close(); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// Cells without a reference follow the one before, empty or not; cells
// out of order refuse the sheet.
func TestCellPositions(t *testing.T) {
	sheet := func(row string) string {
		return `<worksheet><sheetData><row r="1"><c t="inlineStr"><is><t>h1</t></is></c><c t="inlineStr"><is><t>h2</t></is></c><c t="inlineStr"><is><t>h3</t></is></c></row>` + row + `</sheetData></worksheet>`
	}
	sh, err := Open(bytes.NewReader(minimalBook(t, []byte(sheet(`<row r="2"><c r="A2" s="0"/><c><v>2</v></c><c t="s"><v>1</v></c></row>`)))), Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := sh.Row(); err != nil {
		t.Fatal(err)
	}
	cells, line, err := sh.Row()
	if err != nil || line != 2 || fmt.Sprint(cells) != "[ 2 b]" {
		t.Fatalf("row 2: %q line %d %v, want [\"\" 2 b] on line 2", cells, line, err)
	}
	sh.Close()
	sh, err = Open(bytes.NewReader(minimalBook(t, []byte(sheet(`<row r="2"><c r="B2"/><c r="A2"><v>1</v></c></row>`)))), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer sh.Close()
	sh.Row()
	if _, _, err := sh.Row(); !errors.Is(err, normalize.CodeInvalidWorkbook) {
		t.Fatalf("cells out of order: %v, want invalid_workbook", err)
	}
}
