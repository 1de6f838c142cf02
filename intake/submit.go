package intake

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/payintake/payintake/records"
)

// Submission is one file a door hands to intake: whose it is, its name and
// its bytes, and which door it came through. That is what a submission
// means at every door — the SFTP drop zone, `payintake ingest`, POST
// /v1/submissions — which all submit through Intake.Submit; what only
// some doors know or want is in SubmitOpts.
type Submission struct {
	Partner string
	// Name is the file's name: it names the result, is matched against the
	// partner's file pattern and is the submission key, unless the door
	// has a key of its own (SubmitOpts.Key).
	Name string
	// Path is the complete bytes, spooled to a local file.
	Path string
	// Source is the door, recorded with the envelope and counted by it:
	// sftp, cli, http (demo, bench, test).
	Source string
}

// SubmitOpts is what a door may add to a Submission; the zero value (or
// nil) records the envelope and returns, as a file dropped with no more
// said. As river.InsertOpts is to a job's arguments: each field is one
// door's need, and says whose.
type SubmitOpts struct {
	// Key (HTTP) is the door's own submission key, the Idempotency-Key;
	// empty: Name. A submission under its own key names its result:
	// repeating it under another Name is refused (ErrNameMismatch), never
	// answered with the first name's result. A repeat of the same bytes
	// under the key is the client's retry of one request, answered from
	// the first envelope and not recorded again
	// (records.Incoming.RepeatNotRecorded); a file repeated by name is a
	// new arrival, recorded as a replay.
	Key string
	// PGP (HTTP) says the bytes are an OpenPGP message whatever the name
	// (Content-Type application/pgp-encrypted); a name ending in .pgp,
	// .gpg or .asc says so at every door.
	PGP bool
	// Wait (ingest, HTTP) processes the envelope now, in the caller, if it
	// still waits for its outcome, and waits for the outcome if another
	// transaction (a queue worker) is processing it: the door answers
	// with the outcome. Without Wait, Submit returns once the envelope is
	// recorded and the queue processes it (SFTP: the result appears in
	// /results).
	Wait bool
	// Detach (HTTP) receives and processes even when ctx ends: a client
	// that went away gets the stored outcome when it retries. ctx then
	// bounds only the wait for another transaction's outcome.
	Detach bool
	// Enqueue (SFTP, HTTP under serve: Queue.Enqueue) schedules background
	// processing in the transaction that records the envelope, so an
	// envelope is never durable without its job.
	Enqueue AfterInsert
	// Upload (SFTP) is what the drop zone learnt of the bytes as they
	// arrived; nil: Submit reads the file at Path.
	Upload *Upload
	// Log (SFTP) is the door's logger, carrying what it knows of the
	// session (connection, user, partner): the receipt's one log line
	// ("envelope received") is written with it, so the door writes no
	// line of its own for the same event. Nil: the Intake's, and the line
	// names the partner itself.
	Log *slog.Logger
}

// Upload is what the SFTP door knows of bytes it took as an upload (see
// records.Incoming), so that Submit neither reads nor stores them twice.
type Upload struct {
	// ID is the unfinished upload (sftp_uploads) the bytes finish: dropped
	// in the envelope's transaction, so the file is either received or
	// still resumable.
	ID int64
	// SHA256 and Size were computed as the bytes arrived.
	SHA256 []byte
	Size   int64
	// ModTime is a modification time the client set on the file, if any.
	ModTime time.Time
	// Stream, when set, already holds the bytes in the database.
	Stream *records.Stream
	// Started is when the upload was opened: the receipt's log line gives
	// the time since as its duration.
	Started time.Time
}

// Submitted is what Submit did with a submission.
type Submitted struct {
	// Received is the envelope as recorded: received (processed, once
	// processed here), a replay of an earlier one, or a key reuse. A
	// repeat under a door's own key (SubmitOpts.Key) is not recorded: a
	// replay with ID 0.
	Received records.Envelope
	// Outcome is the envelope that holds the outcome: for a replay, the
	// original one; otherwise Received.
	Outcome records.Envelope
}

// ErrNameMismatch: the submission repeats one (same key, same bytes) first
// sent under another name (Submitted.Outcome); nothing was done.
var ErrNameMismatch = errors.New("this submission was first sent under another name")

