package records

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/jackc/pgx/v5"
)

// StagedRow is one data row of a file, normalised (or rejected), ready to be
// staged. Valid rows carry normalised values and a content hash; rejected
// rows carry Code, Field and Message. D* values are what the result file
// echoes when they differ from the normalised ones (raw values of a rejected
// row, formula-escaped values); empty means "the normalised value".
type StagedRow struct {
	Row, Line                                                int
	EmployeeRef, PayPeriod, Component, Amount, Currency      string
	Hours, Rate, PayDate                                     string
	Hash                                                     []byte
	DEmployeeRef, DPayPeriod, DComponent, DAmount, DCurrency string
	Code, Field, Message                                     string
}

// RowSource yields the rows of one file in order. Next returns io.EOF after
// the last row, or a *FileReject when the whole file must be rejected.
type RowSource interface {
	Next() (StagedRow, error)
}

// Plan is how one envelope is to be applied, decided by the caller once the
// envelope and its partner are locked.
type Plan struct {
	Seq          *int64 // the file's sequence number, if the partner's file pattern gives one
	AllOrNothing bool
	Rows         RowSource
}

// Planner builds the Plan for an envelope from its original bytes. Returning
// a *FileReject rejects the whole file with that reason.
type Planner func(ctx context.Context, env Envelope, p Partner, body io.Reader) (Plan, error)

// ErrBusy is returned by Process when another transaction is processing the
// envelope right now. Wait for it (WaitDone) or try again later.
var ErrBusy = errors.New("envelope is being processed by another worker")

// Process applies a received envelope in one transaction: the rows are
// staged with COPY, classified against the stored records with set-based
// SQL, applied (records, history, exceptions), and the result file is built
// and stored, all committed together with the envelope's new status. An
// envelope that is already done is returned as it is: processing twice is a
// no-op, so a retried job is safe. One that another transaction is
// processing gives ErrBusy at once rather than waiting with a connection held.
//
// The envelope's bytes are first copied, over the same connection, to a
// temporary file, so processing needs one connection and flat memory.
func (s *Store) Process(ctx context.Context, id int64, plan Planner) (Envelope, error) {
	var env Envelope
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		var err error
		env, err = scanEnvelope(tx.QueryRow(ctx, `SELECT `+envelopeColumns+` FROM envelopes WHERE id = $1 FOR UPDATE SKIP LOCKED`, id))
		if errors.Is(err, ErrNotFound) {
			if _, err := s.Envelope(ctx, id); err != nil {
				return err
			}
			return ErrBusy
		}
		if err != nil {
			return err
		}
		if env.Status != StatusReceived {
			return nil
		}
		if err := partnerLock(ctx, tx, env.PartnerID); err != nil {
			return err
		}
		p, err := scanPartner(tx.QueryRow(ctx, `SELECT `+partnerColumns+` FROM partners p WHERE p.id = $1`, env.PartnerID))
		if err != nil {
			return fmt.Errorf("read partner %q: %w", env.PartnerID, err)
		}
		body, err := s.spool(ctx, tx, env.ID)
		if err != nil {
			return err
		}
		defer closeSpool(body)
		pl, err := plan(ctx, env, p, body)
		var fr *FileReject
		if errors.As(err, &fr) {
			env.Seq = pl.Seq
			return s.fileResult(ctx, tx, &env, *fr, StatusProcessed)
		}
		if err != nil {
			return err
		}
		env.Seq = pl.Seq
		return s.apply(ctx, tx, &env, pl)
	})
	if err != nil {
		return Envelope{}, fmt.Errorf("process envelope %d: %w", id, err)
	}
	return env, nil
}

// spool copies an envelope's bytes to a temporary file through tx, a chunk
// at a time.
func (s *Store) spool(ctx context.Context, tx pgx.Tx, id int64) (*os.File, error) {
	f, err := os.CreateTemp(s.spoolDir, "payintake-envelope-*")
	if err != nil {
		return nil, fmt.Errorf("spool envelope %d: %w", id, err)
	}
	_ = os.Remove(f.Name()) // unlinked: the space is freed whatever happens
	for n := int32(0); ; n++ {
		var data []byte
		err := tx.QueryRow(ctx, `SELECT data FROM envelope_chunks WHERE envelope_id = $1 AND n = $2`, id, n).Scan(&data)
		if errors.Is(err, pgx.ErrNoRows) {
			break
		}
		if err == nil {
			_, err = f.Write(data)
		}
		if err != nil {
			f.Close()
			return nil, fmt.Errorf("spool envelope %d: %w", id, err)
		}
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		f.Close()
		return nil, fmt.Errorf("spool envelope %d: %w", id, err)
	}
	return f, nil
}

func closeSpool(f *os.File) { _ = f.Close() }

