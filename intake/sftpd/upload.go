package sftpd

// Uploads to /inbox.
//
// A file not received yet is an unfinished upload of its partner, stored in
// the database (records.Upload): cut off and waiting to be resumed, or
// temp-named and waiting for a rename. Any connection of the partner to any
// server on the database sees it, resumes it or renames it, for
// Config.ResumeWindow after its last write; then it is discarded (swept
// from the database by whichever server comes first).
//
// While a handle writes it, the upload is a pending file of this server:
// its bytes go to a local spool (and, from byte 0, stream into the
// envelope's transaction), and the server holds a lease on the upload's row
// so that no other server resumes it at the same time. When the handle ends
// without the file being received (cut off, refused but resumable, or
// temp-named), the bytes past those already stored are stored with the
// hash state they end at, and the lease is released; a resume, on this
// server or another, copies the stored bytes into a new spool and goes on
// from there. While the handle writes, the same is stored every
// Config.Checkpoint (lease kept), in the background: a server that dies
// while writing loses what arrived since the last checkpoint, and its lease
// runs out after at most uploadLease, which a resume waits for.
//
// Open flags and offsets are honoured exactly or refused with a message:
//
//	TRUNC         a new upload, from empty (a pending file of that name is discarded)
//	no TRUNC      resume: the pending file of that name is continued, its bytes
//	              kept; a write may repeat bytes already uploaded (identical
//	              only) or add new ones; a received file cannot be written
//	APPEND        as no TRUNC, and writes below the size at open are refused
//	CREAT         without it, a name that does not exist is "no such file"
//	EXCL          a name that exists (pending or received) is refused
//
// Bytes are never changed once written, and a write may start at most
// maxHoleAhead past the bytes that are contiguous from 0 (out-of-order
// pipelined writes fit; a sparse file does not). The SHA-256 is computed as
// bytes arrive: the contiguous prefix is hashed at once, writes ahead of it
// are held (in memory up to maxHeldInMemory, else re-read from the spool's
// page cache) until the gap before them closes. A clean close with a gap left
// is refused. So what is received is the bytes the client meant, hashed once
// and stored in one read of the spool.

import (
	"context"
	"crypto/sha256"
	"encoding"
	"errors"
	"fmt"
	"hash"
	"io"
	"os"
	"sync"
	"time"

	"github.com/pkg/sftp"

	"github.com/payintake/payintake/intake"
	"github.com/payintake/payintake/records"
)

const (
	// maxHoleAhead is how far past the contiguous end of an upload a write may
	// start: pipelined clients send writes slightly out of order, never more
	// than their requests in flight (a few MiB).
	maxHoleAhead = 8 << 20
	// maxHeldInMemory bounds the out-of-order bytes of one upload kept in
	// memory for hashing; more are re-read from the spool when the gap closes.
	maxHeldInMemory = 1 << 20
	// maxSpareBuffers bounds the buffers of held writes kept for reuse.
	maxSpareBuffers = 16
	// maxPendingPerPartner bounds the files of one partner not received yet
	// (open, cut off, or temp-named waiting for a rename).
	maxPendingPerPartner = 64
	// uploadLease is how long a server's claim on an upload it writes lasts
	// unless renewed (every uploadLease/3 while it runs): after a server
	// dies, its uploads can be resumed elsewhere once this has passed.
	uploadLease = 6 * time.Second
	// resumeWait is how long an open for resume waits for the file's previous
	// handle to be released (a connection that has just dropped, on this
	// server or another): longer than uploadLease, so that a resume right
	// after a server died waits for its lease to run out instead of failing.
	resumeWait = uploadLease + 2*time.Second
	// DefaultCheckpoint is how often an upload being written is stored
	// (Config.Checkpoint): a few seconds of a transfer are lost when its
	// server dies, and an upload shorter than this is stored only once.
	DefaultCheckpoint = 10 * time.Second
	// DefaultResumeWindow is how long a file not received yet can be resumed.
	DefaultResumeWindow = 24 * time.Hour
)