// Submit records a submission as an envelope and, with opts.Wait, gives it
// its outcome: the one entry point of every door. opts may be nil. The
// submission key is decided here, once, by the store (records.Receive),
// for every door:
//
//   - A new key: a received envelope (its job enqueued with it), processed
//     here when Wait.
//   - The same key with the same bytes: a replay; its Outcome is the first
//     envelope's, processed here if it still waits (its processor died).
//   - The same key with other bytes: a key reuse, rejected as a whole with
//     idempotency_key_reuse; nothing is applied.
func (in *Intake) Submit(ctx context.Context, s Submission, opts *SubmitOpts) (Submitted, error) {
	var o SubmitOpts
	if opts != nil {
		o = *opts
	}
	var up Upload
	if o.Upload != nil {
		up = *o.Upload
	}
	var res Submitted
	start := time.Now()
	wait := ctx
	if o.Detach {
		ctx = context.WithoutCancel(ctx)
	}
	pg, err := in.receivePGP(ctx, s, o.PGP)
	if err != nil {
		if up.Stream != nil {
			up.Stream.Abort()
		}
		return res, fmt.Errorf("receive %s: %w", s.Name, err)
	}
	key := o.Key
	if key == "" && pg.rec != nil {
		// An OpenPGP file's submission is its plaintext's: NAME.pgp is NAME.
		key = records.PlainName(s.Name)
	}
	got, err := in.Store.Receive(ctx, records.Incoming{
		PartnerID: s.Partner, FileName: s.Name, Key: key, Source: s.Source, Path: s.Path,
		SHA256: up.SHA256, Size: up.Size, ModTime: up.ModTime, Stream: up.Stream, Upload: up.ID,
		Identity: pg.identity, PGP: pg.rec, Seal: pg.seal, RepeatNotRecorded: o.Key != "",
	}, o.Enqueue)
	if err != nil {
		return res, fmt.Errorf("receive %s: %w", s.Name, err)
	}
	in.logReceipt(ctx, s, o.Log, up.Started, got, pg.rec, start)
	in.Metrics.Received(got)
	in.Metrics.pgpFile(pg.rec)
	res.Received, res.Outcome = got, got
	if got.Status == records.StatusKeyReuse {
		return res, nil
	}
	// A replay shares the first envelope's result. If that one is still
	// waiting (its processor died, or is busy now), processing it here is
	// safe: Process locks the envelope and does nothing if it is done.
	out, err := in.Store.Outcome(ctx, got)
	if err != nil {
		return res, err
	}
	res.Outcome = out
	if o.Key != "" && got.Status == records.StatusRepeat && out.FileName != s.Name {
		return res, ErrNameMismatch
	}
	if !o.Wait || out.Status != records.StatusReceived {
		return res, nil
	}
	id := out.ID
	out, err = in.Process(ctx, id)
	if errors.Is(err, records.ErrBusy) {
		// Another transaction (a queue worker) got there first: wait for
		// its outcome, as long as the caller waits.
		out, err = in.Store.WaitDone(wait, id, 50*time.Millisecond)
	}
	if err != nil {
		return res, err
	}
	res.Outcome = out
	if out.ID == got.ID {
		res.Received = out
	}
	return res, nil
}

// logReceipt writes the one log line of a submission's receipt (log: the
// door's logger, or nil; started: when the door began taking the bytes, or
// zero).
func (in *Intake) logReceipt(ctx context.Context, s Submission, log *slog.Logger, started time.Time, got records.Envelope, pg *records.EnvelopePGP, start time.Time) {
	attrs := make([]slog.Attr, 0, 10)
	if got.ID != 0 { // 0: a repeat answered, not recorded
		attrs = append(attrs, slog.Int64("envelope", got.ID))
	}
	if log == nil {
		log = in.Log
		attrs = append(attrs, slog.String("partner", s.Partner))
	}
	attrs = append(attrs, slog.String("file", got.FileName), slog.String("status", got.Status),
		slog.Int64("bytes", got.Size), slog.String("source", s.Source), slog.String("sha256", fmt.Sprintf("%x", got.SHA256)))
	if got.RepeatOf != 0 {
		attrs = append(attrs, slog.Int64("replay_of", got.RepeatOf))
	}
	if pg != nil {
		attrs = append(attrs, pgpAttr(pg))
	}
	if !started.IsZero() {
		attrs = append(attrs, slog.Duration("duration", time.Since(started).Round(time.Millisecond)))
	}
	attrs = append(attrs, slog.Duration("receive_duration", time.Since(start).Round(time.Millisecond)))
	log.LogAttrs(ctx, slog.LevelInfo, "envelope received", attrs...)
}
