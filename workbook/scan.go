package workbook

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"strconv"
	"unicode/utf8"
)

// scanner tokenises a worksheet's XML, the one part that grows with the
// rows: encoding/xml's decoder spends most of a large sheet's reading time
// building tokens the reader throws away, so the sheet gets a tokeniser
// for what SpreadsheetML uses — elements with attributes, text, the five
// predefined entities and character references, CDATA, comments and
// processing instructions (skipped). A DOCTYPE (entity expansion) is
// refused, and so is text that is not UTF-8. Names lose their namespace
// prefix ("x:row" is "row"), as the reader matches local names only. The
// small parts (workbook, styles, shared strings) are read with
// encoding/xml.
type scanner struct {
	r     *bufio.Reader
	kind  tokKind
	name  []byte    // the element's local name (start, end, empty)
	attrs []attrTok // start and empty elements' attributes, reused
	text  []byte    // text, entities decoded
	buf   []byte    // attribute names and values, reused
	cr    bool      // the last raw byte appended was a CR (written as LF)
}

type tokKind uint8

const (
	tokText  tokKind = iota
	tokStart         // <name ...>
	tokEnd           // </name>
	tokEmpty         // <name .../>
)

type attrTok struct{ name, value []byte }

// maxToken bounds a name, an attribute value or a text: a cell holds at
// most 32,767 characters, so a sheet with a longer token is not Excel's.
const maxToken = 1 << 20

var errSheetSyntax = errors.New("not well-formed XML")

func newScanner(r io.Reader) *scanner {
	return &scanner{r: bufio.NewReaderSize(r, 64<<10)}
}

func syntaxErr(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{errSheetSyntax}, args...)...)
}

// next reads the next token: io.EOF at the end of the part.
func (s *scanner) next() error {
	s.text = s.text[:0]
	for {
		buf, err := s.buffered()
		if err != nil {
			if err == io.EOF && len(s.text) > 0 {
				return s.textDone()
			}
			return err
		}
		i := indexEither(buf, '<', '&')
		if i < 0 {
			s.text = s.appendRaw(s.text, buf)
			_, _ = s.r.Discard(len(buf))
		} else {
			s.text = s.appendRaw(s.text, buf[:i])
			_, _ = s.r.Discard(i)
			if buf[i] == '<' {
				if len(s.text) > 0 {
					return s.textDone()
				}
				_, _ = s.r.Discard(1)
				return s.markup()
			}
			_, _ = s.r.Discard(1)
			if s.text, err = s.entity(s.text); err != nil {
				return err
			}
		}
		if len(s.text) > maxToken {
			return syntaxErr("text longer than %d bytes", maxToken)
		}
	}
}

// appendRaw appends text as read (not a reference) to b, with XML's
// end-of-line handling: CR LF and a lone CR are LF (a CR written &#13;
// stays a CR).
func (s *scanner) appendRaw(b, raw []byte) []byte {
	if len(raw) == 0 {
		return b
	}
	if s.cr && raw[0] == '\n' {
		raw = raw[1:]
	}
	s.cr = false
	for {
		i := bytes.IndexByte(raw, '\r')
		if i < 0 {
			return append(b, raw...)
		}
		b = append(append(b, raw[:i]...), '\n')
		raw = raw[i+1:]
		if len(raw) == 0 {
			s.cr = true
			return b
		}
		if raw[0] == '\n' {
			raw = raw[1:]
		}
	}
}

// buffered returns the bytes the reader holds, filling it when empty.
func (s *scanner) buffered() ([]byte, error) {
	if s.r.Buffered() == 0 {
		if _, err := s.r.Peek(1); err != nil {
			return nil, err
		}
	}
	return s.r.Peek(s.r.Buffered())
}

// indexEither is the index of the first a or b in buf, -1 when none. A
// loop, not two bytes.IndexByte: the one not found would scan the whole
// buffer every time.
func indexEither(buf []byte, a, b byte) int {
	for i, c := range buf {
		if c == a || c == b {
			return i
		}
	}
	return -1
}

// indexAnyOf3 is indexEither for three bytes.
func indexAnyOf3(buf []byte, a, b, c byte) int {
	for i, x := range buf {
		if x == a || x == b || x == c {
			return i
		}
	}
	return -1
}

func (s *scanner) textDone() error {
	if !utf8.Valid(s.text) {
		return syntaxErr("text is not UTF-8")
	}
	s.kind = tokText
	return nil
}

