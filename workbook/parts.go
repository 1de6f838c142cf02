package workbook

import (
	"archive/zip"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"path"
	"strconv"
	"strings"
)

// The parts of a package a sheet is read with: where the workbook is,
// its sheets and their parts, the shared strings and the cell styles.

// maxPartBytes bounds the parts held in memory (workbook, relationships,
// styles, shared strings, each decompressed): a workbook's own are a few
// megabytes even for a million rows, and a compressed part that claims
// more is refused rather than inflated.
const maxPartBytes = 256 << 20

type sheetEntry struct {
	name, part string
}

type workbookInfo struct {
	part     string // the workbook part (xl/workbook.xml)
	sheets   []sheetEntry
	date1904 bool
}

func findFile(zr *zip.Reader, name string) *zip.File {
	for _, f := range zr.File {
		if strings.EqualFold(strings.ReplaceAll(f.Name, "\\", "/"), name) {
			return f
		}
	}
	return nil
}

// openPart opens a part for streaming, nil when the package has none.
func openPart(zr *zip.Reader, name string) (io.ReadCloser, error) {
	f := findFile(zr, name)
	if f == nil {
		return nil, nil
	}
	rc, err := f.Open()
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", name, err)
	}
	return rc, nil
}

// decodePart decodes a whole (small) part into v; false when there is none.
func decodePart(zr *zip.Reader, name string, v any) (bool, error) {
	rc, err := openPart(zr, name)
	if rc == nil || err != nil {
		return false, err
	}
	defer rc.Close()
	if err := xml.NewDecoder(&limitedPart{r: rc, left: maxPartBytes, name: name}).Decode(v); err != nil {
		return true, fmt.Errorf("read %s: %w", name, err)
	}
	return true, nil
}

var errPartTooLarge = errors.New("part too large")

type limitedPart struct {
	r    io.Reader
	left int64
	name string
}

func (l *limitedPart) Read(p []byte) (int, error) {
	if l.left <= 0 {
		return 0, fmt.Errorf("%s is larger than %d bytes: %w", l.name, int64(maxPartBytes), errPartTooLarge)
	}
	if int64(len(p)) > l.left {
		p = p[:l.left]
	}
	n, err := l.r.Read(p)
	l.left -= int64(n)
	return n, err
}

type relationships struct {
	Rels []struct {
		ID     string `xml:"Id,attr"`
		Type   string `xml:"Type,attr"`
		Target string `xml:"Target,attr"`
	} `xml:"Relationship"`
}

// relsOf is the relationships part of a part (xl/workbook.xml →
// xl/_rels/workbook.xml.rels).
func relsOf(part string) string {
	dir, file := path.Split(part)
	return dir + "_rels/" + file + ".rels"
}

// target resolves a relationship's target against the part it is from.
func target(from, t string) string {
	if strings.HasPrefix(t, "/") {
		return strings.TrimPrefix(t, "/")
	}
	return path.Join(path.Dir(from), t)
}

