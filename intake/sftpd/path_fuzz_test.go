package sftpd

import (
	"errors"
	"os"
	"path"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/pkg/sftp"
)

// FuzzParsePath checks that no path a client sends names anything outside
// the partner's view: an accepted path is /, /inbox, /results or one plain
// file name inside one of them, and it is what the path says once cleaned.
// The corpus is in testdata/fuzz/FuzzParsePath; .ci/fuzz runs it for a while.
func FuzzParsePath(f *testing.F) {
	for _, s := range []string{
		"/", "/inbox", "/results/", "/inbox/pay.csv", "inbox/pay.csv", "/inbox/../results/x.result.csv",
		"/../../etc/passwd", "../../../../etc/passwd", "/inbox/../../etc/passwd", `\..\..\etc\passwd`,
		`/results/..\..\etc\passwd`, "/inbox/a/b.csv", "/inbox//pay.csv", "//inbox///pay.csv/", "/inbox/.",
		"/inbox/..", "/inbox/x\x00.csv", "/inbox/\xff\xfe.csv", "/inbox/\u202egpj.csv", "/inbox/ pay.csv",
		"/other/inbox/x.csv", "/INBOX/x.csv", "/inbox/" + strings.Repeat("a", 300), "/inbox/a\nb.csv",
		"/./inbox/./pay.csv", "/results/../inbox/../../..", "", ".", "..", "~", "/~/.ssh/authorized_keys",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, p string) {
		vp, err := parsePath(p)
		if err != nil {
			if !errors.Is(err, sftp.ErrSSHFxPermissionDenied) && !errors.Is(err, os.ErrNotExist) {
				t.Fatalf("parsePath(%q): error %v is neither permission denied nor not found", p, err)
			}
			return
		}
		switch vp.dir {
		case "":
			if vp.name != "" {
				t.Fatalf("parsePath(%q) = %+v: a file in the root", p, vp)
			}
		case dirInbox, dirResults:
		default:
			t.Fatalf("parsePath(%q) = %+v: outside the view", p, vp)
		}
		if vp.name != "" {
			n, limit := vp.name, maxNameLen
			if vp.dir == dirResults {
				limit = maxResultNameLen
			}
			if n == "." || n == ".." || strings.ContainsAny(n, "/\\\x00") || len(n) > limit || !utf8.ValidString(n) || validName(n, limit) != nil {
				t.Fatalf("parsePath(%q) accepted the name %q", p, n)
			}
		}
		want := "/" + vp.dir
		if vp.name != "" {
			want += "/" + vp.name
		}
		if got := path.Clean("/" + p); path.Clean(want) != got {
			t.Fatalf("parsePath(%q) = %+v, but the path cleans to %q", p, vp, got)
		}
	})
}
