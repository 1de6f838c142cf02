package records

// Bulk decisions: a reviewer approves or rejects every open exception of one
// partner that matches a filter. Each exception is decided exactly as Decide
// decides one (decideLocked, set-based over a batch: one winner, stale approvals refused, an audit
// row, the review report written when a submission's last exception closes),
// in batches of at most BulkBatchSize exceptions, one transaction per batch.
// The partner lock is held for one batch at a time, so a decision over
// 10,000 exceptions lets the partner's files in between batches, and never
// touches other partners at all.

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/shopspring/decimal"
)

// BulkBatchSize is how many exceptions one transaction of a bulk decision decides.
const BulkBatchSize = 500

// Refusal is an exception a bulk decision left as it was, and why.
type Refusal struct {
	ExceptionID int64  `json:"exception_id"`
	Reason      string `json:"reason"` // stale, already_decided, component, held (a held code given its component, held again)
	Detail      string `json:"detail"`
}

// CurrencyAmount is a signed amount in one currency.
type CurrencyAmount struct {
	Currency string `json:"currency"`
	Amount   string `json:"amount"`
}

// Summary is what a bulk decision would touch: the open exceptions matching
// its filter and, per currency, the total amount change approving them all
// would make.
type Summary struct {
	Count       int              `json:"count"`
	TotalChange []CurrencyAmount `json:"total_change"`
}

// String says the summary in one line: "3 open exception(s), total change +150.00 USD".
func (s Summary) String() string {
	parts := make([]string, 0, len(s.TotalChange))
	for _, c := range s.TotalChange {
		a := c.Amount
		if !strings.HasPrefix(a, "-") {
			a = "+" + a
		}
		parts = append(parts, a+" "+c.Currency)
	}
	total := "none"
	if len(parts) > 0 {
		total = strings.Join(parts, ", ")
	}
	return fmt.Sprintf("%d open exception(s), total amount change %s", s.Count, total)
}

// BulkDecision is one reviewer's verdict on every open exception matching Filter.
type BulkDecision struct {
	Filter   ExceptionFilter // Partner is required; Status, AfterID and Limit are ignored
	Approve  bool
	Reviewer string
	Note     string
	Via      string
	Partners []string // the reviewer's partners; empty means all
	// AsComponent approves rows held for their component code as this
	// component (Decision.AsComponent).
	AsComponent string
	// BatchSize is how many exceptions one transaction decides (0: BulkBatchSize).
	BatchSize int
}

// BulkResult is the outcome of a bulk decision.
type BulkResult struct {
	Status  string    `json:"status"` // approved or rejected
	Decided int       `json:"decided"`
	Batches int       `json:"batches"`
	Refused []Refusal `json:"refused"`
}

func (b BulkDecision) check() (ExceptionFilter, error) {
	f := b.Filter
	if strings.TrimSpace(f.Partner) == "" {
		return f, errors.New("a bulk decision needs the partner whose exceptions it decides")
	}
	if !InScope(b.Partners, f.Partner) {
		return f, fmt.Errorf("reviewer %s may not decide exceptions of partner %s: %w", b.Reviewer, f.Partner, ErrForbidden)
	}
	if err := f.Check(); err != nil {
		return f, err
	}
	f.Status, f.AfterID, f.Limit, f.Scope = ExceptionOpen, 0, 0, b.Partners
	return f, nil
}

// Summarize counts the open exceptions a bulk decision would decide and the
// total amount change approving them would make, per currency (a change of
// currency counts as the locked amount taken away in one currency and the
// proposed amount added in the other).
func (s *Store) Summarize(ctx context.Context, b BulkDecision) (Summary, error) {
	f, err := b.check()
	if err != nil {
		return Summary{}, err
	}
	args := append(f.args(), ExceptionOpen)
	sum := Summary{TotalChange: []CurrencyAmount{}}
	if err := s.pool.QueryRow(ctx, `SELECT count(*) FROM exceptions x WHERE `+queueWhere+` AND x.status = $10`, args...).Scan(&sum.Count); err != nil {
		return sum, fmt.Errorf("count the matching exceptions: %w", err)
	}
	rows, err := s.pool.Query(ctx, `
		SELECT c.currency, sum(c.amount)::text FROM exceptions x
		CROSS JOIN LATERAL (VALUES (x.proposed ->> 'currency', (x.proposed ->> 'amount')::numeric),
			(x.current ->> 'currency', -(x.current ->> 'amount')::numeric)) c (currency, amount)
		WHERE `+queueWhere+` AND x.status = $10 AND c.currency IS NOT NULL
		GROUP BY c.currency ORDER BY c.currency`, args...)
	if err != nil {
		return sum, fmt.Errorf("total the matching exceptions: %w", err)
	}
	totals, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (CurrencyAmount, error) {
		var c CurrencyAmount
		err := r.Scan(&c.Currency, &c.Amount)
		return c, err
	})
	if err != nil {
		return sum, fmt.Errorf("total the matching exceptions: %w", err)
	}
	for _, c := range totals {
		if d, err := decimal.NewFromString(c.Amount); err == nil && !d.IsZero() {
			sum.TotalChange = append(sum.TotalChange, c)
		}
	}
	return sum, nil
}

