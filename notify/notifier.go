package notify

import (
	"bytes"
	"context"
	"encoding/base64"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"math/rand/v2"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/payintake/payintake/backoff"
	"github.com/payintake/payintake/internal/egress"
	"github.com/payintake/payintake/internal/observe"
	"github.com/payintake/payintake/records"
)

// Defaults of Config.
const (
	DefaultTimeout     = 10 * time.Second
	DefaultRetryBase   = 30 * time.Second
	DefaultMaxAttempts = 10
	DefaultConcurrency = 4
	// SweepEvery is how often Run looks for due events.
	SweepEvery = time.Second
	// maxDetail bounds what is kept of an answer's body in the log.
	maxDetail = 1024
)

// Config tunes a Notifier; zero values take the defaults.
type Config struct {
	Log     *slog.Logger
	Metrics *Metrics
	// Client sends the POSTs (default: egress.NewClient, which never
	// follows a redirect); each request is bounded by Timeout.
	Client *http.Client
	Rand   backoff.Rand     // default: math/rand/v2 Float64
	Now    func() time.Time // default: time.Now
	// Timeout bounds one attempt, connection and answer included.
	Timeout time.Duration
	// RetryBase is backoff.Delay's base: retry n waits about RetryBase × 2^(n−1).
	RetryBase time.Duration
	// MaxAttempts is the retry budget: attempts before an event fails.
	MaxAttempts int
	// Concurrency is how many POSTs one process has in flight at once.
	Concurrency int
}

// Notifier delivers due events.
type Notifier struct {
	st      *Store
	records *records.Store
	cfg     Config
}

// New returns a Notifier on the payintake database of st.
func New(st *records.Store, cfg Config) *Notifier {
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	if cfg.Metrics == nil {
		cfg.Metrics = NewMetrics(nil)
	}
	if cfg.Client == nil {
		cfg.Client = egress.NewClient()
	}
	if cfg.Rand == nil {
		cfg.Rand = rand.Float64
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = DefaultTimeout
	}
	if cfg.RetryBase <= 0 {
		cfg.RetryBase = DefaultRetryBase
	}
	if cfg.MaxAttempts <= 0 {
		cfg.MaxAttempts = DefaultMaxAttempts
	}
	if cfg.Concurrency <= 0 {
		cfg.Concurrency = DefaultConcurrency
	}
	return &Notifier{st: NewStore(st.Pool()), records: st, cfg: cfg}
}

// Store returns the notifier's store.
func (n *Notifier) Store() *Store { return n.st }

// lease is how long a claimed attempt keeps its event from other
// processes: longer than any attempt can take.
func (n *Notifier) lease() time.Duration { return n.cfg.Timeout + 30*time.Second }

// secrets are the keys an event of partner is signed with: the partner's
// active webhook secrets. This is the only place notify reads them.
func (n *Notifier) secrets(ctx context.Context, partner string) ([][]byte, error) {
	return n.records.WebhookSecrets(ctx, partner)
}

// Run delivers due events until ctx is done, Concurrency at a time and at
// most one per partner, looking for new ones every SweepEvery and whenever
// a delivery ends; then the deliveries in flight are cut (see RunUntil).
// One per partner: a partner whose receiver hangs holds one slot until
// Timeout, never the others, so its queue cannot hold up another partner's
// events (and a partner's events go out one after the other).
func (n *Notifier) Run(ctx context.Context) { n.RunUntil(ctx, ctx) }

// RunUntil is Run for a process that drains: it claims no new event once
// ctx is done, and waits for the deliveries in flight to get their answer
// until cut is done. A delivery cut then is released: its event is due
// again at once, so another process sends it (with the same webhook-id)
// without waiting for the claim's lease to run out.
func (n *Notifier) RunUntil(ctx, cut context.Context) {
	var wg sync.WaitGroup
	defer wg.Wait()
	done := make(chan string, n.cfg.Concurrency) // the partner whose delivery ended
	t := time.NewTicker(SweepEvery)
	defer t.Stop()
	inFlight, busy := 0, map[string]int{} // deliveries in flight, by partner
	for {
		if free := n.cfg.Concurrency - inFlight; free > 0 {
			cs, err := n.st.claim(ctx, n.cfg.Now(), n.lease(), free, true, slices.Collect(maps.Keys(busy)))
			if err != nil && ctx.Err() == nil {
				n.cfg.Log.ErrorContext(ctx, "notifications: claiming due events failed; trying again later", "err", err)
			}
			for _, c := range cs {
				inFlight++
				busy[c.partner]++
				wg.Go(func() {
					defer func() { done <- c.partner }()
					n.deliver(cut, c)
				})
			}
		}
		select {
		case <-ctx.Done():
			return
		case p := <-done:
			inFlight--
			if busy[p]--; busy[p] == 0 {
				delete(busy, p)
			}
		case <-t.C:
		}
	}
}

// DeliverDue makes one attempt at every event due now (by Config.Now),
// Concurrency at a time, and returns how many it attempted. `serve` runs
// Run; tests and one-off tools call this.
func (n *Notifier) DeliverDue(ctx context.Context) (int, error) {
	cs, err := n.st.claim(ctx, n.cfg.Now(), n.lease(), 10000, false, nil)
	if err != nil {
		return 0, err
	}
	sem := make(chan struct{}, n.cfg.Concurrency)
	var wg sync.WaitGroup
	for _, c := range cs {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			n.deliver(ctx, c)
		})
	}
	wg.Wait()
	return len(cs), ctx.Err()
}