// pending is an unfinished upload being written by a handle on this server.
type pending struct {
	id      int64 // the upload's row (records.Upload)
	spool   string
	partner string
	started time.Time

	mu      sync.Mutex
	name    string
	f       *os.File // open while the handle writes
	size    int64    // end of the furthest write
	hashed  int64    // bytes [0, hashed) are hashed into h
	h       hash.Hash
	held    map[int64]heldWrite // writes past hashed, waiting for the gap before them
	heldMem int64
	spare   [][]byte      // buffers of held writes hashed since, to hold others
	writer  *upload       // the handle writing
	done    chan struct{} // closed once the handle's end is stored
	touched time.Time
	mtime   time.Time // set by the client, zero if never
	// saving is closed when the running checkpoint ends (nil: none runs);
	// saved is how many bytes are stored, savedAt when the last checkpoint
	// began (or the handle opened).
	saving  chan struct{}
	saved   int64
	savedAt time.Time
	// stream copies the hashed bytes into the database as they arrive, so
	// that a clean close only records the envelope; nil when the upload did
	// not start from byte 0 in this handle, or the stream failed (the
	// spool is then stored at the close, as without it).
	stream *records.Stream
}

// startStream gives a new upload from byte 0 its database stream, when a
// connection for it is free. Called with p.mu held.
func (p *pending) startStream(fs *partnerFS) {
	if p.stream != nil || p.hashed != 0 || isTempName(p.name) {
		return
	}
	st, err := fs.srv.cfg.Store.StartStream(context.WithoutCancel(fs.ctx), fs.partner)
	if err != nil {
		if !errors.Is(err, records.ErrNoStream) {
			fs.log.Warn("upload stored at its close instead of while it arrives", "file", p.name, "err", err)
		}
		return
	}
	p.stream = st
}

// hashed adds b, the bytes that follow the contiguous prefix, to the hash
// and to the stream. Called with p.mu held.
func (p *pending) addHashed(fs *partnerFS, b []byte) {
	p.h.Write(b)
	p.hashed += int64(len(b))
	if p.stream == nil {
		return
	}
	if err := p.stream.Write(b); err != nil {
		fs.log.Warn("upload stored at its close instead of while it arrives", "file", p.name, "err", err)
		p.dropStream()
	}
}

// dropStream ends p's stream, its bytes not recorded. Called with p.mu held.
func (p *pending) dropStream() {
	if p.stream != nil {
		p.stream.Abort()
		p.stream = nil
	}
}

type heldWrite struct {
	n    int64
	data []byte // nil: read it back from the spool
}

func (p *pending) info() fileInfo {
	p.mu.Lock()
	defer p.mu.Unlock()
	mod := p.mtime
	if mod.IsZero() {
		mod = p.touched
	}
	return fileInfo{name: p.name, size: p.size, mode: 0o644, mod: mod}
}

// settle drops what is not contiguous from 0 (writes past a gap that never
// closed): what remains is what a resume continues. Called with p.mu held
// and no writer.
func (p *pending) settle() {
	if p.size == p.hashed {
		return
	}
	clear(p.held)
	p.heldMem = 0
	p.size = p.hashed
	_ = os.Truncate(p.spool, p.hashed)
}

// ---- the server's pending files

// pendingFile is the partner's file called name being written on this
// server, or nil.
func (s *Server) pendingFile(partner, name string) *pending {
	s.imu.Lock()
	defer s.imu.Unlock()
	return s.inbox[partner][name]
}

func (s *Server) pendingFiles(partner string) []*pending {
	s.imu.Lock()
	defer s.imu.Unlock()
	out := make([]*pending, 0, len(s.inbox[partner]))
	for _, p := range s.inbox[partner] {
		out = append(out, p)
	}
	return out
}

// hashState is h's state, to be stored with the bytes it has hashed.
func hashState(h hash.Hash) []byte {
	b, err := h.(encoding.BinaryMarshaler).MarshalBinary()
	if err != nil {
		panic(fmt.Sprintf("sha256 state: %v", err)) // crypto/sha256 always can
	}
	return b
}

var emptyHashState = hashState(sha256.New())

