package records

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/payintake/payintake/normalize"
)

// Statements of processing.sql.
var (
	sqlStoreOneChunkResult   = query("StoreOneChunkResult")
	sqlCloseRejectedEnvelope = query("CloseRejectedEnvelope")
	sqlRecordFailure         = query("RecordFailure")

	sqlLockEnvelopeForProcessing = query("LockEnvelopeForProcessing")
	sqlCloseEnvelope             = query("CloseEnvelope")
)

// RejectFile stores a one-row result for a file rejected as a whole (row 0,
// rejected, at the line the refusal names) and closes the envelope with
// status.
func (s *Store) RejectFile(ctx context.Context, tx pgx.Tx, env *Envelope, fr normalize.ParseError, status string) error {
	env.Status = status
	env.Counts = map[string]int{string(OutcomeRejected): 1}
	data := normalize.AppendResultLine([]byte(ResultHeader), fr.StartLine, 0, string(OutcomeRejected),
		[8]string{5: string(fr.Code()), 6: fr.Field, 7: strings.ToValidUTF8(fr.Message, "\uFFFD")})
	data = append(data, '\n')
	env.ResultSize = int64(len(data))
	if _, err := tx.Exec(ctx, sqlStoreOneChunkResult, env.ID, data); err != nil {
		return fmt.Errorf("store result: %w", err)
	}
	_, err := tx.Exec(ctx, sqlCloseRejectedEnvelope,
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

// LockForProcessing reads envelope id in tx, locked for processing, and
// when it is still to be processed takes its partner's lock and reads the
// partner: todo is false for an envelope that already has its outcome. An
// envelope another transaction is processing gives ErrBusy at once, rather
// than waiting with a connection held. With ifPartnerFree, a partner whose
// lock another transaction holds gives ErrPartnerBusy at once (env says
// whose partner) instead of waiting.
func (s *Store) LockForProcessing(ctx context.Context, tx pgx.Tx, id int64, ifPartnerFree bool) (env Envelope, p Partner, todo bool, err error) {
	// NO KEY UPDATE: recording a replay of this envelope takes a key
	// share lock on it (replay_of's foreign key), which must not make
	// its processor look busy.
	env, err = scanEnvelope(tx.QueryRow(ctx, sqlLockEnvelopeForProcessing, id))
	if errors.Is(err, ErrNotFound) {
		// Locked by another transaction, or not there at all: asked in tx,
		// so that a busy envelope costs no second connection.
		if _, err := scanEnvelope(tx.QueryRow(ctx, sqlEnvelope, id)); err != nil {
			return env, p, false, err
		}
		return env, p, false, ErrBusy
	}
	if err != nil || env.Status != StatusReceived {
		return env, p, false, err
	}
	if ifPartnerFree {
		err = PartnerTryLock(ctx, tx, env.PartnerID)
	} else {
		err = PartnerLock(ctx, tx, env.PartnerID)
	}
	if err != nil {
		return env, p, false, err
	}
	if p, err = scanPartner(tx.QueryRow(ctx, sqlPartner, env.PartnerID)); err != nil {
		return env, p, false, fmt.Errorf("read partner %q: %w", env.PartnerID, err)
	}
	if err := recordProfileVersion(ctx, tx, &env, p); err != nil {
		return env, p, false, err
	}
	return env, p, true, nil
}

// SpoolEnvelope copies the bytes of env, as received, through tx (one
// query, its chunks written as they come) to an unlinked temporary file in
// the spool directory (spoolFile), and returns it rewound: the file
// processing reads, so that it needs one connection and flat memory. The
// caller closes it. The copy must come to env.Size bytes (checkStoredSize).
func (s *Store) SpoolEnvelope(ctx context.Context, tx pgx.Tx, env Envelope) (*os.File, error) {
	f, size, err := s.spoolFile(fmt.Sprintf("bytes of envelope %d", env.ID), func(w io.Writer) error {
		if err := copyEnvelopeBytes(ctx, tx, env.ID, w); err != nil {
			return fmt.Errorf("spool the bytes of envelope %d: %w", env.ID, err)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if err := checkStoredSize(size, env.Size); err != nil {
		f.Close()
		return nil, fmt.Errorf("spool the bytes of envelope %d: %w", env.ID, err)
	}
	return f, nil
}

// CloseEnvelope marks env processed with its counts and the size of the
// result stored in tx.
func CloseEnvelope(ctx context.Context, tx pgx.Tx, env *Envelope, counts map[string]int) error {
	env.Counts = counts
	env.Status = StatusProcessed
	if err := tx.QueryRow(ctx, sqlCloseEnvelope, env.ID, counts, env.Seq).Scan(&env.ResultSize); err != nil {
		return fmt.Errorf("close envelope: %w", err)
	}
	return nil
}

// SpoolDir is where temporary copies of envelopes go (Options.SpoolDir).
func (s *Store) SpoolDir() string { return s.spoolDir }