// markup reads what follows a '<'.
func (s *scanner) markup() error {
	s.cr = false
	b, err := s.r.ReadByte()
	if err != nil {
		return unexpected(err)
	}
	switch b {
	case '?':
		return s.skipPast("?>")
	case '!':
		head, _ := s.r.Peek(7)
		switch {
		case bytes.HasPrefix(head, []byte("--")):
			_, _ = s.r.Discard(2)
			return s.skipPast("-->")
		case bytes.Equal(head, []byte("[CDATA[")):
			_, _ = s.r.Discard(7)
			return s.cdata()
		}
		return syntaxErr("a DOCTYPE or other declaration, which a worksheet has not")
	case '/':
		if s.name, err = s.readName(s.name[:0]); err != nil {
			return err
		}
		s.skipSpace()
		if c, err := s.r.ReadByte(); err != nil || c != '>' {
			return syntaxErr("end tag </%s not closed", s.name)
		}
		s.kind = tokEnd
		return nil
	}
	if err := s.r.UnreadByte(); err != nil {
		return err
	}
	if s.name, err = s.readName(s.name[:0]); err != nil {
		return err
	}
	s.attrs, s.buf = s.attrs[:0], s.buf[:0]
	for {
		s.skipSpace()
		c, err := s.r.ReadByte()
		if err != nil {
			return unexpected(err)
		}
		switch c {
		case '>':
			s.kind = tokStart
			return s.attrsDone()
		case '/':
			if c, err := s.r.ReadByte(); err != nil || c != '>' {
				return syntaxErr("<%s: '/' not followed by '>'", s.name)
			}
			s.kind = tokEmpty
			return s.attrsDone()
		}
		if err := s.r.UnreadByte(); err != nil {
			return err
		}
		if err := s.attr(); err != nil {
			return err
		}
	}
}

// attr reads name="value" (or 'value') into buf; attrsDone points the
// attributes into buf once it no longer grows.
func (s *scanner) attr() error {
	start := len(s.buf)
	var err error
	if s.buf, err = s.readName(s.buf); err != nil {
		return err
	}
	nameEnd := len(s.buf)
	s.skipSpace()
	if c, err := s.r.ReadByte(); err != nil || c != '=' {
		return syntaxErr("attribute %s of <%s> without a value", s.buf[start:nameEnd], s.name)
	}
	s.skipSpace()
	q, err := s.r.ReadByte()
	if err != nil || q != '"' && q != '\'' {
		return syntaxErr("attribute %s of <%s> not quoted", s.buf[start:nameEnd], s.name)
	}
	for {
		buf, err := s.buffered()
		if err != nil {
			return unexpected(err)
		}
		i := indexAnyOf3(buf, q, '&', '<')
		if i >= 0 && buf[i] == '<' {
			return syntaxErr("'<' in an attribute of <%s>", s.name)
		}
		if i < 0 {
			s.buf = s.appendRaw(s.buf, buf)
			_, _ = s.r.Discard(len(buf))
		} else {
			s.buf = s.appendRaw(s.buf, buf[:i])
			_, _ = s.r.Discard(i + 1)
			if buf[i] == q {
				if !utf8.Valid(s.buf[nameEnd:]) {
					return syntaxErr("attribute of <%s> is not UTF-8", s.name)
				}
				// Lengths now, slices in attrsDone: buf may move as it grows.
				s.attrs = append(s.attrs, attrTok{name: s.buf[start:nameEnd:nameEnd], value: s.buf[nameEnd:len(s.buf):len(s.buf)]})
				return nil
			}
			if s.buf, err = s.entity(s.buf); err != nil {
				return err
			}
		}
		if len(s.buf) > maxToken {
			return syntaxErr("attributes of <%s> longer than %d bytes", s.name, maxToken)
		}
	}
}

// attrsDone re-slices the attributes into buf's final array.
func (s *scanner) attrsDone() error {
	off := 0
	for i, a := range s.attrs {
		n, v := len(a.name), len(a.value)
		s.attrs[i] = attrTok{name: s.buf[off : off+n], value: s.buf[off+n : off+n+v]}
		off += n + v
	}
	return nil
}

// attrValue returns the value of the attribute with this local name.
func (s *scanner) attrValue(name string) []byte {
	for _, a := range s.attrs {
		if string(a.name) == name {
			return a.value
		}
	}
	return nil
}

