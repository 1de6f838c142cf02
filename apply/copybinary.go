package apply

import (
	"encoding/binary"
	"errors"
	"time"
)

// PostgreSQL's binary COPY format, for the records a first file read twice
// writes (directRows): the backend takes each value as it is stored
// instead of parsing text (numeric_in, date_in, the bytea hex decoding:
// 0.4-0.6 s of backend CPU per 1,000,000 rows, the backend being what a
// first file waits for), and Go neither escapes text nor hex-encodes the
// content hash. The values are the canonical ones normalize wrote (plain
// decimals, ISO dates); one that is not makes the encoding fail, and the
// file is staged instead.

// copyBinaryHeader opens a binary COPY stream: the signature, no flags, no
// header extension.
var copyBinaryHeader = []byte("PGCOPY\n\xff\r\n\x00\x00\x00\x00\x00\x00\x00\x00\x00")

// copyBinaryTrailer ends it: a tuple of -1 fields.
var copyBinaryTrailer = []byte{0xff, 0xff}

var errNotCanonical = errors.New("not a canonical value")

func appendInt16(b []byte, v int16) []byte { return binary.BigEndian.AppendUint16(b, uint16(v)) }

func appendInt32(b []byte, v int32) []byte { return binary.BigEndian.AppendUint32(b, uint32(v)) }

// appendBinaryNull appends a NULL field.
func appendBinaryNull(b []byte) []byte { return appendInt32(b, -1) }

// appendBinaryText appends a text field; "" is NULL, as in appendCopyText.
func appendBinaryText(b []byte, v string) []byte {
	if v == "" {
		return appendBinaryNull(b)
	}
	b = appendInt32(b, int32(len(v)))
	return append(b, v...)
}

func appendBinaryBytes(b []byte, v []byte) []byte {
	b = appendInt32(b, int32(len(v)))
	return append(b, v...)
}

func appendBinaryInt8(b []byte, v int64) []byte {
	b = appendInt32(b, 8)
	return binary.BigEndian.AppendUint64(b, uint64(v))
}

func appendBinaryInt4(b []byte, v int32) []byte {
	b = appendInt32(b, 4)
	return appendInt32(b, v)
}

// appendBinaryNumeric appends the decimal v ([-]digits[.digits]; "" is
// NULL) as a numeric field: base-10,000 digits, the weight of the first,
// the sign and the display scale (the count of fraction digits, as
// numeric_in keeps it). Leading and trailing zero groups may be left in:
// the backend strips them (make_result), as numeric_in does.
func appendBinaryNumeric(b []byte, v string) ([]byte, error) {
	if v == "" {
		return appendBinaryNull(b), nil
	}
	sign := int16(0)
	if v[0] == '-' {
		sign, v = 0x4000, v[1:]
	}
	intPart, frac := v, ""
	for i := 0; i < len(v); i++ {
		if v[i] == '.' {
			intPart, frac = v[:i], v[i+1:]
			break
		}
	}
	if intPart == "" || !allDigitsASCII(intPart) || !allDigitsASCII(frac) || len(frac) > 0x3fff || len(intPart) > 4*0x7fff {
		return b, errNotCanonical
	}
	nInt := (len(intPart) + 3) / 4
	nFrac := (len(frac) + 3) / 4
	b = appendInt32(b, int32(8+2*(nInt+nFrac)))
	b = appendInt16(b, int16(nInt+nFrac))
	b = appendInt16(b, int16(nInt-1))
	b = appendInt16(b, sign)
	b = appendInt16(b, int16(len(frac)))
	// The integer part in groups of four from the right: the first group
	// takes what is left over.
	first := len(intPart) - 4*(nInt-1)
	b = appendInt16(b, int16(digitsValue(intPart[:first])))
	for i := first; i < len(intPart); i += 4 {
		b = appendInt16(b, int16(digitsValue(intPart[i:i+4])))
	}
	// The fraction in groups of four from the left, the last padded with zeros.
	for i := 0; i < len(frac); i += 4 {
		g := frac[i:min(i+4, len(frac))]
		d := digitsValue(g)
		for range 4 - len(g) {
			d *= 10
		}
		b = appendInt16(b, int16(d))
	}
	return b, nil
}

func allDigitsASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

func digitsValue(s string) int {
	n := 0
	for i := 0; i < len(s); i++ {
		n = n*10 + int(s[i]-'0')
	}
	return n
}

// postgresEpochDay is day 0 of a binary date, 2000-01-01, in days since 1970-01-01.
const postgresEpochDay = 10957

// appendBinaryDate appends the ISO date v (YYYY-MM-DD; "" is NULL) as the
// days since 2000-01-01.
func appendBinaryDate(b []byte, v string) ([]byte, error) {
	if v == "" {
		return appendBinaryNull(b), nil
	}
	if len(v) != 10 || v[4] != '-' || v[7] != '-' || !allDigitsASCII(v[:4]) || !allDigitsASCII(v[5:7]) || !allDigitsASCII(v[8:]) {
		return b, errNotCanonical
	}
	y, m, d := digitsValue(v[:4]), digitsValue(v[5:7]), digitsValue(v[8:])
	t := time.Date(y, time.Month(m), d, 0, 0, 0, 0, time.UTC)
	if t.Year() != y || int(t.Month()) != m || t.Day() != d { // not a day of the calendar
		return b, errNotCanonical
	}
	return appendBinaryInt4(b, int32(t.Unix()/86400-postgresEpochDay)), nil
}
