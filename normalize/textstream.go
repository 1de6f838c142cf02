package normalize

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"unicode/utf8"

	"golang.org/x/text/encoding/unicode"
	"golang.org/x/text/transform"
)

const saveAsHint = "save the file as UTF-8, or UTF-16 with a byte-order mark, and send it again"

// decodeInput sniffs the byte-order mark and returns a stream of validated
// UTF-8 text (without BOM). All checks are streaming.
func decodeInput(r io.Reader, maxLine int) (io.Reader, error) {
	br := bufio.NewReaderSize(r, 64<<10)
	head, err := br.Peek(3)
	if err != nil && err != io.EOF && !errors.Is(err, bufio.ErrBufferFull) {
		return nil, err
	}
	switch {
	case len(head) >= 3 && head[0] == 0xEF && head[1] == 0xBB && head[2] == 0xBF:
		_, _ = br.Discard(3)
		return &utf8Validator{src: br, line: 1, maxLine: maxLine, buf: make([]byte, 64<<10)}, nil
	case len(head) >= 2 && (head[0] == 0xFF && head[1] == 0xFE || head[0] == 0xFE && head[1] == 0xFF):
		end := unicode.LittleEndian
		if head[0] == 0xFE {
			end = unicode.BigEndian
		}
		v16 := &utf16Validator{src: br, big: end == unicode.BigEndian, line: 1}
		dec := transform.NewReader(v16, unicode.UTF16(end, unicode.ExpectBOM).NewDecoder())
		return &utf8Validator{src: dec, line: 1, maxLine: maxLine, utf16: true, buf: make([]byte, 64<<10)}, nil
	}
	return &utf8Validator{src: br, line: 1, maxLine: maxLine, buf: make([]byte, 64<<10)}, nil
}

// utf8Validator passes UTF-8 text through, failing with a *ParseError on
// invalid UTF-8, a NUL byte or a line longer than maxLine bytes. Runes split
// across reads of src are carried over, never misjudged.
type utf8Validator struct {
	src     io.Reader
	buf     []byte
	r, w    int // buf[r:w] is validated and not yet delivered
	end     int // buf[w:end] is carried over (an incomplete rune)
	line    int // line of the next byte to validate (1-based)
	lineLen int
	maxLine int
	utf16   bool
	err     error
}

func (v *utf8Validator) Read(p []byte) (int, error) {
	for {
		if v.r < v.w {
			n := copy(p, v.buf[v.r:v.w])
			v.r += n
			return n, nil
		}
		if v.err != nil {
			return 0, v.err
		}
		v.fill()
	}
}

func (v *utf8Validator) fill() {
	carry := copy(v.buf, v.buf[v.w:v.end])
	v.r, v.w, v.end = 0, 0, carry
	n, rerr := v.src.Read(v.buf[carry:])
	v.end += n
	b := v.buf[:v.end]
	i := 0
	for i < len(b) {
		c := b[i]
		if c < utf8.RuneSelf {
			switch c {
			case '\n':
				v.line++
				v.lineLen = 0
				i++
				continue
			case 0:
				v.err = v.nulError()
			}
			if v.err != nil {
				break
			}
			v.lineLen++
			if v.lineLen > v.maxLine {
				v.err = v.longError()
				break
			}
			i++
			continue
		}
		if !utf8.FullRune(b[i:]) {
			switch rerr {
			case nil: // carry the partial rune over to the next read
			case io.EOF:
				v.err = v.encError(b[i])
			default:
				v.err = rerr
			}
			break
		}
		r, size := utf8.DecodeRune(b[i:])
		if r == utf8.RuneError && size == 1 {
			v.err = v.encError(b[i])
			break
		}
		v.lineLen += size
		if v.lineLen > v.maxLine {
			v.err = v.longError()
			break
		}
		i += size
	}
	v.w = i
	if v.err == nil && rerr != nil && v.w == v.end {
		v.err = rerr
	}
	if v.err == nil && rerr != nil && rerr != io.EOF {
		v.err = rerr // a real read error: stop, even with a carried rune
	}
}

func (v *utf8Validator) encError(b byte) error {
	return &ParseError{StartLine: v.line, Line: v.line, Err: CodeInvalidEncoding, Message: fmt.Sprintf(
		"line %d is not valid UTF-8 (byte 0x%02X at byte %d of the line; the file may be in Latin-1 or Windows-1252); %s",
		v.line, b, v.lineLen+1, saveAsHint)}
}

func (v *utf8Validator) nulError() error {
	if v.utf16 {
		return &ParseError{StartLine: v.line, Line: v.line, Err: CodeNULByte, Message: fmt.Sprintf(
			"line %d contains a NUL character, which a CSV file cannot contain; remove it and send the file again", v.line)}
	}
	return &ParseError{StartLine: v.line, Line: v.line, Err: CodeNULByte, Message: fmt.Sprintf(
		"line %d contains a NUL byte, so the file is binary or UTF-16 without a byte-order mark; %s", v.line, saveAsHint)}
}

func (v *utf8Validator) longError() error {
	return &ParseError{StartLine: v.line, Line: v.line, Err: CodeLineTooLong, Message: fmt.Sprintf(
		"line %d is longer than %d bytes; split the data into shorter lines or check that the file is really CSV", v.line, v.maxLine)}
}

// utf16Validator passes UTF-16 bytes through unchanged (the first code unit
// being the BOM) and fails with a *ParseError on an unpaired surrogate or an
// odd number of bytes, which the x/text decoder would silently replace.
type utf16Validator struct {
	src     io.Reader
	big     bool
	odd     bool // one byte of a code unit is pending
	lo      byte // that byte
	highSur bool // the previous code unit was a high surrogate
	line    int
	err     error
}

func (v *utf16Validator) Read(p []byte) (int, error) {
	if v.err != nil {
		return 0, v.err
	}
	n, rerr := v.src.Read(p)
	for i := 0; i < n; i++ {
		if !v.odd {
			v.odd, v.lo = true, p[i]
			continue
		}
		v.odd = false
		var u uint16
		if v.big {
			u = uint16(v.lo)<<8 | uint16(p[i])
		} else {
			u = uint16(p[i])<<8 | uint16(v.lo)
		}
		switch {
		case u >= 0xD800 && u < 0xDC00:
			if v.highSur {
				v.err = v.encError()
				return max(i-1, 0), nil
			}
			v.highSur = true
		case u >= 0xDC00 && u < 0xE000:
			if !v.highSur {
				v.err = v.encError()
				return max(i-1, 0), nil
			}
			v.highSur = false
		default:
			if v.highSur {
				v.err = v.encError()
				return max(i-1, 0), nil
			}
			if u == '\n' {
				v.line++
			}
		}
	}
	if rerr == io.EOF && (v.odd || v.highSur) {
		v.err = v.encError()
		if n > 0 {
			n-- // hold back a byte so the decoder cannot finish cleanly first
		}
		return n, nil
	}
	return n, rerr
}

func (v *utf16Validator) encError() error {
	return &ParseError{StartLine: v.line, Line: v.line, Err: CodeInvalidEncoding, Message: fmt.Sprintf(
		"line %d is not valid UTF-16 (a broken character or a truncated file); %s", v.line, saveAsHint)}
}