// newPending starts a new, empty upload called name for handle u, replacing
// the partner's unfinished upload of that name (a handle still writing that
// one goes on, on its own, and is received when closed).
func (fs *partnerFS) newPending(name string, u *upload) (*pending, error) {
	srv := fs.srv
	ctx, cancel := fs.bgCtx(30 * time.Second)
	defer cancel()
	up, err := srv.cfg.Store.StartUpload(ctx, fs.partner, name, srv.id, uploadLease, emptyHashState, maxPendingPerPartner)
	if errors.Is(err, records.ErrTooManyUploads) {
		return nil, failure(fmt.Sprintf("too many unfinished uploads (%d): finish, rename or remove some in /inbox, or wait for them to expire", maxPendingPerPartner))
	}
	if err != nil {
		fs.log.Error("record new upload", "file", name, "err", err)
		return nil, failure(fmt.Sprintf("the upload of %s cannot be taken now (the database is unavailable); nothing was received: send it again later", name))
	}
	f, err := os.CreateTemp(srv.cfg.SpoolDir, "upload-*")
	if err != nil {
		fs.log.Error("create spool file", "err", err)
		fs.dropStored(up.ID, name)
		return nil, failure("the server cannot take uploads right now: try again later")
	}
	now := time.Now()
	p := &pending{id: up.ID, spool: f.Name(), partner: fs.partner, started: now, name: name, f: f,
		h: sha256.New(), held: map[int64]heldWrite{}, touched: now, savedAt: now, writer: u, done: make(chan struct{})}
	srv.imu.Lock()
	files := srv.inbox[fs.partner]
	if files == nil {
		files = map[string]*pending{}
		srv.inbox[fs.partner] = files
	}
	files[name] = p
	srv.imu.Unlock()
	return p, nil
}

// resumePending makes u the writer of the partner's unfinished upload called
// name, waiting a little for the handle that writes it (one whose connection
// has just dropped, here or on another server) to let go. nil, nil: there is
// no such upload.
func (fs *partnerFS) resumePending(name string, u *upload) (*pending, error) {
	srv := fs.srv
	deadline := time.NewTimer(resumeWait)
	defer deadline.Stop()
	busy := failure(fmt.Sprintf("%s is being uploaded by another session right now: wait for it to finish, or upload the whole file again (without resume)", name))
	for {
		var done <-chan struct{}
		var retry <-chan time.Time
		if p := srv.pendingFile(fs.partner, name); p != nil {
			done = p.done
		} else {
			ctx, cancel := fs.bgCtx(30 * time.Second)
			up, err := srv.cfg.Store.ClaimUpload(ctx, fs.partner, name, srv.id, uploadLease)
			cancel()
			switch {
			case errors.Is(err, records.ErrNotFound):
				return nil, nil
			case errors.Is(err, records.ErrUploadBusy):
				retry = time.After(100 * time.Millisecond)
			case err != nil:
				fs.log.Error("take up unfinished upload", "file", name, "err", err)
				return nil, failure("the inbox cannot be read now: try again later")
			default:
				return fs.loadPending(up, u, false)
			}
		}
		select {
		case <-done:
		case <-retry:
		case <-deadline.C:
			return nil, busy
		case <-fs.ctx.Done():
			return nil, failure("the server is shutting down: try again later")
		}
	}
}

// loadPending makes the stored upload up (whose lease this server holds) a
// pending file written by u: its bytes are copied into a new spool and its
// hash state restored. replace: it takes the place of a pending file of its
// name on this server (else such a one, newer, wins).
func (fs *partnerFS) loadPending(up records.Upload, u *upload, replace bool) (*pending, error) {
	srv := fs.srv
	unavailable := failure("the server cannot take uploads right now: try again later")
	release := func() {
		ctx, cancel := fs.bgCtx(30 * time.Second)
		defer cancel()
		if err := srv.cfg.Store.ReleaseUpload(ctx, up.ID, srv.id); err != nil {
			fs.log.Warn("release unfinished upload", "file", up.Name, "err", err)
		}
	}
	h := sha256.New()
	if err := h.(encoding.BinaryUnmarshaler).UnmarshalBinary(up.HashState); err != nil {
		fs.log.Error("restore the hash of an unfinished upload", "file", up.Name, "err", err)
		release()
		return nil, unavailable
	}
	f, err := os.CreateTemp(srv.cfg.SpoolDir, "upload-*")
	if err != nil {
		fs.log.Error("create spool file", "err", err)
		release()
		return nil, unavailable
	}
	ctx, cancel := fs.bgCtx(30 * time.Minute)
	defer cancel()
	cw := &countingWriter{w: f}
	err = srv.cfg.Store.CopyUploadBytes(ctx, up.ID, cw)
	if err == nil && cw.n != up.Size {
		err = fmt.Errorf("%d bytes stored, %d recorded", cw.n, up.Size)
	}
	if err != nil {
		fs.log.Error("read unfinished upload", "file", up.Name, "err", err)
		f.Close()
		os.Remove(f.Name())
		release()
		return nil, unavailable
	}
	p := &pending{id: up.ID, spool: f.Name(), partner: fs.partner, started: up.Started, name: up.Name, f: f,
		size: up.Size, hashed: up.Size, h: h, held: map[int64]heldWrite{}, touched: time.Now(), mtime: up.ModTime,
		saved: up.Size, savedAt: time.Now(), writer: u, done: make(chan struct{})}
	srv.imu.Lock()
	files := srv.inbox[fs.partner]
	if files == nil {
		files = map[string]*pending{}
		srv.inbox[fs.partner] = files
	}
	if files[up.Name] != nil && !replace {
		srv.imu.Unlock()
		f.Close()
		os.Remove(f.Name())
		return nil, failure(fmt.Sprintf("%s was just replaced by a new upload of the same name: stat it and upload again if needed", up.Name))
	}
	files[up.Name] = p
	srv.imu.Unlock()
	if u == nil {
		// Opened only to be received (a rename): no handle writes it.
		p.f.Close()
		p.f = nil
	}
	return p, nil
}

