package sftpd

// /results: result files and review reports, read from the database.

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/payintake/payintake/intake"
	"github.com/payintake/payintake/records"
)

const reviewSuffix = ".review.csv"

func isReviewName(n string) bool {
	n = strings.ToLower(n)
	return strings.HasSuffix(n, reviewSuffix) || strings.HasSuffix(n, reviewSuffix+records.SealedSuffix)
}

func reviewInfo(rr intake.ReviewReportListing) fileInfo {
	return fileInfo{name: rr.Name, size: rr.Size, mode: 0o444, mod: rr.CreatedAt}
}

// reviewReports lists the partner's review reports, the latest envelope's
// per name (case-folded), only the one called name if name is not empty.
func (fs *partnerFS) reviewReports(ctx context.Context, name string) ([]intake.ReviewReportListing, error) {
	rrs, err := fs.srv.cfg.Intake.ReviewReports(ctx, fs.partner, name)
	if err != nil {
		fs.log.Error("list review reports", "err", err)
		return nil, failure("results cannot be listed now: try again later")
	}
	return rrs, nil
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
	if _, err := fs.srv.cfg.Intake.ReviewReport(ctx, rrs[0].EnvelopeID, &b); err != nil {
		if errors.Is(err, intake.ErrNotFound) {
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

// ---- result downloads

// resultReader serves a stored result file at any offset. A goroutine streams
// it from the database (intake.StoredResult) into an unlinked temp file;
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

func newResultReader(fs *partnerFS, rf intake.ResultListing) (*resultReader, error) {
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
		err := fs.srv.cfg.Intake.StoredResult(rf).WriteTo(ctx, rr)
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
