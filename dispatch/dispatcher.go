package dispatch

import (
	"bytes"
	"cmp"
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/payintake/payintake/backoff"
	"github.com/payintake/payintake/internal/egress"
	"github.com/payintake/payintake/internal/fault"
	"github.com/payintake/payintake/internal/observe"
)

// The statements of dispatcher.sql.
var (
	sqlTryOwnPeriod  = query("TryOwnPeriod")
	sqlReleasePeriod = query("ReleasePeriod")
)

// Config tunes a Dispatcher; zero values take the defaults.
type Config struct {
	Log     *slog.Logger
	Metrics *Metrics
	// Client sends the chunks (default: egress.NewClient, which never
	// follows a redirect); each request has the target's --timeout.
	Client *http.Client
	Rand   backoff.Rand // default: math/rand/v2 Float64
	// Sleep waits d (default: a timer); tests replace it to see the delays.
	Sleep func(ctx context.Context, d time.Duration) error
	// Progress, when set, is called after every recorded answer.
	Progress func(Run)
	// Now is the clock of the daily archive job (default time.Now); tests
	// move it past the 90 days instead of waiting.
	Now func() time.Time
	// ChunksPerPage is how many chunks' lines are taken from the database
	// at once (default 25).
	ChunksPerPage int
}

// Dispatcher sends due lines to the vendors.
type Dispatcher struct {
	st  *Store
	cfg Config

	mu    sync.Mutex
	gates map[string]*gate // by target name and rate
}