type countingWriter struct {
	w io.Writer
	n int64
}

func (c *countingWriter) Write(b []byte) (int, error) {
	k, err := c.w.Write(b)
	c.n += int64(k)
	return k, err
}

// end drops p from this server (its spool too) once what its handle leaves
// is stored or received, and wakes a resume waiting for it. Called on p's
// connection, whose goroutine s.wg counts.
func (s *Server) end(p *pending) {
	p.awaitCheckpoint()
	s.imu.Lock()
	if files := s.inbox[p.partner]; files[p.name] == p {
		delete(files, p.name)
		if len(files) == 0 {
			delete(s.inbox, p.partner)
		}
	}
	s.imu.Unlock()
	close(p.done)
	// Unlinking a spool of tens of megabytes takes tens of milliseconds
	// (the kernel frees its pages): not before the close is answered.
	s.wg.Go(func() { _ = os.Remove(p.spool) })
}

// keep stores what p's handle added, to be resumed or renamed on any server,
// and ends p.
func (fs *partnerFS) keep(p *pending) {
	defer fs.srv.end(p)
	p.awaitCheckpoint()
	p.mu.Lock()
	st := records.UploadState{ID: p.id, Writer: fs.srv.id, Path: p.spool, Size: p.hashed,
		HashState: hashState(p.h), ModTime: p.mtime, Release: true}
	name := p.name
	p.mu.Unlock()
	ctx, cancel := fs.bgCtx(5 * time.Minute)
	defer cancel()
	err := fs.srv.cfg.Store.SaveUpload(ctx, st)
	switch {
	case errors.Is(err, records.ErrNotFound):
		fs.log.Info("unfinished upload dropped: a newer upload of the same name replaced it", "file", name, "bytes", st.Size)
	case err != nil:
		fs.log.Error("store unfinished upload: a resume starts from what was stored before", "file", name, "bytes", st.Size, "err", err)
	}
}

// checkpoint stores in the background what p holds past what is stored,
// its lease kept, when Config.Checkpoint has passed since the last one.
// Called with p.mu held, by its writer.
func (p *pending) checkpoint(fs *partnerFS) {
	every := fs.srv.cfg.Checkpoint
	if every < 0 || p.saving != nil || p.hashed <= p.saved || time.Since(p.savedAt) < every {
		return
	}
	st := records.UploadState{ID: p.id, Writer: fs.srv.id, Path: p.spool, Size: p.hashed,
		HashState: hashState(p.h), ModTime: p.mtime}
	name, done := p.name, make(chan struct{})
	p.saving, p.savedAt = done, time.Now()
	go func() {
		defer close(done)
		ctx, cancel := fs.bgCtx(5 * time.Minute)
		defer cancel()
		err := fs.srv.cfg.Store.SaveUpload(ctx, st)
		p.mu.Lock()
		p.saving = nil
		if err == nil {
			p.saved = st.Size
		}
		p.mu.Unlock()
		switch {
		case errors.Is(err, records.ErrNotFound):
			fs.log.Info("upload checkpoint not stored: the upload was replaced or taken over", "file", name, "bytes", st.Size)
		case err != nil:
			fs.log.Warn("store upload checkpoint: a resume elsewhere would start from the one before", "file", name, "bytes", st.Size, "err", err)
		default:
			fs.log.Debug("upload checkpoint stored", "file", name, "bytes", st.Size)
		}
	}()
}