// DecideAll approves or rejects every open exception matching b.Filter, in
// batches of BulkBatchSize (one transaction each). Exceptions that cannot be
// decided (approving a stale one, or one decided or superseded meanwhile) are
// left as they are and listed in Refused; any other error stops the decision
// after the batches already committed, which the error says.
func (s *Store) DecideAll(ctx context.Context, b BulkDecision) (BulkResult, error) {
	batch := b.BatchSize
	if batch <= 0 {
		batch = BulkBatchSize
	}
	res := BulkResult{Status: ExceptionRejected, Refused: []Refusal{}}
	if b.Approve {
		res.Status = ExceptionApproved
	}
	f, err := b.check()
	if err != nil {
		return res, err
	}
	d, err := Decision{Approve: b.Approve, Reviewer: b.Reviewer, Note: b.Note, Via: b.Via, Partners: b.Partners, AsComponent: b.AsComponent}.normal()
	if err != nil {
		return res, err
	}
	f.Limit = batch
	for {
		xs, err := s.matchingIDs(ctx, f)
		if err != nil {
			return res, s.bulkStopped(res, err)
		}
		if len(xs) == 0 {
			return res, nil
		}
		var decided []int64
		var refused map[int64]error
		err = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
			if err := PartnerLock(ctx, tx, f.Partner); err != nil {
				return err
			}
			decided, refused, err = decideLocked(ctx, tx, d, f.Partner, xs)
			if err != nil {
				return err
			}
			return s.SealReviews(ctx, tx, f.Partner)
		})
		if err != nil {
			return res, s.bulkStopped(res, err)
		}
		res.Decided += len(decided)
		for _, id := range xs {
			var de *DecidedError
			var se *StaleError
			var ce *ComponentError
			var again *HeldAgain
			switch err := refused[id]; {
			case errors.As(err, &ce):
				res.Refused = append(res.Refused, Refusal{ExceptionID: id, Reason: "component", Detail: ce.Error()})
			case errors.As(err, &again):
				res.Refused = append(res.Refused, Refusal{ExceptionID: id, Reason: "held", Detail: again.Error()})
			case errors.As(err, &se):
				res.Refused = append(res.Refused, Refusal{ExceptionID: id, Reason: "stale", Detail: se.Error()})
			case errors.As(err, &de):
				res.Refused = append(res.Refused, Refusal{ExceptionID: id, Reason: "already_decided", Detail: de.Error()})
			}
		}
		res.Batches++
		f.AfterID = xs[len(xs)-1]
	}
}

func (s *Store) bulkStopped(res BulkResult, err error) error {
	if res.Batches == 0 {
		return err
	}
	return fmt.Errorf("the bulk decision stopped after %d exception(s) were %s: %w; run it again to decide the rest", res.Decided, res.Status, err)
}

// matchingIDs lists the ids of the next f.Limit open exceptions matching f after f.AfterID.
func (s *Store) matchingIDs(ctx context.Context, f ExceptionFilter) ([]int64, error) {
	rows, err := s.pool.Query(ctx, `SELECT x.id FROM exceptions x WHERE `+queueWhere+` AND x.status = $10 AND x.id > $11
		ORDER BY x.id LIMIT $12`, append(f.args(), ExceptionOpen, f.AfterID, f.Limit)...)
	if err != nil {
		return nil, fmt.Errorf("list the matching exceptions: %w", err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil {
		return nil, fmt.Errorf("list the matching exceptions: %w", err)
	}
	return ids, nil
}
