package dispatch

import (
	"crypto/sha256"
	"encoding/hex"
	"strconv"
	"unicode/utf8"
)

// The keys of SPEC "Outbound dispatch": the same in any language, so a
// vendor (or an auditor) can recompute them. The canonical JSON is exactly
// Python's json.dumps(obj, sort_keys=True, separators=(",", ":"),
// ensure_ascii=False): keys sorted, no whitespace, every character written as
// itself except '"', '\\' and the control characters below U+0020 (\b \t \n
// \f \r by name, the others as \u00xx in lower-case hex). Unlike Go's
// encoding/json, '<', '>', '&', U+2028 and U+2029 are not escaped.
// TestKeysAcrossLanguages checks this against Python and Node.

// appendJSONString appends s as a JSON string in the canonical form above.
// Invalid UTF-8 (never stored: PostgreSQL text is valid UTF-8) is written as
// U+FFFD, as Python would refuse it.
func appendJSONString(b []byte, s string) []byte {
	b = append(b, '"')
	for i := 0; i < len(s); {
		c := s[i]
		if c >= 0x20 && c != '"' && c != '\\' && c < utf8.RuneSelf {
			b = append(b, c)
			i++
			continue
		}
		if c < utf8.RuneSelf {
			switch c {
			case '"':
				b = append(b, '\\', '"')
			case '\\':
				b = append(b, '\\', '\\')
			case '\b':
				b = append(b, '\\', 'b')
			case '\f':
				b = append(b, '\\', 'f')
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				const hexDigits = "0123456789abcdef"
				b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = utf8.AppendRune(b, utf8.RuneError)
		} else {
			b = append(b, s[i:i+size]...)
		}
		i += size
	}
	return append(b, '"')
}

// LineCanonical is the canonical JSON object a line key is the hash of:
// {"c": component, "emp": employee_id, "pp": pay_period, "t": partner, "v": version}.
func LineCanonical(partner, employeeID, period, component string, version int) []byte {
	b := make([]byte, 0, 64+len(partner)+len(employeeID)+len(period)+len(component))
	b = append(b, `{"c":`...)
	b = appendJSONString(b, component)
	b = append(b, `,"emp":`...)
	b = appendJSONString(b, employeeID)
	b = append(b, `,"pp":`...)
	b = appendJSONString(b, period)
	b = append(b, `,"t":`...)
	b = appendJSONString(b, partner)
	b = append(b, `,"v":`...)
	b = strconv.AppendInt(b, int64(version), 10)
	return append(b, '}')
}

// LineKey is pl_{partner}_{pay_period}_{first 24 hex digits of SHA-256 of the
// canonical object}: a plain retry keeps it, a new version gets a new one.
func LineKey(partner, employeeID, period, component string, version int) string {
	sum := sha256.Sum256(LineCanonical(partner, employeeID, period, component, version))
	return "pl_" + partner + "_" + period + "_" + hex.EncodeToString(sum[:])[:24]
}

// BatchKey names run number run (from 1) of a partner's period:
// batch_{pay_period}_{first 20 hex digits of SHA-256 of "{partner}:{pay_period}:{run}"}.
func BatchKey(partner, period string, run int) string {
	sum := sha256.Sum256([]byte(partner + ":" + period + ":" + strconv.Itoa(run)))
	return "batch_" + period + "_" + hex.EncodeToString(sum[:])[:20]
}

// ChunkKey is the Idempotency-Key of one request: ck_{first 24 hex digits of
// SHA-256 of the batch key and the chunk's line keys, each followed by "\n"}.
func ChunkKey(batchKey string, lineKeys []string) string {
	h := sha256.New()
	h.Write([]byte(batchKey))
	h.Write([]byte{'\n'})
	for _, k := range lineKeys {
		h.Write([]byte(k))
		h.Write([]byte{'\n'})
	}
	return "ck_" + hex.EncodeToString(h.Sum(nil))[:24]
}
