package records

import (
	"context"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/payintake/payintake/normalize"
)

// Statements of processing.sql.
var (
	sqlStoreFileRejectResult = query("StoreFileRejectResult")
	sqlCloseRejectedEnvelope = query("CloseRejectedEnvelope")
	sqlRecordFailure         = query("RecordFailure")
)

// fileResult stores a one-row result for a file rejected as a whole and
// closes the envelope with status. Its line is written by result_line, as
// every line of a result file.
func (s *Store) fileResult(ctx context.Context, tx pgx.Tx, env *Envelope, fr normalize.ParseError, status string) error {
	env.Status = status
	env.Counts = map[string]int{string(OutcomeRejected): 1}
	err := tx.QueryRow(ctx, sqlStoreFileRejectResult, env.ID, ResultHeader, fr.StartLine, string(fr.Code()), fr.Field,
		strings.ToValidUTF8(fr.Message, "\uFFFD"), OutcomeRejected).Scan(&env.ResultSize)
	if err != nil {
		return fmt.Errorf("store result: %w", err)
	}
	_, err = tx.Exec(ctx, sqlCloseRejectedEnvelope,
		env.ID, status, env.Counts, env.ResultSize, env.Seq)
	if err != nil {
		return fmt.Errorf("close envelope: %w", err)
	}
	return nil
}

// RecordFailure notes that processing the envelope failed with cause, for
// operators (envelope_attempts: failures, last error). It is written
// outside the failed transaction, which rolled back.
func (s *Store) RecordFailure(ctx context.Context, id int64, cause error) error {
	msg := cause.Error()
	if len(msg) > 2000 {
		msg = msg[:2000]
	}
	_, err := s.pool.Exec(ctx, sqlRecordFailure, id, strings.ToValidUTF8(msg, "?"))
	if err != nil {
		return fmt.Errorf("record the failure of envelope %d: %w", id, err)
	}
	return nil
}
