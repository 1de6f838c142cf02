package notify

import (
	"context"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/payintake/payintake/internal/sqlfile"
)

//go:embed *.sql
var sqlFiles embed.FS

// notify's SQL lives in store.sql, loaded by internal/sqlfile; the column
// list of an event is a fragment kept beside its scan function.
var statements = sqlfile.MustLoad("notify", sqlFiles, map[string]string{"event_columns": eventColumns})

// query returns the named statement; an unknown name panics.
func query(name string) string { return statements.Query(name) }

var (
	sqlEvents             = query("Events")
	sqlEvent              = query("Event")
	sqlDeliveryLog        = query("DeliveryLog")
	sqlDueAgain           = query("DueAgain")
	sqlInsertRedelivery   = query("InsertRedelivery")
	sqlClaimDue           = query("ClaimDue")
	sqlClaimDuePerPartner = query("ClaimDuePerPartner")
	sqlInsertAttempt      = query("InsertAttempt")
	sqlFinishAttempt      = query("FinishAttempt")
	sqlFinishEvent        = query("FinishEvent")
)

// Event types.
const (
	SubmissionProcessed = "submission.processed"
	ReplayProcessed     = "replay.processed"
	ReviewCompleted     = "review.completed"
)

// Event states.
const (
	StatePending   = "pending"
	StateDelivered = "delivered"
	StateFailed    = "failed"
)

// States lists the states an event can be in, for filters.
var States = []string{StatePending, StateDelivered, StateFailed}

// ErrNotFound is returned for an event that does not exist.
var ErrNotFound = errors.New("no such notification event")

// Event is one notification and what became of it.
type Event struct {
	ID            int64           `json:"id"`
	PartnerID     string          `json:"partner"`
	Type          string          `json:"type"`
	Subject       int64           `json:"subject"` // the envelope (submission, review) or replay id
	WebhookID     string          `json:"webhook_id"`
	State         string          `json:"state"`
	Attempts      int             `json:"attempts"`
	NextAttemptAt *time.Time      `json:"next_attempt_at,omitempty"` // pending only
	LastStatus    *int            `json:"last_status,omitempty"`
	LastError     string          `json:"last_error"`
	CreatedAt     time.Time       `json:"created_at"`
	DeliveredAt   *time.Time      `json:"delivered_at,omitempty"`
	Payload       json.RawMessage `json:"payload"`
	Log           []Attempt       `json:"attempt_log"`
}

// Attempt is one POST of an event: the delivery log.
type Attempt struct {
	Attempt    int        `json:"attempt"`
	URL        string     `json:"url"`
	StartedAt  time.Time  `json:"started_at"`
	FinishedAt *time.Time `json:"finished_at,omitempty"` // nil: cut off (a crash) or in flight
	Status     *int       `json:"status,omitempty"`      // nil: no answer
	Error      string     `json:"error"`
}

// Filter selects events for List; zero fields select all.
type Filter struct {
	Partner string
	State   string
	Limit   int // default 100
}

// Store reads and changes the notification tables.
type Store struct{ pool *pgxpool.Pool }

// NewStore returns a Store on the payintake database.
func NewStore(pool *pgxpool.Pool) *Store { return &Store{pool: pool} }

const eventColumns = `id, partner_id, event_type, subject, webhook_id, state, attempts,
	CASE WHEN state = 'pending' THEN next_attempt_at END, last_status, last_error, created_at, delivered_at, payload`

// List returns the events f selects, newest first, each with its attempt log.
func (s *Store) List(ctx context.Context, f Filter) ([]Event, error) {
	if f.Limit <= 0 {
		f.Limit = 100
	}
	rows, err := s.pool.Query(ctx, sqlEvents, f.Partner, f.State, f.Limit)
	if err != nil {
		return nil, fmt.Errorf("list notification events: %w", err)
	}
	evs, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Event, error) { return scanEvent(r) })
	if err != nil {
		return nil, fmt.Errorf("list notification events: %w", err)
	}
	if err := s.attachLogs(ctx, evs); err != nil {
		return nil, err
	}
	return evs, nil
}

