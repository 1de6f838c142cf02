package records

import (
	"bytes"
	"context"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"strconv"
)

// Statements of resultrows.sql.
var (
	sqlResultChunks     = query("ResultChunks")
	sqlResultChunksFrom = query("ResultChunksFrom")
)

// ResultHeader is the first line of every result file.
const ResultHeader = "line,row,outcome,employee_ref,pay_period,component,amount,currency,code,field,message\n"

// WriteResult streams the stored result file of an envelope (following a
// replay to its original) to w. The bytes are the ones stored when the
// envelope was processed, so every read gives the same bytes.
func (s *Store) WriteResult(ctx context.Context, id int64, w io.Writer) error {
	env, err := s.Envelope(ctx, id)
	if err != nil {
		return err
	}
	if env, err = s.Outcome(ctx, env); err != nil {
		return err
	}
	if !env.Done() {
		return fmt.Errorf("envelope %d is still being processed", env.ID)
	}
	rows, err := s.pool.Query(ctx, sqlResultChunks, env.ID)
	if err != nil {
		return fmt.Errorf("read result of envelope %d: %w", env.ID, err)
	}
	defer rows.Close()
	for rows.Next() {
		if _, err := w.Write(rows.RawValues()[0]); err != nil {
			return fmt.Errorf("write result: %w", err)
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("read result of envelope %d: %w", env.ID, err)
	}
	return nil
}

// ResultRow is one row of a result file, as its cells say.
type ResultRow struct {
	Line        int    `json:"line"`
	Row         int    `json:"row"`
	Outcome     string `json:"outcome"`
	EmployeeRef string `json:"employee_ref"`
	PayPeriod   string `json:"pay_period"`
	Component   string `json:"component"`
	Amount      string `json:"amount"`
	Currency    string `json:"currency"`
	Code        string `json:"code"`
	Field       string `json:"field"`
	Message     string `json:"message"`
	// ReplayID: the replay that produced this outcome (0: the submission itself).
	ReplayID int64 `json:"replay_id,omitempty"`
}

// resultRowsPerChunk is how many rows each stored result chunk holds (see
// the result statement in applySQL: chunk n holds rows n*4096 to n*4096+4095).
const resultRowsPerChunk = 4096

// ResultRows reads the rows of the stored result of envelope id whose row
// index is above after (-1 for the first page: a whole-file rejection is
// row 0), in order, each as view shows it (the latest outcome after leg
// replays) and if view keeps it, until limit are kept. more tells whether rows are left after the last one returned.
// It reads only the result chunks from the one holding row after+1 on.
func (s *Store) ResultRows(ctx context.Context, id int64, after, limit int, view func(ResultRow) (ResultRow, bool)) (out []ResultRow, more bool, err error) {
	rows, err := s.pool.Query(ctx, sqlResultChunksFrom,
		id, (after+1)/resultRowsPerChunk)
	if err != nil {
		return nil, false, fmt.Errorf("read result of envelope %d: %w", id, err)
	}
	defer rows.Close()
	for rows.Next() {
		got, err := parseResultChunk(rows.RawValues()[0])
		if err != nil {
			return nil, false, fmt.Errorf("read result of envelope %d: %w", id, err)
		}
		for _, r := range got {
			if r.Row <= after {
				continue
			}
			r, ok := view(r)
			if !ok {
				continue
			}
			if len(out) == limit {
				return out, true, nil
			}
			out = append(out, r)
		}
	}
	if err := rows.Err(); err != nil {
		return nil, false, fmt.Errorf("read result of envelope %d: %w", id, err)
	}
	return out, false, nil
}

// parseResultChunk parses whole result lines (a chunk never splits a row),
// skipping the header.
func parseResultChunk(data []byte) ([]ResultRow, error) {
	r := csv.NewReader(bytes.NewReader(data))
	r.FieldsPerRecord = 11
	var out []ResultRow
	for {
		rec, err := r.Read()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return nil, fmt.Errorf("parse result: %w", err)
		}
		if rec[0] == "line" && rec[1] == "row" {
			continue
		}
		line, err1 := strconv.Atoi(rec[0])
		row, err2 := strconv.Atoi(rec[1])
		if err1 != nil || err2 != nil {
			return nil, fmt.Errorf("parse result: line %q, row %q are not numbers", rec[0], rec[1])
		}
		out = append(out, ResultRow{Line: line, Row: row, Outcome: rec[2], EmployeeRef: rec[3], PayPeriod: rec[4],
			Component: rec[5], Amount: rec[6], Currency: rec[7], Code: rec[8], Field: rec[9], Message: rec[10]})
	}
}

// IsOutcome reports whether o is one of the row outcomes.
func IsOutcome(o string) bool {
	switch o {
	case "created", "updated", "unchanged", "held", "stale", "rejected":
		return true
	}
	return false
}