// awaitCheckpoint waits for p's running checkpoint, if any, to end.
func (p *pending) awaitCheckpoint() {
	p.mu.Lock()
	c := p.saving
	p.mu.Unlock()
	if c != nil {
		<-c
	}
}

// dropStored discards the stored upload id.
func (fs *partnerFS) dropStored(id int64, name string) {
	ctx, cancel := fs.bgCtx(30 * time.Second)
	defer cancel()
	if err := fs.srv.cfg.Store.DropUpload(ctx, id); err != nil {
		fs.log.Warn("discard unfinished upload", "file", name, "err", err)
	}
}

// sweep discards unfinished uploads not written to within the resume window.
func (s *Server) sweep(ctx context.Context, now time.Time) {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	gone, err := s.cfg.Store.ExpireUploads(ctx, now.Add(-s.cfg.ResumeWindow))
	if err != nil {
		s.log.Warn("sweep unfinished uploads", "err", err)
		return
	}
	for _, u := range gone {
		s.log.Info("unfinished upload discarded", "partner", u.Partner, "file", u.Name, "bytes", u.Size,
			"why", fmt.Sprintf("not resumed within %s", s.cfg.ResumeWindow))
	}
}

// renewLeases keeps this server's claims on the uploads it writes.
func (s *Server) renewLeases(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, uploadLease/3)
	defer cancel()
	if err := s.cfg.Store.RenewUploads(ctx, s.id, uploadLease); err != nil {
		s.log.Warn("renew the leases of uploads being written", "err", err)
	}
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
	n := fs.open
	fs.mu.Unlock()
	if n >= maxUploadsPerSession {
		return nil, failure(fmt.Sprintf("too many uploads open at once on this session (at most %d)", maxUploadsPerSession))
	}
	flags := r.Pflags()
	name := vp.name
	exists := func() (bool, error) {
		if _, found, err := fs.unfinished(name); found || err != nil {
			return found, err
		}
		_, found, err := fs.received(name)
		return found, err
	}
	if flags.Excl {
		found, err := exists()
		if err != nil {
			return nil, err
		}
		if found {
			return nil, failure(fmt.Sprintf("%s already exists in /inbox (exclusive create refused): upload under a new name", name))
		}
	}
	u := &upload{fs: fs, name: name, append: flags.Append, started: time.Now()}
	var p *pending
	if flags.Trunc {
		if !flags.Creat {
			if found, err := exists(); err != nil || !found {
				return nil, errors.Join(err, notFound(r.Filepath))
			}
		}
		p, err = fs.newPending(name, u)
	} else if p, err = fs.resumePending(name, u); err == nil && p == nil {
		// No unfinished upload of that name.
		_, found, rerr := fs.received(name)
		if rerr != nil {
			return nil, rerr
		}
		if found {
			// A received file: it can be opened (a client resuming a file
			// that arrived whole finds nothing left to send), never changed.
			fs.mu.Lock()
			fs.open++
			fs.mu.Unlock()
			return u, nil
		}
		if !flags.Creat {
			return nil, notFound(r.Filepath)
		}
		p, err = fs.newPending(name, u)
	}
	if err != nil {
		return nil, err
	}
	p.mu.Lock()
	u.p, u.base = p, p.size
	if u.base == 0 {
		p.startStream(fs)
	}
	p.mu.Unlock()
	fs.mu.Lock()
	fs.open++
	fs.mu.Unlock()
	if fs.conn != nil {
		fs.conn.uploads.Add(1)
		u.counted = true
	}
	fs.log.Debug("upload opened", "file", name, "resume_at", u.base, "append", flags.Append, "truncate", flags.Trunc)
	return u, nil
}

// unfinished looks up the partner's unfinished upload called name: its
// live state when written on this server, else as stored.
func (fs *partnerFS) unfinished(name string) (fileInfo, bool, error) {
	if p := fs.srv.pendingFile(fs.partner, name); p != nil {
		return p.info(), true, nil
	}
	ctx, cancel := fs.bgCtx(30 * time.Second)
	defer cancel()
	up, err := fs.srv.cfg.Store.UploadNamed(ctx, fs.partner, name)
	if errors.Is(err, records.ErrNotFound) {
		return fileInfo{}, false, nil
	}
	if err != nil {
		fs.log.Error("look up unfinished upload", "file", name, "err", err)
		return fileInfo{}, false, failure("the inbox cannot be read now: try again later")
	}
	return uploadInfo(up), true, nil
}

