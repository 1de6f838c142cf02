package intake

// The partner's view of the drop zone, served by pkg/sftp's request server.
//
//	/          a directory holding exactly inbox and results
//	/inbox     write-only drop folder. Listing it shows only the uploads of
//	           this SFTP session that are still open, and temp-named uploads
//	           waiting to be renamed; received files are in the database, not
//	           here. Stat of a file this session uploaded (open, waiting or
//	           received) gives the bytes written, so clients that check the
//	           size after an upload are satisfied.
//	/results   read-only; NAME.result.csv for the latest upload of each name,
//	           read from the database once its processing has committed, and
//	           NAME.review.csv once reviewers have decided every held row of
//	           that file. Files sent by any door (SFTP, ingest, HTTP) show.
//
// No partner-sent name ever becomes a path on the server's disk: uploads are
// spooled to server-named files, so a path can only name the view above.

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/pkg/sftp"

	"github.com/payintake/payintake/records"
)

const (
	dirInbox   = "inbox"
	dirResults = "results"
	maxNameLen = 255 // bytes, like most file systems
	// A result or review report name is its upload's name without the
	// extension plus ".review.csv" at most: it may be that much longer.
	maxResultNameLen = maxNameLen + len(records.ReviewSuffix)
	// remember at most this many received files per session for Stat
	maxRemembered = 1000
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

// validName accepts file names a partner's system can sensibly send: at most
// limit bytes of UTF-8, no control characters, no slashes or backslashes.
func validName(n string, limit int) error {
	switch {
	case n == "" || n == "." || n == "..":
		return denied("invalid file name")
	case len(n) > limit:
		return denied(fmt.Sprintf("file name too long (%d bytes, at most %d)", len(n), limit))
	case strings.TrimSpace(n) != n:
		return denied("file names cannot start or end with spaces")
	}
	for _, r := range n {
		if r == utf8.RuneError || unicode.IsControl(r) || r == '/' || r == '\\' || r == 0x7f ||
			unicode.Is(unicode.Cf, r) {
			return denied("file names cannot hold control or format characters, slashes or backslashes")
		}
	}
	return nil
}

// isTempName tells client temp names, which are received only once renamed.
func isTempName(n string) bool {
	l := strings.ToLower(n)
	return strings.HasPrefix(n, ".") || strings.HasSuffix(l, ".part") ||
		strings.HasSuffix(l, ".filepart") || strings.HasSuffix(l, ".tmp")
}

// partnerFS is one SFTP session of one partner.
type partnerFS struct {
	ctx     context.Context
	srv     *SFTPServer
	partner string
	log     *slog.Logger

	mu       sync.Mutex
	open     map[*upload]struct{}
	parked   map[string]*parkedFile // temp names closed cleanly, awaiting a rename
	received map[string]fileInfo    // received in this session, for Stat
	recOrder []string
	ended    bool
}

type parkedFile struct {
	spool string
	size  int64
	mod   time.Time
}

func newPartnerFS(ctx context.Context, srv *SFTPServer, partner string, log *slog.Logger) *partnerFS {
	return &partnerFS{ctx: ctx, srv: srv, partner: partner, log: log,
		open: map[*upload]struct{}{}, parked: map[string]*parkedFile{}, received: map[string]fileInfo{}}
}

// end discards temp-named uploads never renamed (they were never received).
func (fs *partnerFS) end() {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	fs.ended = true
	for name, p := range fs.parked {
		_ = os.Remove(p.spool)
		fs.log.Info("temp-named upload discarded: never renamed to a final name", "file", name, "bytes", p.size)
	}
	clear(fs.parked)
}

// bgCtx outlives the session: what a closed or dropped upload records must
// be recorded even as the connection goes away.
func (fs *partnerFS) bgCtx(d time.Duration) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(fs.ctx), d)
}

func (fs *partnerFS) remember(name string, size int64) {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	if _, ok := fs.received[name]; !ok {
		fs.recOrder = append(fs.recOrder, name)
	}
	fs.received[name] = fileInfo{name: name, size: size, mode: 0o644, mod: time.Now()}
	if len(fs.recOrder) > maxRemembered {
		delete(fs.received, fs.recOrder[0])
		fs.recOrder = fs.recOrder[1:]
	}
}

// ---- FileReader