// New returns a dispatcher on the payintake database.
func New(pool *pgxpool.Pool, cfg Config) *Dispatcher {
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
	if cfg.Sleep == nil {
		cfg.Sleep = sleep
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.ChunksPerPage <= 0 {
		cfg.ChunksPerPage = 25
	}
	return &Dispatcher{st: NewStore(pool), cfg: cfg, gates: map[string]*gate{}}
}

// Store returns the dispatcher's store.
func (d *Dispatcher) Store() *Store { return d.st }

func sleep(ctx context.Context, dur time.Duration) error {
	if dur <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(dur)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

func (d *Dispatcher) gate(t Target) *gate {
	d.mu.Lock()
	defer d.mu.Unlock()
	k := t.Name + "\x00" + strconv.FormatFloat(t.RateLimit, 'g', -1, 64)
	g := d.gates[k]
	if g == nil {
		g = newGate(t.RateLimit)
		d.gates[k] = g
	}
	return g
}

// ownerLockClass is the first key of the session advisory lock by which one
// dispatcher owns a partner's period (records uses 7310 for partners).
const ownerLockClass = 7311

// owned reports whether some dispatcher owns a partner's period now.
func (d *Dispatcher) owned(ctx context.Context, partner, period string) (bool, error) {
	conn, err := d.st.pool.Acquire(ctx)
	if err != nil {
		return false, err
	}
	defer conn.Release()
	var got bool
	if err := conn.QueryRow(ctx, sqlTryOwnPeriod, ownerLockClass, partner+"/"+period).Scan(&got); err != nil {
		return false, err
	}
	if got {
		if _, err := conn.Exec(ctx, sqlReleasePeriod, ownerLockClass, partner+"/"+period); err != nil {
			_ = conn.Conn().Close(ctx)
			return false, err
		}
	}
	return !got, nil
}

// Dispatch runs (or resumes) the open runs of a partner's period until every
// line is settled. The period is owned by this process meanwhile: a
// PostgreSQL session advisory lock, held on a connection of its own, which
// the server releases when the process dies. ErrBusy: another dispatcher
// owns it. It returns the runs as they ended.
func (d *Dispatcher) Dispatch(ctx context.Context, partner, period string) ([]Run, error) {
	conn, err := d.st.pool.Acquire(ctx)
	if err != nil {
		return nil, fmt.Errorf("dispatch period %s of partner %s: %w", period, partner, err)
	}
	defer conn.Release()
	var got bool
	if err := conn.QueryRow(ctx, sqlTryOwnPeriod, ownerLockClass, partner+"/"+period).Scan(&got); err != nil {
		return nil, fmt.Errorf("take ownership of period %s of partner %s: %w", period, partner, err)
	}
	if !got {
		return nil, fmt.Errorf("period %s of partner %s: %w (see `payintake dispatch status`)", period, partner, ErrBusy)
	}
	defer func() {
		// A cancelled ctx must not keep the lock: unlock on a fresh context,
		// and if even that fails, drop the connection (which unlocks).
		c, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if _, err := conn.Exec(c, sqlReleasePeriod, ownerLockClass, partner+"/"+period); err != nil {
			_ = conn.Conn().Close(c)
		}
	}()
	runs, err := d.st.OpenRun(ctx, partner, period)
	if err != nil {
		return nil, err
	}
	var done []Run
	for _, r := range runs {
		r, err := d.run(ctx, r)
		if err != nil {
			return done, err
		}
		done = append(done, r)
	}
	return done, nil
}

// run sends the pending lines of one run. Three stages overlap: a loader
// takes pages of pending lines (writing their ledger rows, the hash guard,
// before any of them is sent), the sender POSTs their chunks one at a time,
// and a recorder writes the answers while the next chunks go out.
func (d *Dispatcher) run(ctx context.Context, r Run) (Run, error) {
	t, err := d.st.Target(ctx, r.Target)
	if err != nil {
		return r, err
	}
	token, err := t.Token()
	if err != nil {
		return r, err
	}
	log := d.cfg.Log.With("partner", r.Partner, "pay_period", r.Period, "batch_key", r.BatchKey(), "target", t.Name)
	d.cfg.Metrics.runsInProgress.Inc()
	defer d.cfg.Metrics.runsInProgress.Dec()
	if r.Total-r.Settled >= analyzeAbove {
		if err := d.st.analyze(ctx); err != nil {
			return r, err
		}
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	rec := newRecorder(ctx, d, r, d.cfg.ChunksPerPage)
	s := &sender{d: d, t: t, token: token, run: r, g: d.gate(t), log: log, rec: rec,
		prefix: []byte(`{"batch_key":` + string(appendJSONString(nil, r.BatchKey())) + `,"partner":` +
			string(appendJSONString(nil, r.Partner)) + `,"pay_period":` + string(appendJSONString(nil, r.Period)) + `,"lines":[`)}
	pages := make(chan page, 1)
	loaded := make(chan error, 1)
	go func() {
		loaded <- d.load(ctx, r, t.ChunkSize, t.ChunkSize*d.cfg.ChunksPerPage, log, pages)
		close(pages)
	}()
	var sendErr error
	for p := range pages {
		if sendErr != nil {
			continue // drain until the loader sees the cancellation
		}
		if p.barrier != nil {
			if sendErr = rec.flush(ctx); sendErr == nil {
				close(p.barrier)
			} else {
				cancel()
			}
			continue
		}
		for start := 0; start < len(p.lines); start += t.ChunkSize {
			if sendErr = s.send(ctx, p.lines[start:min(start+t.ChunkSize, len(p.lines))]); sendErr != nil {
				cancel()
				break
			}
		}
	}
	recErr := rec.close()
	loadErr := <-loaded
	for _, err := range []error{sendErr, recErr, loadErr} {
		if err != nil && !errors.Is(err, context.Canceled) {
			return r, err
		}
	}
	if err := cmp.Or(sendErr, recErr, loadErr); err != nil {
		return r, err
	}
	if _, err := d.st.finish(ctx, r.ID); err != nil {
		return r, err
	}
	r, err = d.st.run(ctx, r.ID)
	if err == nil && d.cfg.Progress != nil {
		d.cfg.Progress(r)
	}
	return r, err
}

// page is a page of lines for the sender, or a barrier: the sender closes
// it once every line handed out before it is sent and its answer recorded.
type page struct {
	lines   []line
	barrier chan struct{}
}

// load hands the pending lines of a run to the sender, a page at a time,
// until none is left. Lines put back for a later chunk (a 207, a line
// missing from one) come back in a later round; before it concludes that
// nothing is left, it waits for every line handed out to be recorded and
// looks once more from the start. The first page is one chunk, and each
// next one twice the last up to size: the first request goes out as soon
// as one chunk's ledger rows are written, not a whole page's.
func (d *Dispatcher) load(ctx context.Context, r Run, chunk, size int, log *slog.Logger, pages chan<- page) error {
	var from position
	handed := false // lines handed out since the last barrier
	next := min(chunk, size)
	for {
		lines, conflicts, settled, err := d.st.takePending(ctx, r, next, from)
		next = min(2*next, size)
		if err != nil {
			return err
		}
		for _, c := range conflicts {
			log.Error("dispatch: request-hash conflict, line not sent (a bug: the same key would carry other content)",
				"key", c.key, "stored_hash", hex.EncodeToString(c.stored), "request_hash", hex.EncodeToString(c.want))
			d.cfg.Metrics.lines.WithLabelValues("conflict").Inc()
		}
		var p page
		switch {
		case len(lines) > 0:
			from, handed = position{lines[len(lines)-1].round, lines[len(lines)-1].dueID}, true
			p.lines = lines
		case len(conflicts) > 0 || settled > 0:
			continue // a page of lines settled without sending; more may follow
		case !handed:
			return nil
		default:
			p.barrier = make(chan struct{})
		}
		select {
		case pages <- p:
		case <-ctx.Done():
			return ctx.Err()
		}
		if p.barrier != nil {
			select {
			case <-p.barrier:
			case <-ctx.Done():
				return ctx.Err()
			}
			from, handed = position{}, false
		}
	}
}

// sender sends the chunks of one run.
type sender struct {
	d      *Dispatcher
	t      Target
	token  string
	run    Run
	g      *gate
	log    *slog.Logger
	prefix []byte
	rec    *recorder
}

// retryable statuses of SPEC's response table (also per line in a 207).
func retryable(status int) bool { return backoff.Retryable(status) }

// maxDetail bounds the detail kept from a vendor's answer.
const maxDetail = 1024

// send sends one chunk until its lines are settled or put back for a later
// chunk, retrying the same bytes under the same Idempotency-Key.
func (s *sender) send(ctx context.Context, chunk []line) error {
	keys := make([]string, len(chunk))
	size := len(s.prefix) + 2
	maxRound, maxAttempts, cursor := 0, 0, int64(0)
	for i, l := range chunk {
		keys[i] = l.key
		size += len(l.body) + 1
		maxRound, maxAttempts, cursor = max(maxRound, l.round), max(maxAttempts, l.attempts), max(cursor, l.dueID)
	}
	body := make([]byte, 0, size)
	body = append(body, s.prefix...)
	for i, l := range chunk {
		if i > 0 {
			body = append(body, ',')
		}
		body = append(body, l.body...)
	}
	body = append(body, ']', '}')
	ck := ChunkKey(s.run.BatchKey(), keys)
	log := s.log.With("chunk_key", ck, "lines", len(chunk))

	// Lines put back by a 207 wait before their later chunk, as a retry.
	if maxRound > 0 && maxAttempts < s.t.MaxAttempts {
		delay := backoff.Exponential(s.t.RetryBase, maxRound, s.d.cfg.Rand)
		s.d.cfg.Metrics.retryDelay.Observe(delay.Seconds())
		if err := s.d.cfg.Sleep(ctx, delay); err != nil {
			return err
		}
	}
	for attempt := 1; ; attempt++ {
		if maxAttempts >= s.t.MaxAttempts {
			// Already sent as often as allowed (a resume after a crash).
			return s.settle(ctx, log, chunk, cursor, func(l line) outcome {
				return outcome{key: l.key, dueID: l.dueID, state: StateFailed, detail: "retries_exhausted"}
			}, false)
		}
		if err := s.g.acquire(ctx, attempt == 1); err != nil {
			return err
		}
		if attempt == 1 {
			// In flight from now until its last answer is recorded.
			s.g.begin()
			defer s.g.end()
		}
		fault.Point(fault.DispatchBeforeSend)
		status, hdr, respBody, sendErr := s.post(ctx, ck, body)
		if sendErr == nil {
			fault.Point(fault.DispatchAfterSend)
		}
		s.d.cfg.Metrics.requests.WithLabelValues(statusLabel(status)).Inc()
		if sendErr != nil && ctx.Err() != nil {
			return ctx.Err()
		}
		log := log.With("status", status, "attempt", attempt)
		switch {
		case sendErr == nil && (status == http.StatusConflict || (status >= 200 && status < 300 && status != http.StatusMultiStatus)):
			log.Info("dispatch chunk", "result", "succeeded")
			return s.settle(ctx, log, chunk, cursor, func(l line) outcome {
				return outcome{key: l.key, dueID: l.dueID, state: StateSucceeded, status: status}
			}, false)
		case sendErr == nil && status == http.StatusMultiStatus:
			return s.multiStatus(ctx, log, chunk, cursor, respBody, attempt)
		case sendErr != nil || retryable(status):
			detail := http.StatusText(status)
			if sendErr != nil {
				detail = sendErr.Error()
			}
			maxAttempts++
			if status == http.StatusTooManyRequests {
				ra, _ := backoff.ParseRetryAfter(hdr.Get("Retry-After"), time.Now())
				if s.g.tooMany(ra) {
					log.Warn("dispatch: three 429 answers within 10s; new chunks to this target wait", "retry_after", ra)
				}
			}
			if maxAttempts >= s.t.MaxAttempts {
				log.Info("dispatch chunk", "result", "retries_exhausted", "detail", detail)
				return s.settle(ctx, log, chunk, cursor, func(l line) outcome {
					return outcome{key: l.key, dueID: l.dueID, state: StateFailed, status: status,
						detail: "retries_exhausted: " + detail}
				}, false)
			}
			// Count the attempt durably, so a crash does not give the chunk
			// more attempts than allowed; the lines stay first in line.
			if _, err := s.d.st.record(ctx, s.run, outcomes(chunk, StatePending, status, detail), 1, 0); err != nil {
				return err
			}
			delay := backoff.Delay(s.t.RetryBase, attempt, hdr.Get("Retry-After"), time.Now(), s.d.cfg.Rand)
			log.Info("dispatch chunk", "result", "retry", "detail", detail, "delay", delay)
			s.d.cfg.Metrics.retryDelay.Observe(delay.Seconds())
			if err := s.d.cfg.Sleep(ctx, delay); err != nil {
				return err
			}
		default:
			// Any other status, 3xx included: the client follows no
			// redirect, so a 3xx is the vendor's answer and pays nothing.
			detail := truncate(string(respBody))
			if r := egress.Redirect(status, hdr); r != "" {
				detail = truncate(strings.TrimSuffix(r+": "+string(respBody), ": "))
			}
			log.Info("dispatch chunk", "result", "failed")
			return s.settle(ctx, log, chunk, cursor, func(l line) outcome {
				return outcome{key: l.key, dueID: l.dueID, state: StateFailed, status: status, detail: detail}
			}, false)
		}
	}
}

func outcomes(chunk []line, state string, status int, detail string) []outcome {
	outs := make([]outcome, len(chunk))
	for i, l := range chunk {
		outs[i] = outcome{key: l.key, dueID: l.dueID, state: state, status: status, detail: detail}
	}
	return outs
}

func truncate(s string) string {
	if len(s) > maxDetail {
		return s[:maxDetail]
	}
	return s
}

func statusLabel(status int) string {
	if status == 0 {
		return "no_answer"
	}
	return strconv.Itoa(status)
}

// post sends the chunk once. status 0 with an error: a timeout or a dropped
// connection.
func (s *sender) post(ctx context.Context, ck string, body []byte) (int, http.Header, []byte, error) {
	rctx, cancel := context.WithTimeout(ctx, s.t.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(rctx, http.MethodPost, s.t.URL, bytes.NewReader(body))
	if err != nil {
		return 0, nil, nil, fmt.Errorf("request to target %s: %w", s.t.Name, err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", observe.UserAgent("dispatch"))
	req.Header.Set("Idempotency-Key", ck)
	if s.token != "" {
		req.Header.Set("Authorization", "Bearer "+s.token)
	}
	resp, err := s.d.cfg.Client.Do(req)
	if err != nil {
		return 0, nil, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 4<<20))
	if err != nil {
		return 0, nil, nil, err // the answer was cut off: as a dropped connection
	}
	return resp.StatusCode, resp.Header, b, nil
}

// multiStatus applies a 207's per-line results.
func (s *sender) multiStatus(ctx context.Context, log *slog.Logger, chunk []line, cursor int64, body []byte, sent int) error {
	var res struct {
		Results []struct {
			Key    string          `json:"key"`
			Status int             `json:"status"`
			Detail json.RawMessage `json:"detail"`
		} `json:"results"`
	}
	if err := json.Unmarshal(body, &res); err != nil {
		log.Warn("dispatch: a 207 answer that is not the results object; every line is retried", "err", err)
	}
	type result struct {
		status int
		detail string
	}
	by := make(map[string]result, len(res.Results))
	for _, r := range res.Results {
		detail := string(r.Detail)
		var str string
		if json.Unmarshal(r.Detail, &str) == nil {
			detail = str
		}
		by[r.Key] = result{r.Status, truncate(detail)}
	}
	counts := map[string]int{}
	err := s.settle(ctx, log, chunk, cursor, func(l line) outcome {
		o := outcome{key: l.key, dueID: l.dueID}
		r, ok := by[l.key]
		switch {
		case !ok:
			o.state, o.detail = StatePending, "missing from the 207 answer"
		case paidStatus(r.status):
			o.state, o.status, o.detail = StateSucceeded, r.status, r.detail
		case retryable(r.status):
			o.state, o.status, o.detail = StatePending, r.status, r.detail
		default:
			o.state, o.status, o.detail = StateFailed, r.status, r.detail
		}
		if o.state == StatePending && l.attempts+sent >= s.t.MaxAttempts {
			o.state, o.detail = StateFailed, "retries_exhausted: "+o.detail
		}
		counts[o.state]++
		return o
	}, true)
	log.Info("dispatch chunk", "result", "multi_status", "succeeded", counts[StateSucceeded],
		"retried", counts[StatePending], "failed", counts[StateFailed])
	return err
}

// settle hands the outcome of every line of the chunk to the recorder
// (requeue: a line left pending goes back for a later chunk).
func (s *sender) settle(ctx context.Context, log *slog.Logger, chunk []line, cursor int64, f func(line) outcome, requeue bool) error {
	outs := make([]outcome, len(chunk))
	for i, l := range chunk {
		outs[i] = f(l)
		outs[i].requeue = requeue && outs[i].state == StatePending
	}
	return s.rec.submit(ctx, answered{outs: outs, chunk: chunk, log: log, cursor: cursor})
}

// paidStatus says whether a line's own status in a 207 answer means the
// vendor has the line: a 2xx, or 409 (it had it already). A 3xx is never a
// payment, here as for a whole chunk: the line is dead-lettered for an
// operator, who can see whether the vendor has it, and never sent again
// by itself.
func paidStatus(status int) bool {
	return status >= 200 && status < 300 || status == http.StatusConflict
}
