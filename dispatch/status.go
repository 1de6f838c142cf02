package dispatch

import (
	"context"
	"encoding/hex"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// The statements of status.sql.
var (
	sqlCountDueLines = query("CountDueLines")
	sqlDeadLetters   = query("DeadLetters")
)

// DeadLetter is a line a run gave up on: SPEC's dead_letters entry. A
// request-hash conflict is listed too, with status 0 and a detail saying so.
type DeadLetter struct {
	Key         string `json:"key"`
	EmployeeRef string `json:"employee_ref"`
	Component   string `json:"component"`
	Version     int    `json:"version"`
	Status      int    `json:"status"`
	Detail      string `json:"detail"`
}

// RunStatus is one run as `dispatch status --format json` prints it.
// attempts: the requests sent for the run, retries included. conflicts:
// lines not sent because their key holds another request hash.
type RunStatus struct {
	Partner     string       `json:"partner"`
	PayPeriod   string       `json:"pay_period"`
	Run         int          `json:"run"`
	BatchKey    string       `json:"batch_key"`
	State       string       `json:"state"`
	Total       int          `json:"total"`
	Succeeded   int          `json:"succeeded"`
	Pending     int          `json:"pending"`
	Failed      int          `json:"failed"`
	Attempts    int64        `json:"attempts"`
	Conflicts   int          `json:"conflicts"`
	Cursor      int64        `json:"cursor"`
	Target      string       `json:"target"`
	CreatedAt   time.Time    `json:"created_at"`
	DeadLetters []DeadLetter `json:"dead_letters"`
}

// Status describes the runs of a partner's period (all when empty), oldest first.
func (s *Store) Status(ctx context.Context, partner, period string) ([]RunStatus, error) {
	runs, err := s.Runs(ctx, partner, period, false)
	if err != nil {
		return nil, err
	}
	out := make([]RunStatus, 0, len(runs))
	for _, r := range runs {
		rs := RunStatus{Partner: r.Partner, PayPeriod: r.Period, Run: r.Number, BatchKey: r.BatchKey(), State: r.State,
			Total: r.Total, Attempts: r.Requests, Cursor: r.Cursor, Target: r.Target, CreatedAt: r.CreatedAt,
			DeadLetters: []DeadLetter{}}
		rows, err := s.pool.Query(ctx, sqlCountDueLines, r.ID)
		if err != nil {
			return nil, fmt.Errorf("count the lines of run %s: %w", rs.BatchKey, err)
		}
		var st string
		var n int
		if _, err := pgx.ForEachRow(rows, []any{&st, &n}, func() error {
			switch st {
			case StateSucceeded:
				rs.Succeeded = n
			case StatePending:
				rs.Pending = n
			case StateFailed:
				rs.Failed += n
			case StateConflict:
				rs.Failed += n
				rs.Conflicts = n
			}
			return nil
		}); err != nil {
			return nil, fmt.Errorf("count the lines of run %s: %w", rs.BatchKey, err)
		}
		rows, err = s.pool.Query(ctx, sqlDeadLetters, r.ID)
		if err != nil {
			return nil, fmt.Errorf("list the dead letters of run %s: %w", rs.BatchKey, err)
		}
		var dl DeadLetter
		var stored, want []byte
		if _, err := pgx.ForEachRow(rows, []any{&dl.Key, &dl.EmployeeRef, &dl.Component, &dl.Version, &st,
			&dl.Status, &dl.Detail, &stored, &want}, func() error {
			d := dl
			if st == StateConflict {
				d.Status = 0
				d.Detail = fmt.Sprintf("request_hash_conflict: the key is recorded with request hash %s, this line would send %s; not sent",
					hex.EncodeToString(stored), hex.EncodeToString(want))
			}
			rs.DeadLetters = append(rs.DeadLetters, d)
			return nil
		}); err != nil {
			return nil, fmt.Errorf("list the dead letters of run %s: %w", rs.BatchKey, err)
		}
		out = append(out, rs)
	}
	return out, nil
}
