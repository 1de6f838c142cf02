package intake

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"

	"github.com/payintake/payintake/normalize"
	"github.com/payintake/payintake/records"
)

// What a door shows a partner of its submissions. The doors (intake/httpapi,
// intake/sftpd) and the CLI read envelopes, result rows, result files and
// review reports through these, never the store: the names below are the
// store's types and constants, given to the doors by intake.

// Envelope is one received file and, once processed, its outcome.
type Envelope = records.Envelope

// Envelope statuses.
const (
	StatusReceived   = records.StatusReceived
	StatusProcessed  = records.StatusProcessed
	StatusRepeat     = records.StatusRepeat
	StatusKeyReuse   = records.StatusKeyReuse
	StatusIncomplete = records.StatusIncomplete
)

// EnvelopeStatuses are the envelope statuses, in the order a listing
// names them.
func EnvelopeStatuses() []string {
	return []string{StatusReceived, StatusProcessed, StatusRepeat, StatusKeyReuse, StatusIncomplete}
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
// its outcome (the original's, for a repeat). Another partner's envelope
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

// Outcome follows a repeat to the envelope whose result it shares.
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
	// Name is the file's name as the partner gets it: NAME.result.csv,
	// NAME.result.xlsx for a workbook, with .pgp after it when sealed.
	Name string
	// Size is the file's size in bytes, or -1 when it is only known once
	// written (the rows leg-replayed since, with the replay column).
	Size int64
	// Sealed: the file is encrypted to the partner and signed by the
	// platform (OpenPGP), as the partner's upload asked; its name ends in
	// .pgp and it is served as application/pgp-encrypted.
	Sealed bool
	// Workbook: the file is an Excel workbook (the partner's profile
	// says results: xlsx), served as WorkbookContentType.
	Workbook bool
	write    func(context.Context, io.Writer) error
}

// WriteTo writes the file to w. An error may come after bytes were written.
func (f ResultFile) WriteTo(ctx context.Context, w io.Writer) error { return f.write(ctx, w) }

// ResultFile gives the result file of env (out its outcome, processed):
// the stored bytes, or, when rows were leg-replayed since and original is
// false, every row's latest outcome with the replay that produced it.
func (in *Intake) ResultFile(ctx context.Context, env, out Envelope, original bool) (ResultFile, error) {
	// A sealed result is only ever given sealed, as stored: the latest
	// outcomes of replayed rows are at /rows.
	si, sealed, err := in.Store.Sealed(ctx, out.ID, records.SealedResult)
	if err != nil {
		return ResultFile{}, err
	}
	if sealed {
		return ResultFile{Name: ResultName(env.FileName) + SealedSuffix, Size: si.Size, Sealed: true, write: func(ctx context.Context, w io.Writer) error {
			return in.Store.WriteSealed(ctx, out.ID, records.SealedResult, w)
		}}, nil
	}
	// A workbook is the stored result, as is: its rows have no replay
	// column, and the latest outcomes of replayed rows are at /rows.
	asBook := out.ResultFormat == normalize.ResultsXLSX
	if !original && !asBook {
		latest, err := in.Store.LatestLegs(ctx, out.ID)
		if err != nil {
			return ResultFile{}, err
		}
		if len(latest) > 0 {
			return ResultFile{Name: ResultName(env.FileName), Size: -1, write: func(ctx context.Context, w io.Writer) error {
				return in.Store.WriteLatestResult(ctx, out.ID, latest, records.ResultWriter(out, w))
			}}, nil
		}
	}
	return ResultFile{Name: records.ServedResultName(env.FileName, out.ResultFormat), Size: out.ResultSize, Workbook: asBook,
		write: func(ctx context.Context, w io.Writer) error {
			return in.Store.WriteResult(ctx, env.ID, w)
		}}, nil
}

// ResultListing is a result file as a partner's /results lists it: its
// name (NAME.result.csv or NAME.result.xlsx, .pgp when sealed), the envelope whose result it
// is and the one that holds it, its size and time.
type ResultListing = records.ResultFile

// ResultFiles lists the partner's result files, the latest envelope's per
// name.
func (in *Intake) ResultFiles(ctx context.Context, partner string) ([]ResultListing, error) {
	return in.Store.ResultFiles(ctx, partner)
}

// ResultFileNamed finds the partner's result file called name (compared
// case-insensitively), or ErrNotFound while there is none (yet).
func (in *Intake) ResultFileNamed(ctx context.Context, partner, name string) (ResultListing, error) {
	return in.Store.ResultFileNamed(ctx, partner, name)
}

// StoredResult gives a listed result's file: the bytes stored when it was
// processed, sealed when they were sealed for the partner.
func (in *Intake) StoredResult(l ResultListing) ResultFile {
	return ResultFile{Name: l.Name, Size: l.Size, Sealed: l.Sealed, Workbook: !l.Sealed && strings.HasSuffix(strings.ToLower(l.Name), records.WorkbookResultSuffix),
		write: func(ctx context.Context, w io.Writer) error {
			return in.Store.WriteResult(ctx, l.EnvelopeID, w)
		}}
}

// ReviewReportListing is a review report as /results lists it
// (NAME.review.csv, .pgp when sealed).
type ReviewReportListing = records.ReviewReportInfo

// ReviewReports lists the partner's review reports, the latest envelope's
// per name (case-folded); only the one called name when name is not empty.
func (in *Intake) ReviewReports(ctx context.Context, partner, name string) ([]ReviewReportListing, error) {
	all, err := in.Store.ReviewReports(ctx, partner)
	if err != nil {
		return nil, err
	}
	latest := map[string]int{}
	var out []ReviewReportListing
	for _, rr := range all { // oldest first
		key := strings.ToLower(rr.Name)
		if name != "" && key != strings.ToLower(name) {
			continue
		}
		if i, ok := latest[key]; ok {
			out[i] = rr
			continue
		}
		latest[key] = len(out)
		out = append(out, rr)
	}
	return out, nil
}

// ReviewReport writes the review report of the envelope id (its outcome's,
// for a replay) to w, or returns ErrNotFound while it has open exceptions
// (or never had any). sealed tells whether it was sealed for the partner
// (OpenPGP): the bytes written are then the sealed ones.
func (in *Intake) ReviewReport(ctx context.Context, id int64, w io.Writer) (sealed bool, err error) {
	if _, sealed, err = in.Store.Sealed(ctx, id, records.SealedReview); err != nil {
		return false, err
	}
	return sealed, in.Store.ReviewReport(ctx, id, w)
}