func (s *Store) apply(ctx context.Context, tx pgx.Tx, env *Envelope, pl Plan) error {
	sp, err := tx.Begin(ctx) // savepoint: a file rejected mid-stream leaves no staged rows
	if err != nil {
		return fmt.Errorf("savepoint: %w", err)
	}
	if _, err := sp.Exec(ctx, stageDDL); err != nil {
		return fmt.Errorf("create stage: %w", err)
	}
	src := &stageSource{rows: pl.Rows}
	_, err = sp.CopyFrom(ctx, pgx.Identifier{"stage"}, stageColumns, src)
	var fr *FileReject
	if err != nil && errors.As(src.err, &fr) { // pgx reports the source's error as text only
		if rbErr := sp.Rollback(ctx); rbErr != nil {
			return fmt.Errorf("roll back staged rows: %w", rbErr)
		}
		return s.fileResult(ctx, tx, env, *fr, StatusProcessed)
	}
	if err != nil {
		return fmt.Errorf("stage rows: %w", err)
	}
	if err := sp.Commit(ctx); err != nil {
		return fmt.Errorf("release savepoint: %w", err)
	}
	if src.count == 0 {
		return s.fileResult(ctx, tx, env, FileReject{Code: "no_rows", Line: 1,
			Message: "the file has a header but no data rows; nothing was applied: send the rows of the payroll run"}, StatusProcessed)
	}

	fileRejected := false
	if pl.AllOrNothing {
		fileRejected = src.rejected > 0
		if !fileRejected {
			if err := tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM stage WHERE code IS NULL
				GROUP BY employee_ref, pay_period, component HAVING count(*) > 1)`).Scan(&fileRejected); err != nil {
				return fmt.Errorf("check duplicates: %w", err)
			}
		}
	}
	args := pgx.NamedArgs{"partner": env.PartnerID, "seq": env.Seq, "env": env.ID,
		"file_rejected": fileRejected, "header": ResultHeader}
	if _, err := tx.Exec(ctx, classifiedDDL); err != nil {
		return fmt.Errorf("create classified: %w", err)
	}
	if _, err := tx.Exec(ctx, classifySQL, args); err != nil {
		return fmt.Errorf("classify rows: %w", err)
	}
	for _, q := range applySQL {
		if _, err := tx.Exec(ctx, q, args); err != nil {
			return fmt.Errorf("apply rows: %w", err)
		}
	}
	counts := map[string]int{}
	rows, err := tx.Query(ctx, `SELECT outcome, count(*) FROM classified GROUP BY outcome`)
	if err != nil {
		return fmt.Errorf("count outcomes: %w", err)
	}
	for rows.Next() {
		var o string
		var n int
		if err := rows.Scan(&o, &n); err != nil {
			return fmt.Errorf("count outcomes: %w", err)
		}
		counts[o] = n
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("count outcomes: %w", err)
	}
	env.Counts = counts
	env.Status = StatusProcessed
	err = tx.QueryRow(ctx, `
		UPDATE envelopes SET status = 'processed', counts = $2, seq = $3, processed_at = now(),
			result_size = (SELECT sum(length(data)) FROM envelope_results WHERE envelope_id = $1)
		WHERE id = $1 RETURNING result_size`, env.ID, counts, env.Seq).Scan(&env.ResultSize)
	if err != nil {
		return fmt.Errorf("close envelope: %w", err)
	}
	return nil
}

var stageColumns = []string{"row_no", "line", "employee_ref", "pay_period", "component", "amount", "currency",
	"hours", "rate", "pay_date", "content_hash",
	"d_employee_ref", "d_pay_period", "d_component", "d_amount", "d_currency", "code", "field", "message"}

const stageDDL = `CREATE TEMP TABLE stage (
	row_no integer NOT NULL, line integer NOT NULL,
	employee_ref text, pay_period text, component text, amount text, currency text,
	hours text, rate text, pay_date text, content_hash bytea,
	d_employee_ref text, d_pay_period text, d_component text, d_amount text, d_currency text,
	code text, field text, message text
) ON COMMIT DROP`

type stageSource struct {
	rows     RowSource
	row      StagedRow
	err      error
	count    int
	rejected int
	vals     []any
}

func (s *stageSource) Next() bool {
	r, err := s.rows.Next()
	if errors.Is(err, io.EOF) {
		return false
	}
	if err != nil {
		s.err = err
		return false
	}
	s.row = r
	s.count++
	if r.Code != "" {
		s.rejected++
	}
	return true
}

func (s *stageSource) Values() ([]any, error) {
	r := &s.row
	if r.Code != "" {
		// A rejected row takes part in nothing but the result file.
		s.vals = append(s.vals[:0], r.Row, r.Line, nil, nil, nil, nil, nil, nil, nil, nil, nil,
			str(r.DEmployeeRef), str(r.DPayPeriod), str(r.DComponent), str(r.DAmount), str(r.DCurrency),
			r.Code, str(r.Field), r.Message)
		return s.vals, nil
	}
	s.vals = append(s.vals[:0], r.Row, r.Line, r.EmployeeRef, r.PayPeriod, r.Component, r.Amount, r.Currency,
		str(r.Hours), str(r.Rate), str(r.PayDate), r.Hash,
		str(r.DEmployeeRef), str(r.DPayPeriod), str(r.DComponent), str(r.DAmount), str(r.DCurrency), nil, nil, nil)
	return s.vals, nil
}

func (s *stageSource) Err() error { return s.err }

// str maps "" to NULL, so empty cells stay unquoted in the result file.
func str(v string) any {
	if v == "" {
		return nil
	}
	return v
}
