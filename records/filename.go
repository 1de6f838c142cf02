package records

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// MaxFileNameLen bounds a submitted file name, in bytes, like most file
// systems do.
const MaxFileNameLen = 255

// FileNameError says why a file name was refused, in one sentence a
// partner's operator can act on.
type FileNameError struct{ Reason string }

func (e *FileNameError) Error() string { return e.Reason }

// CheckFileName is the one rule for the name of a submitted file, whatever
// the door (an SFTP upload, HTTP ?name=, `payintake ingest`): at most limit
// bytes of valid UTF-8 (MaxFileNameLen for a name a partner gives), not "."
// or "..", no leading or trailing whitespace, and no control character
// (Unicode Cc), format character (Cf: bidi overrides such as U+202E,
// zero-width characters, the byte order mark), slash or backslash. The
// error is a *FileNameError.
func CheckFileName(name string, limit int) error {
	bad := func(reason string) error { return &FileNameError{Reason: reason} }
	switch {
	case name == "" || name == "." || name == "..":
		return bad("invalid file name")
	case len(name) > limit:
		return bad(fmt.Sprintf("file name too long (%d bytes, at most %d)", len(name), limit))
	case !utf8.ValidString(name):
		return bad("file names must be valid UTF-8")
	case strings.TrimSpace(name) != name:
		return bad("file names cannot start or end with spaces")
	}
	for _, r := range name {
		if unicode.IsControl(r) || unicode.Is(unicode.Cf, r) || r == '/' || r == '\\' {
			return bad("file names cannot hold control or format characters, slashes or backslashes")
		}
	}
	return nil
}
