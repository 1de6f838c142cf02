package dispatch

import (
	"context"
	"log/slog"
	"sync"
)

// recorder writes the vendor's answers to the database while the sender
// goes on with the next chunks: the answers queued while one transaction
// runs are recorded together in the next one (one statement per table for
// all their lines). Nothing is lost to a crash that a sequential recorder
// would have kept: an answer not yet recorded leaves its lines pending, and
// they are sent again under the same keys, which the vendor deduplicates —
// the same as a crash between a send and its record. The queue is bounded,
// so the memory stays flat however many lines a run has.
type recorder struct {
	d   *Dispatcher
	run Run
	in  chan answered
	end chan struct{}

	mu  sync.Mutex
	err error
}

// answered is the outcome of one request (or a barrier, when done is set).
type answered struct {
	outs   []outcome
	chunk  []line
	log    *slog.Logger
	cursor int64
	done   chan struct{} // a barrier: closed once everything queued before it is recorded
}

// maxGroupLines bounds the lines recorded in one transaction.
const maxGroupLines = 5_000

func newRecorder(ctx context.Context, d *Dispatcher, run Run, queue int) *recorder {
	rc := &recorder{d: d, run: run, in: make(chan answered, queue), end: make(chan struct{})}
	go rc.loop(ctx)
	return rc
}

func (rc *recorder) failed() error {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return rc.err
}

// submit queues an answer; it fails once a recording has failed.
func (rc *recorder) submit(ctx context.Context, a answered) error {
	if err := rc.failed(); err != nil {
		return err
	}
	select {
	case rc.in <- a:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// flush waits until every answer queued so far is recorded.
func (rc *recorder) flush(ctx context.Context) error {
	done := make(chan struct{})
	if err := rc.submit(ctx, answered{done: done}); err != nil {
		return err
	}
	select {
	case <-done:
		return rc.failed()
	case <-ctx.Done():
		return ctx.Err()
	}
}

// close records what is queued and stops the recorder.
func (rc *recorder) close() error {
	close(rc.in)
	<-rc.end
	return rc.failed()
}

func (rc *recorder) loop(ctx context.Context) {
	defer close(rc.end)
	for a := range rc.in {
		group := []answered{a}
		n := len(a.outs)
	more:
		for a.done == nil && n < maxGroupLines {
			select {
			case next, ok := <-rc.in:
				if !ok {
					break more
				}
				group = append(group, next)
				n += len(next.outs)
				if next.done != nil {
					break more
				}
			default:
				break more
			}
		}
		rc.record(ctx, group, n)
	}
}

// record writes a group of answers in one transaction, then logs and counts
// their lines and closes the barriers among them.
func (rc *recorder) record(ctx context.Context, group []answered, n int) {
	defer func() {
		for _, a := range group {
			if a.done != nil {
				close(a.done)
			}
		}
	}()
	if rc.failed() != nil {
		return
	}
	outs := make([]outcome, 0, n)
	answers, cursor := 0, int64(0)
	for _, a := range group {
		if a.done == nil {
			outs = append(outs, a.outs...)
			answers++
			cursor = max(cursor, a.cursor)
		}
	}
	if answers == 0 {
		return
	}
	if _, err := rc.d.st.record(ctx, rc.run, outs, answers, cursor); err != nil {
		rc.mu.Lock()
		rc.err = err
		rc.mu.Unlock()
		return
	}
	var succeeded, failed, retried int
	for _, a := range group {
		for i, o := range a.outs {
			switch o.state {
			case StateFailed:
				l := a.chunk[i]
				a.log.Error("dispatch: dead letter", "key", o.key, "employee_ref", l.ref, "component", l.comp,
					"version", l.version, "line_status", o.status, "detail", o.detail)
				failed++
			case StateSucceeded:
				succeeded++
			default:
				retried++
			}
		}
	}
	m := rc.d.cfg.Metrics
	m.lines.WithLabelValues("succeeded").Add(float64(succeeded))
	m.lines.WithLabelValues("dead_letter").Add(float64(failed))
	m.lines.WithLabelValues("retried").Add(float64(retried))
	if rc.d.cfg.Progress != nil {
		if r, err := rc.d.st.run(ctx, rc.run.ID); err == nil {
			rc.d.cfg.Progress(r)
		}
	}
}
