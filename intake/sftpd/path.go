package sftpd

// Path rules of the drop zone: what a client path may name, and which names
// are accepted for uploads.

import (
	"fmt"
	"os"
	"path"
	"strings"
	"unicode/utf8"

	"github.com/pkg/sftp"

	"github.com/payintake/payintake/records"
)

const (
	dirInbox   = "inbox"
	dirResults = "results"
	maxNameLen = records.MaxFileNameLen
	// A result or review report name is its upload's name without the
	// extension plus ".review.csv" or ".result.xlsx" (a workbook) at most:
	// it may be that much longer.
	maxResultNameLen = maxNameLen + max(len(records.ReviewSuffix), len(records.WorkbookResultSuffix))
)

var (
	errReadOnly = denied("/results is read-only: upload files to /inbox")
	errNoRead   = denied("files in /inbox cannot be read back: download results from /results")
	errOutside  = denied("only /inbox and /results exist on this server")
	errNoLinks  = denied("links are not supported")
	errNoDirs   = denied("folders cannot be created or removed: use /inbox and /results")
)

// denied is a permission-denied SFTP status with a message for the client.
func denied(msg string) error { return fmt.Errorf("%s: %w", msg, sftp.ErrSSHFxPermissionDenied) }

// failure is a generic SFTP failure with a message for the client.
func failure(msg string) error { return fmt.Errorf("%s: %w", msg, sftp.ErrSSHFxFailure) }

func notFound(p string) error {
	return &os.PathError{Op: "open", Path: p, Err: os.ErrNotExist}
}

// vpath is a path of the partner's view.
type vpath struct {
	dir  string // "" for the root, else dirInbox or dirResults
	name string // "" for a directory
}

// parsePath confines a client path to the view. The request server hands
// over cleaned absolute paths; everything is checked again here anyway.
func parsePath(p string) (vpath, error) {
	if p == "" || strings.ContainsRune(p, 0) || strings.Contains(p, `\`) || !utf8.ValidString(p) {
		return vpath{}, denied("invalid path: use plain names like /inbox/payroll.csv")
	}
	if !strings.HasPrefix(p, "/") {
		p = "/" + p
	}
	p = path.Clean(p)
	if p == "/" {
		return vpath{}, nil
	}
	parts := strings.Split(strings.TrimPrefix(p, "/"), "/")
	if parts[0] != dirInbox && parts[0] != dirResults {
		return vpath{}, notFound(p)
	}
	if len(parts) == 1 {
		return vpath{dir: parts[0]}, nil
	}
	if len(parts) > 2 {
		return vpath{}, notFound(p)
	}
	limit := maxNameLen
	if parts[0] == dirResults {
		limit = maxResultNameLen
	}
	if err := validName(parts[1], limit); err != nil {
		return vpath{}, err
	}
	return vpath{dir: parts[0], name: parts[1]}, nil
}

// validName applies records.CheckFileName, the rule of every door, with
// limit bytes (longer in /results: a review report's suffix).
func validName(n string, limit int) error {
	if err := records.CheckFileName(n, limit); err != nil {
		return denied(err.Error())
	}
	return nil
}

// isTempName tells client temp names, which are received only once renamed.
func isTempName(n string) bool {
	l := strings.ToLower(n)
	return strings.HasPrefix(n, ".") || strings.HasSuffix(l, ".part") ||
		strings.HasSuffix(l, ".filepart") || strings.HasSuffix(l, ".tmp")
}
