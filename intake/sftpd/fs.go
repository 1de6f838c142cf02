package sftpd

// The partner's view of the drop zone, served by pkg/sftp's request server.
//
//	/          a directory holding exactly inbox and results
//	/inbox     the login directory; write-only. It shows the partner's files
//	           not received yet (being uploaded, cut off and waiting to be
//	           resumed, temp-named and waiting for a rename; stored in the
//	           database, see upload.go) and the files received over SFTP within
//	           Config.InboxWindow, with their size and time (the time the
//	           client set, else when it arrived). Received files come from the
//	           database, so every connection and every server on the database
//	           shows them. Nothing in /inbox can be read back, and a received
//	           file cannot be changed, renamed or removed.
//	/results   read-only; NAME.result.csv for the latest upload of each name,
//	           read from the database once its processing has committed, and
//	           NAME.review.csv once reviewers have decided every held row of
//	           that file. Files sent by any door (SFTP, ingest, HTTP) show.
//
// No partner-sent name ever becomes a path on the server's disk: uploads are
// spooled to server-named files, so a path can only name the view above.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"sort"
	"sync"
	"time"

	"github.com/pkg/sftp"

	"github.com/payintake/payintake/records"
)

// maxInboxListing bounds how many received files /inbox lists.
const maxInboxListing = 10000

// partnerFS is one SFTP session of one partner.
type partnerFS struct {
	ctx     context.Context
	srv     *Server
	partner string
	log     *slog.Logger
	conn    *idleConn // nil in tests of the view alone

	mu   sync.Mutex
	open int // upload handles open on this session
}

func newPartnerFS(ctx context.Context, srv *Server, partner string, log *slog.Logger) *partnerFS {
	return &partnerFS{ctx: ctx, srv: srv, partner: partner, log: log}
}

// bgCtx outlives the session: what a closed or dropped upload records must
// be recorded even as the connection goes away.
func (fs *partnerFS) bgCtx(d time.Duration) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(fs.ctx), d)
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
	rf, err := fs.srv.cfg.Intake.ResultFileNamed(ctx, fs.partner, vp.name)
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

// ---- FileCmder