func (fs *partnerFS) Fileread(r *sftp.Request) (io.ReaderAt, error) {
	vp, err := parsePath(r.Filepath)
	if err != nil {
		return nil, err
	}
	switch {
	case vp.dir == dirInbox && vp.name != "":
		return nil, errNoRead
	case vp.dir != dirResults || vp.name == "":
		return nil, denied("not a file")
	}
	if isReviewName(vp.name) {
		return fs.readReview(vp.name, r.Filepath)
	}
	ctx, cancel := fs.bgCtx(30 * time.Second)
	rf, err := fs.srv.cfg.Store.ResultFileNamed(ctx, fs.partner, vp.name)
	cancel()
	if errors.Is(err, records.ErrNotFound) {
		return nil, notFound(r.Filepath)
	}
	if err != nil {
		fs.log.Error("look up result file", "file", vp.name, "err", err)
		return nil, failure("the result could not be read now: try again later")
	}
	fs.srv.m.downloads.Inc()
	fs.log.Info("result download", "file", rf.Name, "envelope", rf.EnvelopeID, "bytes", rf.Size)
	return newResultReader(fs, rf)
}

// ---- FileWriter

func (fs *partnerFS) Filewrite(r *sftp.Request) (io.WriterAt, error) {
	vp, err := parsePath(r.Filepath)
	if err != nil {
		return nil, err
	}
	switch {
	case vp.dir == dirResults:
		return nil, errReadOnly
	case vp.dir != dirInbox:
		return nil, errOutside
	case vp.name == "":
		return nil, denied("/inbox is a folder: upload to /inbox/NAME")
	}
	fs.mu.Lock()
	if len(fs.open) >= maxUploadsPerSession {
		fs.mu.Unlock()
		return nil, failure(fmt.Sprintf("too many uploads open at once on this session (at most %d)", maxUploadsPerSession))
	}
	f, err := os.CreateTemp(fs.srv.cfg.SpoolDir, "upload-*")
	if err != nil {
		fs.mu.Unlock()
		fs.log.Error("create spool file", "err", err)
		return nil, failure("the server cannot take uploads right now: try again later")
	}
	u := &upload{fs: fs, name: vp.name, f: f, max: fs.srv.cfg.MaxFileSize, started: time.Now()}
	fs.open[u] = struct{}{}
	fs.mu.Unlock()
	fs.log.Debug("upload started", "file", vp.name)
	return u, nil
}

// upload is one open write handle. Writes go straight to a spool file at
// their offsets (out of order and concurrently, as the request server's
// workers deliver them); nothing is buffered in memory.
type upload struct {
	fs      *partnerFS
	name    string
	f       *os.File
	max     int64
	started time.Time
	size    atomic.Int64 // end of the furthest write

	mu          sync.Mutex
	failed      error // a write failed: the upload is not received
	transferErr error // the session ended with the handle open
	closed      bool
}

func (u *upload) WriteAt(p []byte, off int64) (int, error) {
	if off < 0 || int64(len(p)) > u.max || off > u.max-int64(len(p)) {
		err := failure(fmt.Sprintf("upload of %s refused: the file is larger than the limit of %s (%d bytes); nothing will be received: split the file or ask the operator to raise --max-file-size",
			u.name, humanBytes(u.max), u.max))
		u.fail(err, "too_large")
		return 0, err
	}
	u.mu.Lock()
	failed := u.failed
	u.mu.Unlock()
	if failed != nil {
		return 0, failed
	}
	n, err := u.f.WriteAt(p, off)
	if err != nil {
		u.fs.log.Error("write spool file", "file", u.name, "err", err)
		err = failure("the server could not store the upload (disk error); nothing will be received: try again later")
		u.fail(err, "failed")
		return n, err
	}
	end := off + int64(n)
	for {
		cur := u.size.Load()
		if end <= cur || u.size.CompareAndSwap(cur, end) {
			break
		}
	}
	u.fs.srv.m.uploadBytes.Add(float64(n))
	return n, nil
}

type failReason struct {
	err    error
	reason string
}

func (e failReason) Error() string { return e.err.Error() }
func (e failReason) Unwrap() error { return e.err }

func (u *upload) fail(err error, reason string) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.failed == nil {
		u.failed = failReason{err: err, reason: reason}
	}
}

// TransferError is called by the request server when the session ends with
// this handle still open: the upload was cut off.
func (u *upload) TransferError(err error) {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.transferErr = err
}