// Event returns one event with its attempt log, or ErrNotFound.
func (s *Store) Event(ctx context.Context, id int64) (Event, error) {
	ev, err := scanEvent(s.pool.QueryRow(ctx, sqlEvent, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return ev, fmt.Errorf("notification event %d: %w", id, ErrNotFound)
	}
	if err != nil {
		return ev, fmt.Errorf("read notification event %d: %w", id, err)
	}
	evs := []Event{ev}
	if err := s.attachLogs(ctx, evs); err != nil {
		return ev, err
	}
	return evs[0], nil
}

func scanEvent(r pgx.Row) (Event, error) {
	var e Event
	var payload string
	err := r.Scan(&e.ID, &e.PartnerID, &e.Type, &e.Subject, &e.WebhookID, &e.State, &e.Attempts,
		&e.NextAttemptAt, &e.LastStatus, &e.LastError, &e.CreatedAt, &e.DeliveredAt, &payload)
	e.Payload = json.RawMessage(payload)
	return e, err
}

func (s *Store) attachLogs(ctx context.Context, evs []Event) error {
	if len(evs) == 0 {
		return nil
	}
	ids := make([]int64, len(evs))
	at := map[int64]int{}
	for i, e := range evs {
		ids[i], at[e.ID] = e.ID, i
		evs[i].Log = []Attempt{}
	}
	rows, err := s.pool.Query(ctx, sqlDeliveryLog, ids)
	if err != nil {
		return fmt.Errorf("read the delivery log: %w", err)
	}
	var id int64
	var a Attempt
	_, err = pgx.ForEachRow(rows, []any{&id, &a.Attempt, &a.URL, &a.StartedAt, &a.FinishedAt, &a.Status, &a.Error}, func() error {
		evs[at[id]].Log = append(evs[at[id]].Log, a)
		return nil
	})
	if err != nil {
		return fmt.Errorf("read the delivery log: %w", err)
	}
	return nil
}

// Redeliver makes event id due again now, with a fresh retry budget and
// the same webhook-id and body, whatever its state (a delivered event is
// sent again too: the partner may have lost it). by is who asked, kept in
// notify_redeliveries for audit.
func (s *Store) Redeliver(ctx context.Context, id int64, by string, now time.Time) (Event, error) {
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, sqlDueAgain, id, now)
		if err != nil {
			return fmt.Errorf("queue notification event %d again: %w", id, err)
		}
		if tag.RowsAffected() == 0 {
			return fmt.Errorf("notification event %d: %w", id, ErrNotFound)
		}
		if _, err := tx.Exec(ctx, sqlInsertRedelivery, id, by); err != nil {
			return fmt.Errorf("record the redelivery of event %d: %w", id, err)
		}
		return nil
	})
	if err != nil {
		return Event{}, err
	}
	return s.Event(ctx, id)
}

// claimed is an event taken for one attempt.
type claimed struct {
	id        int64
	partner   string
	typ       string
	webhookID string
	payload   []byte
	attempt   int // the attempt number in the log (all attempts)
	round     int // attempts since created or redelivered: the retry budget's count
	url       string
}

// claim takes up to limit due events for one attempt each: it counts the
// attempt, opens its log row and pushes the event's due time past lease, in
// one transaction, so the attempt is counted even if the process dies
// while sending, and another process takes the event once lease has passed.
// With perPartner, at most one event of a partner, and none of the
// partners in busy (see ClaimDuePerPartner in store.sql).
func (s *Store) claim(ctx context.Context, now time.Time, lease time.Duration, limit int, perPartner bool, busy []string) ([]claimed, error) {
	claim, args := sqlClaimDue, []any{now, now.Add(lease), limit}
	if perPartner {
		if busy == nil {
			busy = []string{}
		}
		claim, args = sqlClaimDuePerPartner, append(args, busy)
	}
	var cs []claimed
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		cs = cs[:0]
		rows, err := tx.Query(ctx, claim, args...)
		if err != nil {
			return fmt.Errorf("claim due notifications: %w", err)
		}
		var c claimed
		var payload string
		_, err = pgx.ForEachRow(rows, []any{&c.id, &c.partner, &c.typ, &c.webhookID, &payload, &c.attempt, &c.round, &c.url}, func() error {
			c.payload = []byte(payload)
			cs = append(cs, c)
			return nil
		})
		if err != nil {
			return fmt.Errorf("claim due notifications: %w", err)
		}
		for _, c := range cs {
			if _, err := tx.Exec(ctx, sqlInsertAttempt,
				c.id, c.attempt, c.url, now); err != nil {
				return fmt.Errorf("log attempt %d of event %d: %w", c.attempt, c.id, err)
			}
		}
		return nil
	})
	return cs, err
}

// result is what became of one attempt.
type result struct {
	state  string    // the event's new state
	next   time.Time // pending: when it is due again
	status int       // 0: no answer
	sent   bool      // a request went out (false: nothing to sign with or nowhere to send)
	err    string    // why it did not succeed ("" when delivered)
}

// finish logs an attempt's answer and moves its event on, unless a later
// attempt was claimed meanwhile (this one's lease ran out): then only the
// log row is written.
func (s *Store) finish(ctx context.Context, c claimed, r result, now time.Time) error {
	var status *int
	if r.status != 0 {
		status = &r.status
	}
	msg := strings.ToValidUTF8(r.err, "?")
	return pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, sqlFinishAttempt, c.id, c.attempt, now, status, msg); err != nil {
			return fmt.Errorf("log the answer to attempt %d of event %d: %w", c.attempt, c.id, err)
		}
		var delivered *time.Time
		if r.state == StateDelivered {
			delivered = &now
		}
		next := r.next
		if r.state != StatePending {
			next = now
		}
		if _, err := tx.Exec(ctx, sqlFinishEvent, c.id, c.attempt, r.state, next, status, msg, delivered); err != nil {
			return fmt.Errorf("record the answer to event %d: %w", c.id, err)
		}
		return nil
	})
}
