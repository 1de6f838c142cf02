package records

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/payintake/payintake/normalize"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"
	"golang.org/x/text/cases"
)

// Statements of envelopes.sql.
var (
	sqlEnvelope                 = query("Envelope")
	sqlSubmissions              = query("Submissions")
	sqlInsertEnvelope           = query("InsertEnvelope")
	sqlReserveEnvelopeID        = query("ReserveEnvelopeID")
	sqlInsertStreamedEnvelope   = query("InsertStreamedEnvelope")
	sqlInsertEnvelopeClientTime = query("InsertEnvelopeClientTime")
	sqlClaimSubmissionKey       = query("ClaimSubmissionKey")
	sqlFirstOfSubmissionKey     = query("FirstOfSubmissionKey")
	sqlMarkRepeat               = query("MarkRepeat")
	sqlDropRepeatChunks         = query("DropRepeatChunks")
	sqlMarkIncomplete           = query("MarkIncomplete")
)

// Envelope statuses; see the envelopes table in migrations for their meaning.
// A repeat (the same file sent again under its key) has the status
// "replay", a word partners see in the HTTP API's listings and that stays;
// it is not a leg replay (replay.go), which corrects rows of a submission.
const (
	StatusReceived   = "received"
	StatusProcessed  = "processed"
	StatusRepeat     = "replay"
	StatusKeyReuse   = "key_reuse"
	StatusIncomplete = "incomplete"
)

// Envelope is one file as it arrived.
type Envelope struct {
	ID         int64          `json:"id"`
	PartnerID  string         `json:"partner"`
	FileName   string         `json:"file_name"`
	Key        string         `json:"submission_key"`
	SHA256     []byte         `json:"sha256"`
	Size       int64          `json:"size"`
	Source     string         `json:"source"`
	ReceivedAt time.Time      `json:"received_at"`
	Status     string         `json:"status"`
	RepeatOf   int64          `json:"replay_of,omitempty"`
	Seq        *int64         `json:"seq,omitempty"`
	Counts     map[string]int `json:"counts,omitempty"`
	ResultSize int64          `json:"result_size"`
	// ProfileVersion is the partner profile version the file was read
	// with (0: none).
	ProfileVersion int `json:"profile_version,omitempty"`
	// ResultFormat is the format its result is served in: "" (csv) or
	// normalize.ResultsCSVExcel, as its profile asked when it was read.
	ResultFormat string `json:"result_format,omitempty"`
	// Applied is set by processing (apply.Job.Apply) when this call did the work (rather than
	// finding the envelope already done).
	Applied bool `json:"-"`
}

// Done reports whether the envelope has its final outcome (a result to read).
func (e Envelope) Done() bool { return e.Status != StatusReceived }

// SubmissionKey derives the submission key from a file name: the name,
// Unicode case-folded. The partner scopes it.
func SubmissionKey(fileName string) string { return cases.Fold().String(fileName) }