// Close is the end of the upload. Its answer goes to the client only after
// the envelope is durably recorded (and its processing enqueued).
func (u *upload) Close() error {
	u.mu.Lock()
	if u.closed {
		u.mu.Unlock()
		return nil
	}
	u.closed = true
	failed, transferErr := u.failed, u.transferErr
	u.mu.Unlock()
	fs := u.fs
	fs.mu.Lock()
	delete(fs.open, u)
	fs.mu.Unlock()
	size := u.size.Load()
	spool := u.f.Name()
	closeErr := u.f.Close()
	if transferErr == nil && failed == nil && closeErr != nil {
		fs.log.Error("close spool file", "file", u.name, "err", closeErr)
		failed = failReason{err: failure("the server could not store the upload (disk error); nothing was received: try again later"), reason: "failed"}
	}
	if transferErr != nil || failed != nil {
		_ = os.Remove(spool)
		reason := "incomplete"
		if failed != nil {
			var fr failReason
			if errors.As(failed, &fr) {
				reason = fr.reason
			}
		}
		fs.srv.m.uploads.WithLabelValues(reason).Inc()
		fs.srv.m.envelopes.WithLabelValues("sftp", records.StatusIncomplete).Inc()
		ctx, cancel := fs.bgCtx(30 * time.Second)
		defer cancel()
		if err := fs.srv.cfg.Store.MarkIncomplete(ctx, fs.partner, u.name, "sftp", size); err != nil {
			fs.log.Error("record incomplete upload", "file", u.name, "err", err)
		}
		if transferErr != nil {
			fs.log.Warn("upload cut off before a clean close: recorded as incomplete, never processed",
				"file", u.name, "bytes", size, "err", transferErr)
			return nil
		}
		fs.log.Warn("upload refused: recorded as incomplete, never processed", "file", u.name, "bytes", size,
			"reason", reason)
		return failed
	}
	if isTempName(u.name) {
		fs.park(u.name, spool, size)
		return nil
	}
	return fs.receive(u.name, spool, size, u.started)
}

func (fs *partnerFS) park(name, spool string, size int64) {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	if fs.ended {
		_ = os.Remove(spool)
		return
	}
	if old := fs.parked[name]; old != nil {
		_ = os.Remove(old.spool)
	}
	fs.parked[name] = &parkedFile{spool: spool, size: size, mod: time.Now()}
	fs.log.Info("temp-named upload kept until renamed", "file", name, "bytes", size)
}

// receive records a complete upload as an envelope, with its processing job
// in the same transaction, then drops the spool file.
func (fs *partnerFS) receive(name, spool string, size int64, started time.Time) error {
	defer os.Remove(spool)
	ctx, cancel := fs.bgCtx(30 * time.Minute)
	defer cancel()
	env, err := fs.srv.cfg.Store.Receive(ctx, records.Incoming{
		PartnerID: fs.partner, FileName: name, Source: "sftp", Path: spool,
	}, fs.srv.cfg.Enqueue)
	if err != nil {
		fs.srv.m.uploads.WithLabelValues("failed").Inc()
		fs.log.Error("receive upload", "file", name, "bytes", size, "err", err)
		return failure(fmt.Sprintf("the upload of %s could not be recorded (server error); nothing was received: send it again", name))
	}
	fs.remember(name, size)
	fs.srv.m.received(env)
	fs.log.Info("upload received", "file", name, "envelope", env.ID, "status", env.Status,
		"bytes", env.Size, "sha256", fmt.Sprintf("%x", env.SHA256), "replay_of", env.ReplayOf,
		"duration", time.Since(started).Round(time.Millisecond))
	return nil
}

// ---- FileCmder

func (fs *partnerFS) Filecmd(r *sftp.Request) error {
	switch r.Method {
	case "Setstat":
		// Clients set times or modes after an upload; there is nothing to
		// set, so accept it for the inbox and say no elsewhere.
		vp, err := parsePath(r.Filepath)
		if err != nil {
			return err
		}
		if vp.dir == dirResults {
			return errReadOnly
		}
		return nil
	case "Rename", "PosixRename":
		return fs.rename(r.Filepath, r.Target)
	case "Remove":
		return fs.remove(r.Filepath)
	case "Mkdir", "Rmdir":
		if _, err := parsePath(r.Filepath); err != nil {
			return err
		}
		return errNoDirs
	case "Symlink", "Link":
		return errNoLinks
	}
	return sftp.ErrSSHFxOpUnsupported
}

// PosixRename is rename with replace semantics (posix-rename@openssh.com);
// ours replaces anyway.
func (fs *partnerFS) PosixRename(r *sftp.Request) error { return fs.rename(r.Filepath, r.Target) }