func uploadInfo(up records.Upload) fileInfo {
	mod := up.ModTime
	if mod.IsZero() {
		mod = up.Touched
	}
	return fileInfo{name: up.Name, size: up.Size, mode: 0o644, mod: mod}
}

// upload is one open write handle on /inbox/NAME.
type upload struct {
	fs      *partnerFS
	p       *pending // nil: a received file, opened without truncation
	name    string
	append  bool
	base    int64 // the file's size at open
	started time.Time

	counted bool // in its connection's uploads

	mu          sync.Mutex
	failed      error // a write failed or was refused: the upload is not received
	transferErr error // the session ended with the handle open
	closed      bool
}

type failReason struct {
	err    error
	reason string
}

func (e failReason) Error() string { return e.err.Error() }
func (e failReason) Unwrap() error { return e.err }

func (u *upload) fail(err error, reason string) error {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.failed == nil {
		u.failed = failReason{err: err, reason: reason}
	}
	return err
}

func (u *upload) WriteAt(b []byte, off int64) (int, error) {
	max := u.fs.srv.cfg.MaxFileSize
	if u.p == nil {
		return 0, u.fail(denied(fmt.Sprintf("%s was already received and cannot be changed: to send other bytes, upload the whole file under a new name", u.name)), "refused")
	}
	if off < 0 || int64(len(b)) > max || off > max-int64(len(b)) {
		return 0, u.fail(failure(fmt.Sprintf("upload of %s refused: the file is larger than the limit of %s (%d bytes); nothing will be received: split the file or ask the operator to raise --max-file-size",
			u.name, humanBytes(max), max)), "too_large")
	}
	u.mu.Lock()
	failed := u.failed
	u.mu.Unlock()
	if failed != nil {
		return 0, failed
	}
	if err := u.p.write(u, b, off); err != nil {
		return 0, u.fail(err.err, err.reason)
	}
	u.fs.srv.m.uploadBytes.Add(float64(len(b)))
	return len(b), nil
}

// write stores b at off for handle u, or says why not.
func (p *pending) write(u *upload, b []byte, off int64) *failReason {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.writer != u {
		return &failReason{failure("this upload handle is no longer valid: open the file again"), "refused"}
	}
	end := off + int64(len(b))
	if u.append && off < u.base {
		return &failReason{failure(fmt.Sprintf("%s was opened to append at byte %d (its size); a write at byte %d would change bytes already uploaded: write from byte %d on, or upload the whole file again (without resume)",
			u.name, u.base, off, u.base)), "refused"}
	}
	if off > p.hashed+maxHoleAhead {
		return &failReason{failure(fmt.Sprintf("a write at byte %d of %s would leave a hole after byte %d: write the file in order (resume from byte %d)",
			off, u.name, p.hashed, p.hashed)), "refused"}
	}
	if off < p.size {
		same, err := p.sameAsWritten(b, off)
		if err != nil {
			u.fs.log.Error("read spool file", "file", u.name, "err", err)
			return &failReason{failure("the server could not check the upload (disk error); nothing will be received: try again later"), "failed"}
		}
		if !same {
			return &failReason{failure(fmt.Sprintf("a write at byte %d of %s would change bytes already uploaded: resume from byte %d (its size), or upload the whole file again (a new upload truncates)",
				off, u.name, p.size)), "refused"}
		}
	}
	if _, err := p.f.WriteAt(b, off); err != nil {
		u.fs.log.Error("write spool file", "file", u.name, "err", err)
		return &failReason{failure("the server could not store the upload (disk error); nothing will be received: try again later"), "failed"}
	}
	switch {
	case off <= p.hashed && end > p.hashed:
		p.addHashed(u.fs, b[p.hashed-off:])
		if err := p.drain(u.fs); err != nil {
			u.fs.log.Error("read spool file", "file", u.name, "err", err)
			return &failReason{failure("the server could not store the upload (disk error); nothing will be received: try again later"), "failed"}
		}
	case off > p.hashed:
		if old, ok := p.held[off]; !ok || old.n < int64(len(b)) {
			if ok {
				// A longer write at the same offset takes its place.
				p.unhold(old)
			}
			hw := heldWrite{n: int64(len(b))}
			if p.heldMem+hw.n <= maxHeldInMemory {
				hw.data = p.holdBuf(len(b))
				copy(hw.data, b)
				p.heldMem += hw.n
			}
			p.held[off] = hw
		}
	}
	p.size = max(p.size, end)
	p.touched = time.Now()
	p.checkpoint(u.fs)
	return nil
}