// Incoming is a file that has arrived whole and is ready to be recorded.
type Incoming struct {
	PartnerID string
	FileName  string
	Source    string // cli, sftp, http
	Path      string // the complete bytes, spooled to a local file
	// Key is the submission key when the transport has one of its own (the
	// HTTP Idempotency-Key); empty means the file name. It is case-folded.
	Key string
	// SHA256 and Size, when SHA256 is set, are the file's hash and length as
	// computed while its bytes arrived; Receive then does not read the file
	// twice (it is read once, to store it). Empty: Receive hashes the file.
	SHA256 []byte
	Size   int64
	// ModTime is a modification time the client set on the file, if any.
	ModTime time.Time
	// Stream, when set, already holds the file's bytes (all Size of them,
	// streamed while they arrived): Receive records the envelope in the
	// stream's transaction instead of storing the bytes from Path, and ends
	// the stream either way. It needs SHA256.
	Stream *Stream
	// Identity, when set, is what the submission key is claimed with
	// instead of SHA256: an OpenPGP upload's plaintext hash, so that the
	// same payroll encrypted again (other bytes) is a repeat, and other
	// plaintext under the key a key reuse.
	Identity []byte
	// PGP, when set, is what the OpenPGP upload was, recorded with the
	// envelope (for every status: a repeat's keys are audited too).
	PGP *EnvelopePGP
	// Seal, when set, seals the refusal of a key reuse for the partner.
	Seal *Sealer
	// Upload, when set, is the unfinished upload (sftp_uploads) these bytes
	// finish: it is dropped in the envelope's transaction, so the file is
	// either received or still resumable, never both nor neither.
	Upload int64
	// RepeatNotRecorded: a repeat of the first envelope's very bytes (the
	// same key and the same SHA-256) is answered without being recorded:
	// Receive returns it with Status StatusRepeat, RepeatOf the first
	// envelope and ID 0, and writes nothing. A door whose client retries
	// one request (HTTP's Idempotency-Key) asks for this: the retry is the
	// same request again, not a new arrival. Other bytes under the key are
	// recorded as ever (a replay of an OpenPGP file encrypted again, with
	// its keys; a key reuse, for audit).
	RepeatNotRecorded bool
}

// errRepeatNotRecorded rolls back the envelope of a repeat that is not
// recorded (Incoming.RepeatNotRecorded).
var errRepeatNotRecorded = errors.New("repeat not recorded")

// AfterInsert runs inside the transaction that records a new envelope, so work
// enqueued there (a processing job) commits or vanishes together with it.
type AfterInsert func(ctx context.Context, tx pgx.Tx, env Envelope) error

// Receive records a file as an envelope, durably, and decides its submission:
//
//   - a new key: the envelope is "received" with its bytes stored, and after
//     runs in the same transaction (to enqueue processing);
//   - the same key with the same bytes: a repeat of the first envelope
//     (status "replay"), whose result it shares; nothing is processed again (and, with
//     Incoming.RepeatNotRecorded, nothing recorded);
//   - the same key with other bytes: "key_reuse", rejected with code
//     idempotency_key_reuse; its bytes are kept for audit, nothing applied.
//
// Concurrent Receives of one key are decided by the submissions primary key:
// the second waits for the first to commit and then sees it.
func (s *Store) Receive(ctx context.Context, in Incoming, after AfterInsert) (Envelope, error) {
	// One trace per envelope starts here (or under an HTTP request's span);
	// after carries it on to the processing job.
	ctx, span := s.tracer.Start(ctx, "receive", trace.WithAttributes(
		attribute.String("payintake.partner", in.PartnerID), attribute.String("payintake.source", in.Source)))
	env, err := s.receive(ctx, in, after)
	span.SetAttributes(attribute.Int64("payintake.envelope_id", env.ID), attribute.String("payintake.status", env.Status),
		attribute.Int64("payintake.bytes", env.Size))
	EndSpan(span, err)
	return env, err
}