func (fs *partnerFS) rename(from, to string) error {
	src, err := parsePath(from)
	if err != nil {
		return err
	}
	dst, err := parsePath(to)
	if err != nil {
		return err
	}
	if src.dir == dirResults || dst.dir == dirResults {
		return errReadOnly
	}
	if src.dir != dirInbox || dst.dir != dirInbox || src.name == "" || dst.name == "" {
		return denied("only a temp-named upload in /inbox can be renamed, to a name in /inbox")
	}
	fs.mu.Lock()
	p := fs.parked[src.name]
	if p == nil {
		_, got := fs.received[src.name]
		uploading := false
		for u := range fs.open {
			uploading = uploading || u.name == src.name
		}
		fs.mu.Unlock()
		if got {
			return denied(fmt.Sprintf("%s was already received and cannot be renamed: upload it again under the new name", src.name))
		}
		if uploading {
			return denied(fmt.Sprintf("%s is still being uploaded: close it before renaming", src.name))
		}
		return notFound(from)
	}
	delete(fs.parked, src.name)
	fs.mu.Unlock()
	fs.log.Info("temp-named upload renamed", "from", src.name, "to", dst.name)
	if isTempName(dst.name) {
		fs.park(dst.name, p.spool, p.size)
		return nil
	}
	return fs.receive(dst.name, p.spool, p.size, p.mod)
}

func (fs *partnerFS) remove(p string) error {
	vp, err := parsePath(p)
	if err != nil {
		return err
	}
	if vp.dir == dirResults {
		return errReadOnly
	}
	if vp.dir != dirInbox || vp.name == "" {
		return errNoDirs
	}
	fs.mu.Lock()
	defer fs.mu.Unlock()
	if pf := fs.parked[vp.name]; pf != nil {
		_ = os.Remove(pf.spool)
		delete(fs.parked, vp.name)
		fs.log.Info("temp-named upload removed by the client", "file", vp.name)
		return nil
	}
	if _, ok := fs.received[vp.name]; ok {
		return denied(fmt.Sprintf("%s was already received and cannot be removed", vp.name))
	}
	return notFound(p)
}

// ---- FileLister

func (fs *partnerFS) Filelist(r *sftp.Request) (sftp.ListerAt, error) {
	vp, err := parsePath(r.Filepath)
	if err != nil {
		return nil, err
	}
	switch r.Method {
	case "List":
		return fs.list(vp, r.Filepath)
	case "Stat", "Lstat":
		fi, err := fs.stat(vp, r.Filepath)
		if err != nil {
			return nil, err
		}
		return listerAt{fi}, nil
	case "Readlink":
		return nil, denied("not a symbolic link")
	}
	return nil, sftp.ErrSSHFxOpUnsupported
}

// Lstat is Stat: there are no links.
func (fs *partnerFS) Lstat(r *sftp.Request) (sftp.ListerAt, error) {
	r.Method = "Stat"
	return fs.Filelist(r)
}

// Readlink always fails: there are no links.
func (fs *partnerFS) Readlink(p string) (string, error) {
	if _, err := parsePath(p); err != nil {
		return "", err
	}
	return "", denied("not a symbolic link")
}

var serverStart = time.Now()

func dirInfo(name string, mode os.FileMode) fileInfo {
	return fileInfo{name: name, dir: true, mode: os.ModeDir | mode, mod: serverStart}
}

func (fs *partnerFS) list(vp vpath, p string) (sftp.ListerAt, error) {
	switch {
	case vp.dir == "":
		return listerAt{dirInfo(dirInbox, 0o755), dirInfo(dirResults, 0o555)}, nil
	case vp.name != "":
		return nil, denied("not a folder")
	case vp.dir == dirInbox:
		var l listerAt
		fs.mu.Lock()
		for u := range fs.open {
			l = append(l, fileInfo{name: u.name, size: u.size.Load(), mode: 0o644, mod: u.started})
		}
		for name, pf := range fs.parked {
			l = append(l, fileInfo{name: name, size: pf.size, mode: 0o644, mod: pf.mod})
		}
		fs.mu.Unlock()
		return l, nil
	default:
		ctx, cancel := fs.bgCtx(30 * time.Second)
		defer cancel()
		rfs, err := fs.srv.cfg.Store.ResultFiles(ctx, fs.partner)
		if err != nil {
			fs.log.Error("list result files", "err", err)
			return nil, failure("results cannot be listed now: try again later")
		}
		reviews, err := fs.reviewReports(ctx, "")
		if err != nil {
			return nil, err
		}
		l := make(listerAt, 0, len(rfs)+len(reviews))
		for _, rf := range rfs {
			l = append(l, resultInfo(rf))
		}
		for _, rr := range reviews {
			l = append(l, reviewInfo(rr))
		}
		return l, nil
	}
}

