package records

import (
	"context"
	"fmt"
	"io"
	"strconv"

	"github.com/payintake/payintake/normalize"
)

// Statements of resultrows.sql.
var (
	sqlResultChunks     = query("ResultChunks")
	sqlResultChunksFrom = query("ResultChunksFrom")
)

// ResultHeader is the first line of every result file; the result file's
// format is normalize's.
const ResultHeader = normalize.ResultHeader

// WriteResult streams the stored result file of an envelope (following a
// repeat to its original) to w, as the partner reads it: sealed, when it
// was sealed for the partner (ResultFile.Sealed), a workbook when its
// profile asked for xlsx (writeServedResult). The bytes are the ones
// stored when the envelope was processed (or the workbook they always
// make), so every read gives the same bytes.
func (s *Store) WriteResult(ctx context.Context, id int64, w io.Writer) error {
	return s.writeResult(ctx, id, w, true)
}

// WritePlainResult is WriteResult before any sealing: the result's CSV
// (never a workbook),
// for the platform's own use (an operator's ingest, the benchmark).
func (s *Store) WritePlainResult(ctx context.Context, id int64, w io.Writer) error {
	return s.writeResult(ctx, id, w, false)
}

func (s *Store) writeResult(ctx context.Context, id int64, w io.Writer, sealed bool) error {
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
	if sealed {
		if _, ok, err := s.Sealed(ctx, env.ID, SealedResult); err != nil {
			return err
		} else if ok {
			return s.WriteSealed(ctx, env.ID, SealedResult, w)
		}
	}
	if !sealed && env.ResultFormat == normalize.ResultsXLSX {
		env.ResultFormat = "" // the platform's own use reads the lines
	}
	return writeServedResult(ctx, s.pool, env, w)
}

// ResultRow is one row of a result file, as its cells say.
type ResultRow struct {
	Line        int     `json:"line"`
	Row         int     `json:"row"`
	Outcome     Outcome `json:"outcome"`
	EmployeeRef string  `json:"employee_ref"`
	PayPeriod   string  `json:"pay_period"`
	Component   string  `json:"component"`
	Amount      string  `json:"amount"`
	Currency    string  `json:"currency"`
	Code        string  `json:"code"`
	Field       string  `json:"field"`
	Message     string  `json:"message"`
	// ReplayID: the replay that produced this outcome (0: the submission itself).
	ReplayID int64 `json:"replay_id,omitempty"`
}

// ResultRowsPerChunk is how many rows each stored result chunk holds:
// chunk n holds rows n*4096 to n*4096+4095, as apply's resultLines stores
// them.
const ResultRowsPerChunk = 4096

// ResultRows reads the rows of the stored result of envelope id whose row
// index is above after (-1 for the first page: a whole-file rejection is
// row 0), in order, each as view shows it (the latest outcome after leg
// replays) and if view keeps it, until limit are kept. more tells whether rows are left after the last one returned.
// It reads only the result chunks from the one holding row after+1 on.
func (s *Store) ResultRows(ctx context.Context, id int64, after, limit int, view func(ResultRow) (ResultRow, bool)) (out []ResultRow, more bool, err error) {
	rows, err := s.pool.Query(ctx, sqlResultChunksFrom,
		id, (after+1)/ResultRowsPerChunk)
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
	var out []ResultRow
	err := normalize.ReadResultLines(data, func(l normalize.ResultLine) error {
		if l.Header {
			return nil
		}
		c := l.Cells
		line, err1 := strconv.Atoi(c[0])
		row, err2 := strconv.Atoi(c[1])
		if err1 != nil || err2 != nil {
			return fmt.Errorf("parse result: line %q, row %q are not numbers", c[0], c[1])
		}
		out = append(out, ResultRow{Line: line, Row: row, Outcome: Outcome(c[2]), EmployeeRef: c[3], PayPeriod: c[4],
			Component: c[5], Amount: c[6], Currency: c[7], Code: c[8], Field: c[9], Message: c[10]})
		return nil
	})
	return out, err
}

// IsOutcome reports whether o is one of the row outcomes.
func IsOutcome(o string) bool { return Outcome(o).Valid() }

// ParseResultRows reads the rows of result lines (a header line, if any,
// is skipped).
func ParseResultRows(data []byte) ([]ResultRow, error) { return parseResultChunk(data) }
