package dispatch

import (
	"context"
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// Backpressure of SPEC "Outbound dispatch": a token bucket per target at 80%
// of its --rate-limit, and a pause of new chunks after three 429 answers
// within 10 seconds, until those in flight have finished and any Retry-After
// has passed.
const (
	rateShare   = 0.8
	pauseAfter  = 3
	pauseWindow = 10 * time.Second
)

// gate is one target's backpressure, shared by every run sending to it in
// this process.
type gate struct {
	lim *rate.Limiter    // nil: no limit
	now func() time.Time // the clock of the 429 window and the pause (time.Now; tests move it)

	mu       sync.Mutex
	inflight int
	recent   []time.Time // 429 answers within pauseWindow
	paused   bool
	resumeAt time.Time
	changed  chan struct{} // closed (and replaced) when inflight or the pause changes
	pauses   int           // how often it paused (for tests and logs)
}

func newGate(ratePerSecond float64) *gate {
	g := &gate{changed: make(chan struct{}), now: time.Now}
	if ratePerSecond > 0 {
		g.lim = rate.NewLimiter(rate.Limit(ratePerSecond*rateShare), 1)
	}
	return g
}

func (g *gate) signal() {
	close(g.changed)
	g.changed = make(chan struct{})
}

// acquire waits until a request may go out: the pause (if any) is over and
// the token bucket has a token. fresh is false for the retry of a chunk that
// is already in flight (it is one of those the pause waits for).
func (g *gate) acquire(ctx context.Context, fresh bool) error {
	for fresh {
		g.mu.Lock()
		now := g.now()
		if !g.paused || (g.inflight == 0 && !now.Before(g.resumeAt)) {
			g.paused = false
			g.mu.Unlock()
			break
		}
		ch, wait := g.changed, g.resumeAt.Sub(now)
		g.mu.Unlock()
		var timer <-chan time.Time
		if wait > 0 {
			t := time.NewTimer(wait)
			defer t.Stop()
			timer = t.C
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-ch:
		case <-timer:
		}
	}
	if g.lim != nil {
		if err := g.lim.Wait(ctx); err != nil {
			return err
		}
	}
	return nil
}

// begin and end bracket a chunk from its first send to its last answer.
func (g *gate) begin() {
	g.mu.Lock()
	g.inflight++
	g.mu.Unlock()
}

func (g *gate) end() {
	g.mu.Lock()
	g.inflight--
	g.signal()
	g.mu.Unlock()
}

// tooMany notes a 429 answer; wait is its Retry-After (0 if none). It
// reports whether the target is now paused.
func (g *gate) tooMany(wait time.Duration) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	now := g.now()
	keep := g.recent[:0]
	for _, t := range g.recent {
		if now.Sub(t) < pauseWindow {
			keep = append(keep, t)
		}
	}
	g.recent = append(keep, now)
	if until := now.Add(wait); g.paused && until.After(g.resumeAt) {
		g.resumeAt = until
	}
	if len(g.recent) >= pauseAfter && !g.paused {
		g.paused, g.resumeAt = true, now.Add(wait)
		g.pauses++
		g.recent = g.recent[:0]
		g.signal()
		return true
	}
	return false
}