func resultInfo(rf records.ResultFile) fileInfo {
	return fileInfo{name: rf.Name, size: rf.Size, mode: 0o444, mod: rf.ModTime}
}

func (fs *partnerFS) stat(vp vpath, p string) (fileInfo, error) {
	switch {
	case vp.dir == "":
		return dirInfo("/", 0o755), nil
	case vp.name == "" && vp.dir == dirInbox:
		return dirInfo(dirInbox, 0o755), nil
	case vp.name == "":
		return dirInfo(dirResults, 0o555), nil
	case vp.dir == dirInbox:
		fs.mu.Lock()
		defer fs.mu.Unlock()
		for u := range fs.open {
			if u.name == vp.name {
				return fileInfo{name: u.name, size: u.size.Load(), mode: 0o644, mod: u.started}, nil
			}
		}
		if pf := fs.parked[vp.name]; pf != nil {
			return fileInfo{name: vp.name, size: pf.size, mode: 0o644, mod: pf.mod}, nil
		}
		if fi, ok := fs.received[vp.name]; ok {
			return fi, nil
		}
		return fileInfo{}, notFound(p)
	case isReviewName(vp.name):
		ctx, cancel := fs.bgCtx(30 * time.Second)
		defer cancel()
		rrs, err := fs.reviewReports(ctx, vp.name)
		if err != nil {
			return fileInfo{}, err
		}
		if len(rrs) == 0 {
			return fileInfo{}, notFound(p)
		}
		return reviewInfo(rrs[0]), nil
	default:
		ctx, cancel := fs.bgCtx(30 * time.Second)
		defer cancel()
		rf, err := fs.srv.cfg.Store.ResultFileNamed(ctx, fs.partner, vp.name)
		if errors.Is(err, records.ErrNotFound) {
			return fileInfo{}, notFound(p)
		}
		if err != nil {
			fs.log.Error("look up result file", "file", vp.name, "err", err)
			return fileInfo{}, failure("the result cannot be looked up now: try again later")
		}
		return resultInfo(rf), nil
	}
}

const reviewSuffix = ".review.csv"

func isReviewName(n string) bool { return strings.HasSuffix(strings.ToLower(n), reviewSuffix) }

func reviewInfo(rr records.ReviewReportInfo) fileInfo {
	return fileInfo{name: rr.Name, size: rr.Size, mode: 0o444, mod: rr.CreatedAt}
}

// reviewReports lists the partner's review reports, the latest envelope's
// per name (case-folded), only the one called name if name is not empty.
func (fs *partnerFS) reviewReports(ctx context.Context, name string) ([]records.ReviewReportInfo, error) {
	all, err := fs.srv.cfg.Store.ReviewReports(ctx, fs.partner)
	if err != nil {
		fs.log.Error("list review reports", "err", err)
		return nil, failure("results cannot be listed now: try again later")
	}
	latest := map[string]int{}
	var out []records.ReviewReportInfo
	for _, rr := range all { // oldest first
		key := strings.ToLower(rr.Name)
		if name != "" && key != strings.ToLower(name) {
			continue
		}
		if i, ok := latest[key]; ok {
			out[i] = rr
			continue
		}
		latest[key] = len(out)
		out = append(out, rr)
	}
	return out, nil
}

// readReview opens a review report. Reports are small (one row per held
// change) and stored as one value, so it is read whole.
func (fs *partnerFS) readReview(name, p string) (io.ReaderAt, error) {
	ctx, cancel := fs.bgCtx(30 * time.Second)
	defer cancel()
	rrs, err := fs.reviewReports(ctx, name)
	if err != nil {
		return nil, err
	}
	if len(rrs) == 0 {
		return nil, notFound(p)
	}
	var b bytes.Buffer
	if err := fs.srv.cfg.Store.ReviewReport(ctx, rrs[0].EnvelopeID, &b); err != nil {
		if errors.Is(err, records.ErrNotFound) {
			return nil, notFound(p)
		}
		fs.log.Error("read review report", "file", name, "err", err)
		return nil, failure("the review report could not be read now: try again later")
	}
	fs.srv.m.downloads.Inc()
	fs.srv.m.downloadBytes.Add(float64(b.Len()))
	fs.log.Info("review report download", "file", rrs[0].Name, "envelope", rrs[0].EnvelopeID, "bytes", b.Len())
	return bytes.NewReader(b.Bytes()), nil
}