// holdBuf is a buffer of n bytes for a held write.
func (p *pending) holdBuf(n int) []byte {
	for i, b := range p.spare {
		if cap(b) >= n {
			p.spare[i] = p.spare[len(p.spare)-1]
			p.spare = p.spare[:len(p.spare)-1]
			return b[:n]
		}
	}
	return make([]byte, n)
}

// unhold accounts for the held write hw no longer being held, and keeps its
// buffer for a later one while the kept buffers stay few and within
// maxHeldInMemory (a client writing ever larger blocks out of order would
// otherwise leave one behind each time).
func (p *pending) unhold(hw heldWrite) {
	if hw.data == nil {
		return
	}
	p.heldMem -= int64(len(hw.data))
	if len(p.spare) >= maxSpareBuffers {
		return
	}
	kept := cap(hw.data)
	for _, b := range p.spare {
		kept += cap(b)
	}
	if kept <= maxHeldInMemory {
		p.spare = append(p.spare, hw.data)
	}
}

// drain hashes held writes that the contiguous prefix has reached.
func (p *pending) drain(fs *partnerFS) error {
	for progress := true; progress && len(p.held) > 0; {
		progress = false
		for off, hw := range p.held {
			if off > p.hashed {
				continue
			}
			if end := off + hw.n; end > p.hashed {
				data := hw.data
				if data == nil {
					data = make([]byte, hw.n)
					if _, err := p.f.ReadAt(data, off); err != nil {
						return err
					}
				}
				p.addHashed(fs, data[p.hashed-off:])
			}
			p.unhold(hw)
			delete(p.held, off)
			progress = true
		}
	}
	return nil
}

// sameAsWritten tells whether b at off repeats the bytes already written
// there (holes not written yet may take anything).
func (p *pending) sameAsWritten(b []byte, off int64) (bool, error) {
	end := off + int64(len(b))
	check := func(from, to int64, data []byte, dataOff int64) (bool, error) {
		from, to = max(from, off), min(to, end)
		if from >= to {
			return true, nil
		}
		want := b[from-off : to-off]
		if data == nil {
			data = make([]byte, to-from)
			if _, err := p.f.ReadAt(data, from); err != nil {
				return false, err
			}
			dataOff = from
		}
		return string(data[from-dataOff:to-dataOff]) == string(want), nil
	}
	if ok, err := check(0, p.hashed, nil, 0); !ok || err != nil {
		return ok, err
	}
	for o, hw := range p.held {
		if ok, err := check(o, o+hw.n, hw.data, o); !ok || err != nil {
			return ok, err
		}
	}
	return true, nil
}

// TransferError is called by the request server when the session ends with
// this handle still open: the upload was cut off.
func (u *upload) TransferError(err error) {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.transferErr = err
}