func (s *Store) receive(ctx context.Context, in Incoming, after AfterInsert) (Envelope, error) {
	sum, size := in.SHA256, in.Size
	if len(sum) == 0 {
		var err error
		if sum, size, err = hashFile(in.Path); err != nil {
			return Envelope{}, err
		}
	}
	var mtime *time.Time
	if !in.ModTime.IsZero() {
		mtime = &in.ModTime
	}
	key := in.Key
	if key == "" {
		key = in.FileName
	}
	identity := in.Identity
	if len(identity) == 0 {
		identity = sum
	}
	env := Envelope{PartnerID: in.PartnerID, FileName: in.FileName, Key: SubmissionKey(key),
		SHA256: sum, Size: size, Source: in.Source, Status: StatusReceived}
	// The bytes: stored from the spool in the envelope's transaction, or
	// already copied there by the stream (whose transaction this is).
	st := in.Stream
	if st != nil {
		defer st.Abort() // after its commit, only gives the connection back
		if st.partner != in.PartnerID {
			return Envelope{}, fmt.Errorf("receive %q: its bytes were streamed for partner %q, not %q", in.FileName, st.partner, in.PartnerID)
		}
		if err := st.finish(size); err != nil {
			// The bytes are still in the spool: stored from there.
			s.log.Warn("streamed upload bytes lost; storing them from the spool", "file", in.FileName, "err", err)
			st.Abort()
			st = nil
		}
	}
	store := func(tx pgx.Tx) error { return storeChunks(ctx, tx, env.ID, in.Path, env.Size) }
	insert := func(tx pgx.Tx) pgx.Row {
		return tx.QueryRow(ctx, sqlInsertEnvelope, env.PartnerID, env.FileName, env.Key, env.SHA256, env.Size, env.Source)
	}
	if st != nil {
		store = func(pgx.Tx) error { return nil }
		// The envelope takes the id its chunks were copied under.
		insert = func(tx pgx.Tx) pgx.Row {
			return tx.QueryRow(ctx, sqlInsertStreamedEnvelope, env.PartnerID, env.FileName, env.Key, env.SHA256, env.Size, env.Source, st.id)
		}
	}
	record := func(tx pgx.Tx) error {
		// clock_timestamp, not now(): a stream's transaction began when the
		// upload did.
		if err := insert(tx).Scan(&env.ID, &env.ReceivedAt); err != nil {
			return fmt.Errorf("record envelope: %w", err)
		}
		if mtime != nil {
			if _, err := tx.Exec(ctx, sqlInsertEnvelopeClientTime,
				env.ID, *mtime); err != nil {
				return fmt.Errorf("record the file's time: %w", err)
			}
		}
		if in.Upload != 0 {
			if _, err := tx.Exec(ctx, sqlDropUpload, in.Upload); err != nil {
				return fmt.Errorf("drop the finished upload: %w", err)
			}
		}
		if in.PGP != nil {
			if err := insertEnvelopePGP(ctx, tx, env.ID, in.PGP); err != nil {
				return err
			}
		}
		var claimed bool
		err := tx.QueryRow(ctx, sqlClaimSubmissionKey,
			env.PartnerID, env.Key, env.ID, identity).Scan(&claimed)
		if err != nil && !errors.Is(err, pgx.ErrNoRows) {
			return fmt.Errorf("claim submission key: %w", err)
		}
		if claimed {
			if err := store(tx); err != nil {
				return err
			}
			if after != nil {
				return after(ctx, tx, env)
			}
			return nil
		}
		var first int64
		var firstSum, firstBytes []byte
		if err := tx.QueryRow(ctx, sqlFirstOfSubmissionKey,
			env.PartnerID, env.Key).Scan(&first, &firstSum, &firstBytes); err != nil {
			return fmt.Errorf("read submission key: %w", err)
		}
		if bytes.Equal(firstSum, identity) {
			env.Status, env.RepeatOf = StatusRepeat, first
			if in.RepeatNotRecorded && bytes.Equal(firstBytes, sum) {
				env.ID, env.ReceivedAt = 0, time.Time{}
				return errRepeatNotRecorded
			}
			_, err := tx.Exec(ctx, sqlMarkRepeat, env.ID, first)
			if err != nil {
				return fmt.Errorf("record a repeat: %w", err)
			}
			if st != nil {
				// A repeat keeps no bytes of its own (those of the first
				// envelope are the same).
				if _, err := tx.Exec(ctx, sqlDropRepeatChunks, env.ID); err != nil {
					return fmt.Errorf("record a repeat: drop its streamed bytes: %w", err)
				}
			}
			return nil
		}
		env.Status = StatusKeyReuse
		if err := store(tx); err != nil {
			return err
		}
		msg := fmt.Sprintf("a different file named %q was already received (envelope %d); nothing from this file was applied: send a new payroll run under a new file name, or resend the original file unchanged", env.FileName, first)
		if err := s.RejectFile(ctx, tx, &env, normalize.ParseError{Err: normalize.CodeIdempotencyKeyReuse, Message: msg}, StatusKeyReuse); err != nil {
			return err
		}
		if in.Seal != nil {
			return s.SealResult(ctx, tx, &env, in.Seal)
		}
		return nil
	}
	var err error
	if st != nil {
		err = st.commit(ctx, record)
	} else {
		err = s.inTxWithin(ctx, "record envelope", record)
	}
	if errors.Is(err, errRepeatNotRecorded) {
		return env, nil
	}
	if err != nil {
		return Envelope{}, err
	}
	return env, nil
}

