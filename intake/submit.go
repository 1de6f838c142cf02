package intake

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/payintake/payintake/records"
)

// Submission is one file a door hands to intake: its bytes (spooled at
// Path), whose they are and under which key. Every door — the SFTP drop
// zone, `payintake ingest`, POST /v1/submissions — submits through
// Intake.Submit.
type Submission struct {
	Partner string
	// Name is the file's name: it names the result and is matched against
	// the partner's file pattern.
	Name string
	// Key is the submission key when the door has one of its own (the HTTP
	// Idempotency-Key); empty means Name. A submission under its own key
	// names its result: repeating it under another Name is refused
	// (ErrNameMismatch), never answered with the first name's result.
	Key    string
	Source string // the door: sftp, cli, http (demo, bench, test)
	// PGP: the door knows the bytes are an OpenPGP message (HTTP
	// Content-Type application/pgp-encrypted) whatever the name; a name
	// ending in .pgp, .gpg or .asc says so too.
	PGP  bool
	Path string // the complete bytes
	// SHA256, Size, ModTime and Stream are what the door already knows of
	// the bytes (see records.Incoming); zero: Submit reads the file.
	SHA256  []byte
	Size    int64
	ModTime time.Time
	Stream  *records.Stream
	// Upload is the unfinished upload the bytes finish (records.Incoming).
	Upload int64
	// Enqueue, when set (Queue.Enqueue), schedules background processing
	// in the transaction that records the envelope.
	Enqueue records.AfterInsert
	// Wait processes the envelope now, in the caller, if it still waits for
	// its outcome, and waits for the outcome if another transaction (a
	// queue worker) is processing it. Without Wait, Submit returns once the
	// envelope is recorded (the queue processes it).
	Wait bool
	// Detach receives and processes even when ctx ends (an HTTP client that
	// went away gets the stored outcome when it retries); ctx then bounds
	// only the wait for another transaction's outcome.
	Detach bool
	// Log, when set, is the door's logger, carrying what it knows of the
	// request (the SFTP connection, key, door and partner): the receipt's
	// one log line ("envelope received") is written with it, so a door
	// writes no line of its own for the same event. Nil: the Intake's, and
	// the line names the partner itself.
	Log *slog.Logger
	// Started is when the door began taking the bytes (an upload's open);
	// when set, the receipt's line gives the time since as duration.
	Started time.Time
}

// Submitted is what Submit did with a submission.
type Submitted struct {
	// Received is the envelope as recorded: received (processed, once
	// processed here), a replay of an earlier one, or a key reuse.
	Received records.Envelope
	// Outcome is the envelope that holds the outcome: for a replay, the
	// original one; otherwise Received.
	Outcome records.Envelope
}

// ErrNameMismatch: the submission repeats one (same key, same bytes) first
// sent under another name (Submitted.Outcome); nothing was done.
var ErrNameMismatch = errors.New("this submission was first sent under another name")

// Submit records a submission as an envelope and, with Wait, gives it its
// outcome: the one entry point of every door.
//
//   - A new key: a received envelope (its job enqueued with it), processed
//     here when Wait.
//   - The same key with the same bytes: a replay; its Outcome is the first
//     envelope's, processed here if it still waits (its processor died).
//   - The same key with other bytes: a key reuse, rejected as a whole with
//     idempotency_key_reuse; nothing is applied.
func (in *Intake) Submit(ctx context.Context, s Submission) (Submitted, error) {
	var res Submitted
	start := time.Now()
	wait := ctx
	if s.Detach {
		ctx = context.WithoutCancel(ctx)
	}
	pg, err := in.receivePGP(ctx, s)
	if err != nil {
		if s.Stream != nil {
			s.Stream.Abort()
		}
		return res, fmt.Errorf("receive %s: %w", s.Name, err)
	}
	key := s.Key
	if key == "" && pg.rec != nil {
		// An OpenPGP file's submission is its plaintext's: NAME.pgp is NAME.
		key = records.PlainName(s.Name)
	}
	got, err := in.Store.Receive(ctx, records.Incoming{
		PartnerID: s.Partner, FileName: s.Name, Key: key, Source: s.Source, Path: s.Path,
		SHA256: s.SHA256, Size: s.Size, ModTime: s.ModTime, Stream: s.Stream, Upload: s.Upload,
		Identity: pg.identity, PGP: pg.rec, Seal: pg.seal,
	}, s.Enqueue)
	if err != nil {
		return res, fmt.Errorf("receive %s: %w", s.Name, err)
	}
	in.logReceipt(ctx, s, got, pg.rec, start)
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
	if s.Key != "" && got.Status == records.StatusRepeat && out.FileName != s.Name {
		return res, ErrNameMismatch
	}
	if !s.Wait || out.Status != records.StatusReceived {
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

// logReceipt writes the one log line of a submission's receipt.
func (in *Intake) logReceipt(ctx context.Context, s Submission, got records.Envelope, pg *records.EnvelopePGP, start time.Time) {
	log := s.Log
	attrs := make([]slog.Attr, 0, 10)
	attrs = append(attrs, slog.Int64("envelope", got.ID))
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
	if !s.Started.IsZero() {
		attrs = append(attrs, slog.Duration("duration", time.Since(s.Started).Round(time.Millisecond)))
	}
	attrs = append(attrs, slog.Duration("receive_duration", time.Since(start).Round(time.Millisecond)))
	log.LogAttrs(ctx, slog.LevelInfo, "envelope received", attrs...)
}