// Close is the end of the upload. Its answer goes to the client only after
// the envelope is durably recorded (and its processing enqueued), or the
// unfinished upload stored for a resume.
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
	fs.open--
	fs.mu.Unlock()
	if u.counted {
		// Once the close's answer is decided (stored or received).
		defer fs.conn.uploads.Add(-1)
	}
	p := u.p
	if p == nil {
		return nil
	}
	p.mu.Lock()
	if p.writer != u {
		p.mu.Unlock()
		return nil
	}
	p.writer = nil
	closeErr := p.f.Close()
	p.f = nil
	if transferErr == nil && failed == nil && closeErr != nil {
		fs.log.Error("close spool file", "file", u.name, "err", closeErr)
		failed = failReason{err: failure("the server could not store the upload (disk error); nothing was received: try again later"), reason: "failed"}
	}
	if transferErr == nil && failed == nil && p.hashed != p.size {
		failed = failReason{err: failure(fmt.Sprintf("%s has a hole after byte %d (bytes up to %d were written past it): nothing was received: resume from byte %d",
			u.name, p.hashed, p.size, p.hashed)), reason: "refused"}
	}
	name, size := p.name, p.size
	if transferErr != nil || failed != nil || isTempName(name) {
		// Not received at this close: what was streamed goes (the
		// unfinished upload is stored from the spool).
		p.dropStream()
	}
	if transferErr != nil || failed != nil {
		p.settle()
		size = p.size
		p.mu.Unlock()
		reason := "incomplete"
		var fr failReason
		if errors.As(failed, &fr) {
			reason = fr.reason
		}
		if reason == "too_large" || reason == "failed" {
			p.awaitCheckpoint()
			fs.dropStored(p.id, name)
			fs.srv.end(p)
			fs.log.Info("unfinished upload discarded", "file", name, "bytes", size, "why", reason)
		} else {
			fs.keep(p)
		}
		fs.srv.m.uploads.WithLabelValues(reason).Inc()
		fs.srv.cfg.Intake.Metrics.Incomplete("sftp")
		ctx, cancel := fs.bgCtx(30 * time.Second)
		defer cancel()
		if err := fs.srv.cfg.Store.MarkIncomplete(ctx, fs.partner, name, "sftp", size); err != nil {
			fs.log.Error("record incomplete upload", "file", name, "err", err)
		}
		if transferErr != nil {
			fs.log.Warn("upload cut off before a clean close: recorded as incomplete, kept to be resumed",
				"file", name, "bytes", size, "resume_window", fs.srv.cfg.ResumeWindow, "err", transferErr)
			return nil
		}
		fs.log.Warn("upload refused: recorded as incomplete, never processed", "file", name, "bytes", size,
			"reason", reason, "err", failed)
		return failed
	}
	p.touched = time.Now()
	p.mu.Unlock()
	if isTempName(name) {
		fs.keep(p)
		fs.log.Info("temp-named upload kept until renamed", "file", name, "bytes", size)
		return nil
	}
	return fs.receive(p)
}

// receive submits a complete pending file (Intake.Submit): an envelope,
// with its processing job, in the transaction that drops the unfinished
// upload; then ends p. A file that could not be recorded stays unfinished,
// to be resumed.
func (fs *partnerFS) receive(p *pending) error {
	defer fs.conn.working()()
	p.awaitCheckpoint()
	p.mu.Lock()
	name, size, mtime, stream := p.name, p.hashed, p.mtime, p.stream
	sum := p.h.Sum(nil)
	p.stream = nil
	p.mu.Unlock()
	ctx, cancel := fs.bgCtx(30 * time.Minute)
	defer cancel()
	// Submit writes the upload's one log line ("envelope received") with
	// this session's logger.
	res, err := fs.srv.cfg.Intake.Submit(ctx, intake.Submission{Partner: fs.partner, Name: name, Path: p.spool, Source: "sftp"},
		&intake.SubmitOpts{Enqueue: fs.srv.cfg.Enqueue, Log: fs.log, Upload: &intake.Upload{
			ID: p.id, SHA256: sum, Size: size, ModTime: mtime, Stream: stream, Started: p.started}})
	env := res.Received
	if err != nil {
		fs.srv.m.uploads.WithLabelValues("failed").Inc()
		fs.log.Error("receive upload", "file", name, "bytes", size, "err", err)
		if errors.Is(err, records.ErrCommitUnknown) {
			// Received or not, unknown: the database is not committing,
			// so nothing more is stored (a resend is decided by its key).
			fs.srv.end(p)
			return failure(fmt.Sprintf("the database did not confirm the upload of %s in time, so it may not have been received: send it again (a file received already is recognised as such, never applied twice)", name))
		}
		fs.keep(p)
		return failure(fmt.Sprintf("the upload of %s could not be recorded (server error); nothing was received: send it again", name))
	}
	fs.srv.end(p)
	fs.srv.m.uploads.WithLabelValues(uploadResult(env.Status)).Inc() // the envelope is counted by Submit
	if stream != nil && stream.Committed() {
		fs.srv.m.uploadStored.WithLabelValues("streamed").Inc()
	} else {
		fs.srv.m.uploadStored.WithLabelValues("at_close").Inc()
	}
	return nil
}

// received looks up the partner's received file called name (within the
// time /inbox shows received files).
func (fs *partnerFS) received(name string) (records.InboxFile, bool, error) {
	ctx, cancel := fs.bgCtx(30 * time.Second)
	defer cancel()
	f, err := fs.srv.cfg.Store.InboxFile(ctx, fs.partner, name, time.Now().Add(-fs.srv.cfg.InboxWindow))
	if errors.Is(err, records.ErrNotFound) {
		return f, false, nil
	}
	if err != nil {
		fs.log.Error("look up inbox file", "file", name, "err", err)
		return f, false, failure("the inbox cannot be read now: try again later")
	}
	return f, true, nil
}