// readName appends a name (up to white space, '/', '>' or '=') to b,
// without its namespace prefix.
func (s *scanner) readName(b []byte) ([]byte, error) {
	start := len(b)
	for {
		buf, err := s.buffered()
		if err != nil {
			return b, unexpected(err)
		}
		end := -1
		for i, c := range buf {
			if c == ' ' || c == '\t' || c == '\r' || c == '\n' || c == '/' || c == '>' || c == '=' {
				end = i
				break
			}
			if c == '<' || c == '"' || c == '\'' || c == '&' {
				return b, syntaxErr("%q in a name", c)
			}
		}
		if end < 0 {
			b = append(b, buf...)
			_, _ = s.r.Discard(len(buf))
		} else {
			b = append(b, buf[:end]...)
			_, _ = s.r.Discard(end)
		}
		if len(b)-start > 256 {
			return b, syntaxErr("a name longer than 256 bytes")
		}
		if end >= 0 {
			break
		}
	}
	if len(b) == start {
		return b, syntaxErr("a tag without a name")
	}
	// encoding/xml's rule: a prefix and a local name, both non-empty.
	if i := bytes.IndexByte(b[start:], ':'); i >= 1 && i < len(b)-start-1 {
		b = append(b[:start], b[start+i+1:]...)
	}
	return b, nil
}

func (s *scanner) skipSpace() {
	for {
		buf, err := s.buffered()
		if err != nil {
			return
		}
		n := 0
		for n < len(buf) && (buf[n] == ' ' || buf[n] == '\t' || buf[n] == '\r' || buf[n] == '\n') {
			n++
		}
		_, _ = s.r.Discard(n)
		if n < len(buf) {
			return
		}
	}
}

// skipPast discards up to and including end.
func (s *scanner) skipPast(end string) error {
	matched := 0
	for n := 0; ; n++ {
		c, err := s.r.ReadByte()
		if err != nil {
			return unexpected(err)
		}
		switch {
		case c == end[matched]:
			matched++
			if matched == len(end) {
				return s.next()
			}
		case c == end[0]:
			matched = 1
		default:
			matched = 0
		}
		if n > maxToken {
			return syntaxErr("a comment or instruction longer than %d bytes", maxToken)
		}
	}
}

// cdata reads a CDATA section's text, as text.
func (s *scanner) cdata() error {
	for {
		c, err := s.r.ReadByte()
		if err != nil {
			return unexpected(err)
		}
		s.text = s.appendRaw(s.text, []byte{c})
		if bytes.HasSuffix(s.text, []byte("]]>")) {
			s.text = s.text[:len(s.text)-3]
			if len(s.text) == 0 {
				return s.next() // an empty section is no text
			}
			return s.textDone()
		}
		if len(s.text) > maxToken {
			return syntaxErr("text longer than %d bytes", maxToken)
		}
	}
}

// entity decodes the reference after a '&' and appends it to b.
func (s *scanner) entity(b []byte) ([]byte, error) {
	s.cr = false
	var name [12]byte
	n := 0
	for {
		c, err := s.r.ReadByte()
		if err != nil {
			return b, unexpected(err)
		}
		if c == ';' {
			break
		}
		if n == len(name) {
			return b, syntaxErr("an entity reference longer than %d bytes", len(name))
		}
		name[n] = c
		n++
	}
	switch ref := string(name[:n]); ref {
	case "lt":
		return append(b, '<'), nil
	case "gt":
		return append(b, '>'), nil
	case "amp":
		return append(b, '&'), nil
	case "quot":
		return append(b, '"'), nil
	case "apos":
		return append(b, '\''), nil
	default:
		var v uint64
		var err error
		switch {
		case len(ref) > 2 && (ref[:2] == "#x" || ref[:2] == "#X"):
			v, err = strconv.ParseUint(ref[2:], 16, 32)
		case len(ref) > 1 && ref[0] == '#':
			v, err = strconv.ParseUint(ref[1:], 10, 32)
		default:
			return b, syntaxErr("unknown entity &%s;", ref)
		}
		if err != nil || v == 0 || v > utf8.MaxRune || !utf8.ValidRune(rune(v)) {
			return b, syntaxErr("invalid character reference &%s;", ref)
		}
		return utf8.AppendRune(b, rune(v)), nil
	}
}

func unexpected(err error) error {
	if err == io.EOF {
		return io.ErrUnexpectedEOF
	}
	return err
}
