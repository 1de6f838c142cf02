package intake

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"slices"

	"github.com/payintake/payintake/records"
)

// What a door shows a partner of its submissions. The doors (intake/httpapi)
// read envelopes, result rows, result files and review reports through
// these, never the store: the names below are the store's types and
// constants, given to the doors by intake.

// Envelope is one received file and, once processed, its outcome.
type Envelope = records.Envelope

// Envelope statuses.
const (
	StatusReceived   = records.StatusReceived
	StatusProcessed  = records.StatusProcessed
	StatusReplay     = records.StatusReplay
	StatusKeyReuse   = records.StatusKeyReuse
	StatusIncomplete = records.StatusIncomplete
)

// EnvelopeStatuses are the envelope statuses, in the order a listing
// names them.
func EnvelopeStatuses() []string {
	return []string{StatusReceived, StatusProcessed, StatusReplay, StatusKeyReuse, StatusIncomplete}
}

// Outcome is a row's outcome (created, updated, …).
type Outcome = records.Outcome

// Outcomes are the row outcomes in the order summaries, counts and metrics
// list them.
func Outcomes() []Outcome { return slices.Clone(records.Outcomes) }

// IsOutcome reports whether o is one of the row outcomes.
func IsOutcome(o string) bool { return records.IsOutcome(o) }

// CountsAttr gives an envelope's row counts as log attributes (see
// records.CountsAttr).
func CountsAttr(counts map[string]int) slog.Attr { return records.CountsAttr(counts) }

// ResultRow is one row of a result file, as its cells say.
type ResultRow = records.ResultRow

// AfterInsert runs in the transaction that records an envelope (a queue's
// Enqueue).
type AfterInsert = records.AfterInsert

// SubmissionFilter selects a partner's submissions (Submissions).
type SubmissionFilter = records.SubmissionFilter

// ErrNotFound: no such envelope (or not the partner's), result row or
// review report.
var ErrNotFound = records.ErrNotFound

// CheckFileName checks that name is a plain file name a result can be
// named after, as for an uploaded file.
func CheckFileName(name string) error { return records.CheckFileName(name, records.MaxFileNameLen) }

// ResultName is the name of a file's result (NAME.result.csv).
func ResultName(fileName string) string { return records.ResultName(fileName) }

// ReviewReportName is the name of a file's review report (NAME.review.csv).
func ReviewReportName(fileName string) string { return records.ReviewReportName(fileName) }

// SubmissionKey is the normalised form of a submission key (a file name or
// an Idempotency-Key): keys equal in it are one submission.
func SubmissionKey(key string) string { return records.SubmissionKey(key) }

// PartnerEnvelope reads partner's envelope id and the envelope that holds
// its outcome (the original's, for a replay). Another partner's envelope
// is ErrNotFound, as one that does not exist.
func (in *Intake) PartnerEnvelope(ctx context.Context, partner string, id int64) (env, out Envelope, err error) {
	env, err = in.Store.Envelope(ctx, id)
	if err == nil && env.PartnerID != partner {
		err = fmt.Errorf("envelope %d of partner %q: %w", id, partner, ErrNotFound)
	}
	if err != nil {
		return Envelope{}, Envelope{}, err
	}
	out, err = in.Store.Outcome(ctx, env)
	return env, out, err
}

// Envelope reads one envelope, or ErrNotFound.
func (in *Intake) Envelope(ctx context.Context, id int64) (Envelope, error) {
	return in.Store.Envelope(ctx, id)
}

// Outcome follows a replay to the envelope whose result it shares.
func (in *Intake) Outcome(ctx context.Context, env Envelope) (Envelope, error) {
	return in.Store.Outcome(ctx, env)
}

// Submissions lists a partner's envelopes, newest first.
func (in *Intake) Submissions(ctx context.Context, f SubmissionFilter) ([]Envelope, error) {
	return in.Store.Submissions(ctx, f)
}

// ResultRows reads the rows of out's result (out a processed envelope)
// whose row index is above after (-1 for the first page), each with its
// latest outcome after leg replays, keeping only the outcomes in want (all
// when want is empty), until limit are kept; more tells whether rows are
// left.
func (in *Intake) ResultRows(ctx context.Context, out Envelope, after, limit int, want []string) (rows []ResultRow, more bool, err error) {
	latest, err := in.Store.LatestLegs(ctx, out.ID)
	if err != nil {
		return nil, false, err
	}
	return in.Store.ResultRows(ctx, out.ID, after, limit, func(row ResultRow) (ResultRow, bool) {
		if l, ok := latest[row.Row]; ok {
			row = l.ResultRow
		}
		return row, len(want) == 0 || slices.Contains(want, string(row.Outcome))
	})
}

// ResultFile is a submission's result file, ready to be written.
type ResultFile struct {
	// Size is the file's size in bytes, or -1 when it is only known once
	// written (the rows replayed since, with the replay column).
	Size int64
	// Sealed: the file is encrypted to the partner and signed by the
	// platform (OpenPGP), as the partner's upload asked; its name ends in
	// .pgp and it is served as application/pgp-encrypted.
	Sealed bool
	write  func(context.Context, io.Writer) error
}

// WriteTo writes the file to w. An error may come after bytes were written.
func (f ResultFile) WriteTo(ctx context.Context, w io.Writer) error { return f.write(ctx, w) }

// ResultFile gives the result file of env (out its outcome, processed):
// the stored bytes, or, when rows were replayed since and original is
// false, every row's latest outcome with the replay that produced it.
func (in *Intake) ResultFile(ctx context.Context, env, out Envelope, original bool) (ResultFile, error) {
	// A sealed result is only ever given sealed, as stored: the latest
	// outcomes of replayed rows are at /rows.
	si, sealed, err := in.Store.Sealed(ctx, out.ID, records.SealedResult)
	if err != nil {
		return ResultFile{}, err
	}
	if sealed {
		return ResultFile{Size: si.Size, Sealed: true, write: func(ctx context.Context, w io.Writer) error {
			return in.Store.WriteSealed(ctx, out.ID, records.SealedResult, w)
		}}, nil
	}
	if !original {
		latest, err := in.Store.LatestLegs(ctx, out.ID)
		if err != nil {
			return ResultFile{}, err
		}
		if len(latest) > 0 {
			return ResultFile{Size: -1, write: func(ctx context.Context, w io.Writer) error {
				return in.Store.WriteLatestResult(ctx, out.ID, latest, records.ResultWriter(out, w))
			}}, nil
		}
	}
	return ResultFile{Size: out.ResultSize, write: func(ctx context.Context, w io.Writer) error {
		return in.Store.WriteResult(ctx, env.ID, w)
	}}, nil
}

// ReviewReport writes the review report of out (an outcome envelope) to w,
// or returns ErrNotFound while it has open exceptions (or never had any).
// sealed tells whether it was sealed for the partner (OpenPGP): the bytes
// written are then the sealed ones.
func (in *Intake) ReviewReport(ctx context.Context, out Envelope, w io.Writer) (sealed bool, err error) {
	if _, sealed, err = in.Store.Sealed(ctx, out.ID, records.SealedReview); err != nil {
		return false, err
	}
	return sealed, in.Store.ReviewReport(ctx, out.ID, w)
}