// deliver makes one attempt and records its answer. If ctx ends before an
// answer, the attempt is cut and its event released: due again at once, for
// any process (if even that cannot be recorded, the claim's lease runs out
// and the event is sent again then).
func (n *Notifier) deliver(ctx context.Context, c claimed) {
	log := n.cfg.Log.With("event", c.id, "webhook_id", c.webhookID, "partner", c.partner, "type", c.typ, "attempt", c.attempt)
	r := n.attempt(ctx, c)
	cut := ctx.Err() != nil && r.status == 0
	if cut {
		r = result{state: StatePending, next: n.cfg.Now(), sent: r.sent,
			err: "cut: the process stopped before an answer came; sent again at once by another process"}
	}
	// An answer that came is recorded even if ctx ended meanwhile.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), n.cfg.Timeout)
	defer cancel()
	if err := n.st.finish(ctx, c, r, n.cfg.Now()); err != nil {
		log.ErrorContext(ctx, "notifications: the answer could not be recorded; the event is sent again when its lease ends", "err", err)
		return
	}
	n.cfg.Metrics.observe(r)
	switch {
	case cut:
		log.WarnContext(ctx, "notification cut by a stop before its answer; released, to be sent again at once")
	case r.state == StateDelivered:
		log.InfoContext(ctx, "notification delivered", "status", r.status)
	case r.state == StatePending:
		log.WarnContext(ctx, "notification not delivered; it will be retried", "status", r.status, "err", r.err, "next_attempt_at", r.next)
	default:
		log.ErrorContext(ctx, "notification failed; `payintake notify redeliver` sends it again", "status", r.status, "err", r.err)
	}
}

// attempt POSTs the event once and decides what becomes of it.
func (n *Notifier) attempt(ctx context.Context, c claimed) result {
	failed := func(msg string) result { return result{state: StateFailed, err: msg} }
	if c.url == "" {
		return failed(fmt.Sprintf("partner %s has no notify URL: set one with `payintake partner set %s --notify-url URL`, then `payintake notify redeliver %d`",
			c.partner, c.partner, c.id))
	}
	keys, err := n.secrets(ctx, c.partner)
	if err != nil {
		return n.retry(c, 0, "", err.Error())
	}
	if len(keys) == 0 {
		return failed(fmt.Sprintf("partner %s has no active webhook secret to sign with: add one with `payintake partner webhook-secret %s`, then `payintake notify redeliver %d`",
			c.partner, c.partner, c.id))
	}
	now := n.cfg.Now()
	ts := records.WebhookTimestamp(now.Unix())
	sigs := make([]string, len(keys))
	for i, k := range keys {
		sigs[i] = "v1," + base64.StdEncoding.EncodeToString(records.WebhookSignature(k, c.webhookID, ts, c.payload))
	}
	rctx, cancel := context.WithTimeout(ctx, n.cfg.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(rctx, http.MethodPost, c.url, bytes.NewReader(c.payload))
	if err != nil {
		return failed(fmt.Sprintf("the notify URL %q cannot be used (%v): set another with `payintake partner set %s --notify-url URL`", c.url, err, c.partner))
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", observe.UserAgent("notify"))
	req.Header.Set("webhook-id", c.webhookID)
	req.Header.Set("webhook-timestamp", ts)
	req.Header.Set("webhook-signature", strings.Join(sigs, " "))
	r := n.post(c, req)
	r.sent = true
	return r
}

// post sends the signed request and decides what becomes of the event
// from the answer (or its absence).
func (n *Notifier) post(c claimed, req *http.Request) result {
	resp, err := n.cfg.Client.Do(req)
	if err != nil {
		return n.retry(c, 0, "", fmt.Sprintf("no answer: %v", err))
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, maxDetail))
	switch {
	case resp.StatusCode >= 200 && resp.StatusCode < 300:
		return result{state: StateDelivered, status: resp.StatusCode}
	case backoff.Retryable(resp.StatusCode):
		return n.retry(c, resp.StatusCode, resp.Header.Get("Retry-After"), answer(resp.StatusCode, body))
	default:
		// Any other status, 3xx included: the client follows no redirect.
		msg := answer(resp.StatusCode, body)
		if r := egress.Redirect(resp.StatusCode, resp.Header); r != "" {
			msg = fmt.Sprintf("HTTP %d %s: %s", resp.StatusCode, http.StatusText(resp.StatusCode), r)
		}
		return result{state: StateFailed, status: resp.StatusCode, err: msg}
	}
}

// retry is a failed attempt that may be made again: pending after
// backoff.Delay, or failed once the retry budget is spent.
func (n *Notifier) retry(c claimed, status int, retryAfter, msg string) result {
	if c.round >= n.cfg.MaxAttempts {
		return result{state: StateFailed, status: status,
			err: fmt.Sprintf("retries exhausted after %d attempts: %s", c.round, msg)}
	}
	now := n.cfg.Now()
	return result{state: StatePending, status: status, err: msg,
		next: now.Add(backoff.Delay(n.cfg.RetryBase, c.round, retryAfter, now, n.cfg.Rand))}
}

func answer(status int, body []byte) string {
	s := fmt.Sprintf("HTTP %d %s", status, http.StatusText(status))
	if b := strings.TrimSpace(string(body)); b != "" {
		s += ": " + b
	}
	return s
}