// MarkIncomplete records an upload that was cut off before a clean close, for
// audit. It takes no submission key and is never processed.
func (s *Store) MarkIncomplete(ctx context.Context, partner, fileName, source string, received int64) error {
	_, err := s.execWithin(ctx, fmt.Sprintf("record incomplete upload %q", fileName), sqlMarkIncomplete,
		partner, fileName, SubmissionKey(fileName), make([]byte, 32), received, source)
	return err
}

// Envelope reads one envelope, or ErrNotFound.
func (s *Store) Envelope(ctx context.Context, id int64) (Envelope, error) {
	return scanEnvelope(s.pool.QueryRow(ctx, sqlEnvelope, id))
}

const envelopeColumns = `id, partner_id, file_name, submission_key, sha256, size, source, received_at, status,
	coalesce(replay_of, 0), seq, coalesce(counts, '{}'::jsonb), coalesce(result_size, 0), coalesce(profile_version, 0),
	coalesce(result_format, '')`

func scanEnvelope(row pgx.Row) (Envelope, error) {
	var e Envelope
	err := row.Scan(&e.ID, &e.PartnerID, &e.FileName, &e.Key, &e.SHA256, &e.Size, &e.Source, &e.ReceivedAt,
		&e.Status, &e.RepeatOf, &e.Seq, &e.Counts, &e.ResultSize, &e.ProfileVersion, &e.ResultFormat)
	if errors.Is(err, pgx.ErrNoRows) {
		return e, fmt.Errorf("envelope: %w", ErrNotFound)
	}
	if err != nil {
		return e, fmt.Errorf("read envelope: %w", err)
	}
	return e, nil
}

// Outcome follows a repeat to the envelope whose result it shares.
func (s *Store) Outcome(ctx context.Context, env Envelope) (Envelope, error) {
	if env.Status == StatusRepeat {
		return s.Envelope(ctx, env.RepeatOf)
	}
	return env, nil
}

// WaitDone polls until the envelope (or the one it repeats) has its outcome.
func (s *Store) WaitDone(ctx context.Context, id int64, poll time.Duration) (Envelope, error) {
	for {
		env, err := s.Envelope(ctx, id)
		if err != nil {
			return env, err
		}
		if env, err = s.Outcome(ctx, env); err != nil || env.Done() {
			return env, err
		}
		select {
		case <-ctx.Done():
			return env, fmt.Errorf("wait for envelope %d: %w", id, ctx.Err())
		case <-time.After(poll):
		}
	}
}

// SubmissionFilter selects a partner's envelopes for Submissions.
type SubmissionFilter struct {
	Partner string
	Status  string // envelope status; empty: any
	Name    string // file name, compared case-insensitively; empty: any
	Before  int64  // only envelopes with a smaller id (the cursor); 0: from the newest
	Limit   int
}

// Submissions lists a partner's envelopes, newest first (by id: ids are
// given in the order envelopes are recorded), at most f.Limit of them.
func (s *Store) Submissions(ctx context.Context, f SubmissionFilter) ([]Envelope, error) {
	rows, err := s.pool.Query(ctx, sqlSubmissions, f.Partner, f.Status, f.Name, f.Before, f.Limit)
	if err != nil {
		return nil, fmt.Errorf("list submissions of partner %q: %w", f.Partner, err)
	}
	defer rows.Close()
	var out []Envelope
	for rows.Next() {
		e, err := scanEnvelope(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, e)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list submissions of partner %q: %w", f.Partner, err)
	}
	return out, nil
}