// readWorkbook finds the workbook part (through the package's
// relationships, xl/workbook.xml when they name none) and its sheets in
// the workbook's order.
func readWorkbook(zr *zip.Reader) (workbookInfo, error) {
	var info workbookInfo
	wbPart := "xl/workbook.xml"
	var root relationships
	if _, err := decodePart(zr, "_rels/.rels", &root); err != nil {
		return info, err
	}
	for _, r := range root.Rels {
		if strings.HasSuffix(r.Type, "/officeDocument") {
			wbPart = target("", r.Target)
		}
	}
	var wb struct {
		Pr *struct {
			Date1904 string `xml:"date1904,attr"`
		} `xml:"workbookPr"`
		Sheets []struct {
			Name string `xml:"name,attr"`
			// r:id, in the relationships namespace
			ID string `xml:"http://schemas.openxmlformats.org/officeDocument/2006/relationships id,attr"`
		} `xml:"sheets>sheet"`
	}
	found, err := decodePart(zr, wbPart, &wb)
	if err != nil {
		return info, err
	}
	if !found {
		return info, fmt.Errorf("no workbook part (%s)", wbPart)
	}
	info.part = wbPart
	if wb.Pr != nil {
		info.date1904 = wb.Pr.Date1904 == "1" || wb.Pr.Date1904 == "true"
	}
	var rels relationships
	if _, err := decodePart(zr, relsOf(wbPart), &rels); err != nil {
		return info, err
	}
	byID := map[string]string{}
	for _, r := range rels.Rels {
		// Chart sheets and dialog sheets have no cells to read.
		if strings.HasSuffix(r.Type, "/worksheet") {
			byID[r.ID] = target(wbPart, r.Target)
		}
	}
	for _, s := range wb.Sheets {
		if p, ok := byID[s.ID]; ok {
			info.sheets = append(info.sheets, sheetEntry{name: s.Name, part: p})
		}
	}
	return info, nil
}

// readStyles returns the number format of each cell style (the index a
// cell's s attribute gives), as a formatKind.
func readStyles(zr *zip.Reader, wbPart string) ([]format, error) {
	var st struct {
		NumFmts []struct {
			ID   int    `xml:"numFmtId,attr"`
			Code string `xml:"formatCode,attr"`
		} `xml:"numFmts>numFmt"`
		Xfs []struct {
			NumFmtID int `xml:"numFmtId,attr"`
		} `xml:"cellXfs>xf"`
	}
	if _, err := decodePart(zr, path.Join(path.Dir(wbPart), "styles.xml"), &st); err != nil {
		return nil, err
	}
	codes := map[int]string{}
	for _, f := range st.NumFmts {
		codes[f.ID] = f.Code
	}
	out := make([]format, len(st.Xfs))
	for i, xf := range st.Xfs {
		out[i] = formatOf(xf.NumFmtID, codes)
	}
	return out, nil
}

// readSharedStrings reads the shared string table: each item's text,
// rich-text runs joined, phonetic guides (rPh) left out as Excel shows
// them.
func readSharedStrings(zr *zip.Reader, wbPart string) ([]string, error) {
	name := path.Join(path.Dir(wbPart), "sharedStrings.xml")
	rc, err := openPart(zr, name)
	if rc == nil || err != nil {
		return nil, err
	}
	defer rc.Close()
	d := xml.NewDecoder(&limitedPart{r: rc, left: maxPartBytes, name: name})
	var out []string
	var b strings.Builder
	depth, inT, inRPh := 0, false, false
	for {
		tok, err := d.RawToken()
		if err == io.EOF {
			return out, nil
		}
		if err != nil {
			return nil, fmt.Errorf("read %s: %w", name, err)
		}
		switch t := tok.(type) {
		case xml.StartElement:
			switch t.Name.Local {
			case "si":
				b.Reset()
				depth++
			case "rPh":
				inRPh = true
			case "t":
				inT = !inRPh
			}
		case xml.EndElement:
			switch t.Name.Local {
			case "si":
				out = append(out, unescapeOOXML(b.String()))
				depth--
			case "rPh":
				inRPh = false
			case "t":
				inT = false
			}
		case xml.CharData:
			if inT && depth > 0 {
				b.Write(t)
			}
		}
	}
}

// unescapeOOXML decodes the _xHHHH_ escapes OOXML writes for characters
// XML cannot hold (control characters), as Excel reads them back.
func unescapeOOXML(s string) string {
	if !strings.Contains(s, "_x") {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		if i+7 <= len(s) && s[i] == '_' && s[i+1] == 'x' && s[i+6] == '_' {
			if n, err := strconv.ParseUint(s[i+2:i+6], 16, 16); err == nil {
				b.WriteRune(rune(n))
				i += 7
				continue
			}
		}
		b.WriteByte(s[i])
		i++
	}
	return b.String()
}