func (fs *partnerFS) Filecmd(r *sftp.Request) error {
	switch r.Method {
	case "Setstat":
		return fs.setstat(r)
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

// setstat answers as stat does for the same path: clients set times and
// modes after an upload. A time set on an /inbox file is kept and shown by
// stat and listing (rclone compares it to skip files already sent); a mode
// is accepted and ignored; a size other than the file's is refused.
func (fs *partnerFS) setstat(r *sftp.Request) error {
	vp, err := parsePath(r.Filepath)
	if err != nil {
		return err
	}
	fi, err := fs.stat(vp, r.Filepath)
	if err != nil {
		return err
	}
	switch {
	case vp.dir == dirResults:
		return errReadOnly
	case vp.dir == "":
		return errOutside
	case vp.name == "":
		return nil
	}
	flags, attrs := r.AttrFlags(), r.Attributes()
	if flags.Size && int64(attrs.Size) != fi.Size() {
		return denied(fmt.Sprintf("the size of %s cannot be changed: upload the whole file again to send other bytes", vp.name))
	}
	if !flags.Acmodtime {
		return nil
	}
	mtime := time.Unix(int64(attrs.Mtime), 0)
	if p := fs.srv.pendingFile(fs.partner, vp.name); p != nil {
		p.mu.Lock()
		p.mtime = mtime
		p.mu.Unlock()
		return nil
	}
	ctx, cancel := fs.bgCtx(30 * time.Second)
	defer cancel()
	err = fs.srv.cfg.Store.SetUploadModTime(ctx, fs.partner, vp.name, mtime)
	if err == nil {
		return nil
	}
	if !errors.Is(err, records.ErrNotFound) {
		fs.log.Error("set time of unfinished upload", "file", vp.name, "err", err)
		return failure("the time could not be set now: try again later")
	}
	err = fs.srv.cfg.Store.SetInboxModTime(ctx, fs.partner, vp.name, time.Now().Add(-fs.srv.cfg.InboxWindow), mtime)
	if errors.Is(err, records.ErrNotFound) {
		return notFound(r.Filepath)
	}
	if err != nil {
		fs.log.Error("set time of inbox file", "file", vp.name, "err", err)
		return failure("the time could not be set now: try again later")
	}
	return nil
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
		return denied("only an upload in /inbox not received yet can be renamed, to a name in /inbox")
	}
	if p := fs.srv.pendingFile(fs.partner, src.name); p != nil {
		return denied(fmt.Sprintf("%s is still being uploaded: close it before renaming", src.name))
	}
	if src.name == dst.name {
		if _, got, err := fs.unfinished(src.name); err != nil || got {
			return err
		}
		return fs.notUnfinished(src.name, from, "renamed")
	}
	// Renamed to its final name, the upload is received here: this server
	// takes its lease.
	writer := ""
	if !isTempName(dst.name) {
		writer = fs.srv.id
	}
	ctx, cancel := fs.bgCtx(30 * time.Second)
	up, err := fs.srv.cfg.Store.RenameUpload(ctx, fs.partner, src.name, dst.name, writer, uploadLease)
	cancel()
	switch {
	case errors.Is(err, records.ErrNotFound):
		return fs.notUnfinished(src.name, from, "renamed")
	case errors.Is(err, records.ErrUploadBusy):
		return denied(fmt.Sprintf("%s is still being uploaded: close it before renaming", src.name))
	case err != nil:
		fs.log.Error("rename unfinished upload", "from", src.name, "to", dst.name, "err", err)
		return failure("the upload could not be renamed now: try again later")
	}
	fs.log.Info("upload renamed", "from", src.name, "to", dst.name)
	if isTempName(dst.name) {
		return nil
	}
	p, err := fs.loadPending(up, nil, true)
	if err != nil {
		return err
	}
	return fs.receive(p)
}

// notUnfinished is the answer for name, which is no unfinished upload, to
// an attempt to change it (verb: "renamed", "removed"): received files
// cannot be changed; else it does not exist.
func (fs *partnerFS) notUnfinished(name, p, verb string) error {
	_, got, err := fs.received(name)
	if err != nil {
		return err
	}
	if got {
		if verb == "renamed" {
			return denied(fmt.Sprintf("%s was already received and cannot be renamed: upload it again under the new name", name))
		}
		return denied(fmt.Sprintf("%s was already received and cannot be %s", name, verb))
	}
	return notFound(p)
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
	busy := denied(fmt.Sprintf("%s is being uploaded: close it before removing it", vp.name))
	if pf := fs.srv.pendingFile(fs.partner, vp.name); pf != nil {
		return busy
	}
	ctx, cancel := fs.bgCtx(30 * time.Second)
	up, err := fs.srv.cfg.Store.DiscardUpload(ctx, fs.partner, vp.name, fs.srv.id)
	cancel()
	switch {
	case err == nil:
		fs.log.Info("unfinished upload discarded", "file", up.Name, "bytes", up.Size, "why", "removed by the client")
		return nil
	case errors.Is(err, records.ErrUploadBusy):
		return busy
	case !errors.Is(err, records.ErrNotFound):
		fs.log.Error("discard unfinished upload", "file", vp.name, "err", err)
		return failure("the upload could not be removed now: try again later")
	}
	return fs.notUnfinished(vp.name, p, "removed")
}

// ---- FileLister

func (fs *partnerFS) Filelist(r *sftp.Request) (sftp.ListerAt, error) {
	vp, err := parsePath(r.Filepath)
	if err != nil {
		return nil, err
	}
	switch r.Method {
	case "List":
		return fs.list(vp)
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

func inboxInfo(f records.InboxFile) fileInfo {
	return fileInfo{name: f.Name, size: f.Size, mode: 0o644, mod: f.ModTime}
}

func (fs *partnerFS) list(vp vpath) (sftp.ListerAt, error) {
	switch {
	case vp.dir == "":
		return listerAt{dirInfo(dirInbox, 0o755), dirInfo(dirResults, 0o555)}, nil
	case vp.name != "":
		return nil, denied("not a folder")
	case vp.dir == dirInbox:
		ctx, cancel := fs.bgCtx(30 * time.Second)
		defer cancel()
		got, err := fs.srv.cfg.Store.InboxFiles(ctx, fs.partner, time.Now().Add(-fs.srv.cfg.InboxWindow), maxInboxListing)
		if err != nil {
			fs.log.Error("list inbox files", "err", err)
			return nil, failure("the inbox cannot be listed now: try again later")
		}
		ups, err := fs.srv.cfg.Store.Uploads(ctx, fs.partner, maxInboxListing)
		if err != nil {
			fs.log.Error("list unfinished uploads", "err", err)
			return nil, failure("the inbox cannot be listed now: try again later")
		}
		// A file not received yet shows instead of an earlier one of its
		// name; one written on this server, with its live size.
		var l listerAt
		seen := map[string]bool{}
		for _, p := range fs.srv.pendingFiles(fs.partner) {
			fi := p.info()
			seen[fi.name] = true
			l = append(l, fi)
		}
		for _, up := range ups {
			if !seen[up.Name] {
				seen[up.Name] = true
				l = append(l, uploadInfo(up))
			}
		}
		for _, f := range got {
			if !seen[f.Name] {
				l = append(l, inboxInfo(f))
			}
		}
		sort.Slice(l, func(i, j int) bool { return l[i].Name() < l[j].Name() })
		return l, nil
	default:
		ctx, cancel := fs.bgCtx(30 * time.Second)
		defer cancel()
		rfs, err := fs.srv.cfg.Intake.ResultFiles(ctx, fs.partner)
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
		if fi, got, err := fs.unfinished(vp.name); got || err != nil {
			return fi, err
		}
		f, got, err := fs.received(vp.name)
		if err != nil {
			return fileInfo{}, err
		}
		if !got {
			return fileInfo{}, notFound(p)
		}
		return inboxInfo(f), nil
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
		rf, err := fs.srv.cfg.Intake.ResultFileNamed(ctx, fs.partner, vp.name)
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