// fileInfo is an os.FileInfo of the virtual view.
type fileInfo struct {
	name string
	size int64
	mode os.FileMode
	mod  time.Time
	dir  bool
}

func (f fileInfo) Name() string       { return f.name }
func (f fileInfo) Size() int64        { return f.size }
func (f fileInfo) Mode() os.FileMode  { return f.mode }
func (f fileInfo) ModTime() time.Time { return f.mod }
func (f fileInfo) IsDir() bool        { return f.dir }
func (f fileInfo) Sys() any           { return nil }

type listerAt []os.FileInfo

func (l listerAt) ListAt(dst []os.FileInfo, off int64) (int, error) {
	if off >= int64(len(l)) {
		return 0, io.EOF
	}
	n := copy(dst, l[off:])
	if off+int64(n) >= int64(len(l)) {
		return n, io.EOF
	}
	return n, nil
}

// ---- result downloads

// resultReader serves a stored result file at any offset. A goroutine streams
// it from the database (records.Store.WriteResult) into an unlinked temp file;
// reads wait until their range has arrived, so memory use stays small and the
// first bytes go out before the last are fetched.
type resultReader struct {
	fs     *partnerFS
	f      *os.File
	size   int64
	cancel context.CancelFunc

	mu      sync.Mutex
	cond    *sync.Cond
	written int64
	done    bool
	err     error
}

func newResultReader(fs *partnerFS, rf records.ResultFile) (*resultReader, error) {
	f, err := os.CreateTemp(fs.srv.cfg.SpoolDir, "result-*")
	if err != nil {
		fs.log.Error("create result spool file", "err", err)
		return nil, failure("the result could not be read now: try again later")
	}
	_ = os.Remove(f.Name()) // unlinked: it goes away with the handle
	ctx, cancel := fs.bgCtx(30 * time.Minute)
	rr := &resultReader{fs: fs, f: f, size: rf.Size, cancel: cancel}
	rr.cond = sync.NewCond(&rr.mu)
	go func() {
		err := fs.srv.cfg.Store.WriteResult(ctx, rf.EnvelopeID, rr)
		rr.mu.Lock()
		rr.done = true
		if err != nil {
			rr.err = err
		} else if rr.written != rr.size {
			rr.err = fmt.Errorf("result of envelope %d has %d bytes, expected %d", rf.EnvelopeID, rr.written, rr.size)
		}
		rr.cond.Broadcast()
		rr.mu.Unlock()
		if rr.err != nil && ctx.Err() == nil {
			fs.log.Error("stream result file", "envelope", rf.EnvelopeID, "err", rr.err)
		}
	}()
	return rr, nil
}

// Write appends streamed bytes (used by WriteResult only).
func (rr *resultReader) Write(p []byte) (int, error) {
	rr.mu.Lock()
	off := rr.written
	rr.mu.Unlock()
	n, err := rr.f.WriteAt(p, off)
	rr.mu.Lock()
	rr.written += int64(n)
	rr.cond.Broadcast()
	rr.mu.Unlock()
	return n, err
}

func (rr *resultReader) ReadAt(p []byte, off int64) (int, error) {
	if off >= rr.size {
		return 0, io.EOF
	}
	want := min(off+int64(len(p)), rr.size)
	rr.mu.Lock()
	for rr.written < want && !rr.done {
		rr.cond.Wait()
	}
	err, have := rr.err, rr.written
	rr.mu.Unlock()
	if have < want {
		if err == nil {
			err = errors.New("result stream ended early")
		}
		rr.fs.log.Error("read result file", "err", err)
		return 0, failure("the result could not be read now: try again later")
	}
	n, err := rr.f.ReadAt(p[:want-off], off)
	rr.fs.srv.m.downloadBytes.Add(float64(n))
	if err == nil && want < off+int64(len(p)) {
		err = io.EOF
	}
	return n, err
}

func (rr *resultReader) Close() error {
	rr.cancel()
	rr.mu.Lock()
	for !rr.done {
		rr.cond.Wait()
	}
	rr.mu.Unlock()
	return rr.f.Close()
}

func humanBytes(n int64) string {
	switch {
	case n >= 1<<30 && n%(1<<30) == 0:
		return fmt.Sprintf("%d GiB", n>>30)
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%d MiB", n>>20)
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%d KiB", n>>10)
	}
	return fmt.Sprintf("%d bytes", n)
}
