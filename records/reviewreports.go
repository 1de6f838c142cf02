package records

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/payintake/payintake/normalize"
)

// Statements of reviewreports.sql.
var (
	sqlReviewReports         = query("ReviewReports")
	sqlReviewReport          = query("ReviewReport")
	sqlClosedReviewEnvelopes = query("ClosedReviewEnvelopes")
	sqlReviewReportRows      = query("ReviewReportRows")
	sqlStoreReviewReport     = query("StoreReviewReport")
)

// WriteReviewReports writes the review report of each of the envelopes
// envs (of the exceptions a statement just closed: repeated, or nil for a
// webhook's) that has no open
// exception left and no report yet: the result header, then a line per
// exception in the file's order, approved or rejected (by a reviewer, or
// superseded by a later file), with the reviewer's note. The report is
// written once, when the last open exception closes, right after the
// statement that closed it.
func WriteReviewReports(ctx context.Context, tx pgx.Tx, envs []*int64) error {
	if len(envs) == 0 {
		return nil
	}
	rows, err := tx.Query(ctx, sqlClosedReviewEnvelopes, envs)
	if err != nil {
		return fmt.Errorf("find closed reviews: %w", err)
	}
	closed, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil {
		return fmt.Errorf("find closed reviews: %w", err)
	}
	for _, env := range closed {
		data, err := reviewReport(ctx, tx, env)
		if err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, sqlStoreReviewReport, env, data); err != nil {
			return fmt.Errorf("store the review report of envelope %d: %w", env, err)
		}
	}
	return nil
}

// The messages of a review report's lines, by the exception's status.
const (
	reviewApproved   = "a reviewer approved this change and it was applied; the record stays locked"
	reviewRejected   = "a reviewer rejected this change, so the record keeps its locked values"
	reviewSuperseded = "this change was not applied: a later file proposed a different change for the same record, which is reviewed instead"
	// A row held for its component code: approved with the component
	// the code means (which later files read it as), or rejected.
	reviewCodeApproved = "a reviewer decided that component code %s means %s and this row was applied; your later files' rows with code %s are read as %s"
	reviewCodeRejected = "a reviewer rejected this row, held because component code %s has no mapping: it was not applied"
)

// reviewReport composes envelope env's review report.
func reviewReport(ctx context.Context, tx pgx.Tx, env int64) ([]byte, error) {
	rows, err := tx.Query(ctx, sqlReviewReportRows, env)
	if err != nil {
		return nil, fmt.Errorf("read the exceptions of envelope %d: %w", env, err)
	}
	defer rows.Close()
	b := []byte(ResultHeader)
	for rows.Next() {
		var line, row int
		var status, ref, period, component, amount, currency, note, xcode, partnerCode string
		if err := rows.Scan(&line, &row, &status, &ref, &period, &component, &amount, &currency, &note, &xcode, &partnerCode); err != nil {
			return nil, fmt.Errorf("read the exceptions of envelope %d: %w", env, err)
		}
		outcome, code, message := string(OutcomeRejected), string(normalize.CodeSuperseded), reviewSuperseded
		switch status {
		case ExceptionApproved:
			outcome, code, message = ExceptionApproved, "", reviewApproved
		case ExceptionRejected:
			code, message = string(normalize.CodeRejectedByReviewer), reviewRejected
		}
		switch {
		case xcode != string(normalize.CodeUnknownComponent):
		case status == ExceptionApproved:
			message = fmt.Sprintf(reviewCodeApproved, partnerCode, component, partnerCode, component)
		case status == ExceptionRejected:
			message = fmt.Sprintf(reviewCodeRejected, partnerCode)
		}
		if partnerCode != "" && partnerCode != component {
			// A held code a reviewer gave a component: echoed as the
			// result file echoes a mapped code (normalize's "BONUS (XMAS)").
			component = component + " (" + partnerCode + ")"
		}
		if note != "" && status != ExceptionSuperseded {
			message += "; reviewer's note: " + note
		}
		b = normalize.AppendResultLine(b, line, row, outcome, [8]string{normalize.SafeCell(ref), normalize.SafeCell(period),
			normalize.SafeCell(component), amount, currency, code, "", normalize.SafeCell(message)})
		b = append(b, '\n')
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read the exceptions of envelope %d: %w", env, err)
	}
	return b, nil
}

// ReviewReportInfo describes a stored review report.
type ReviewReportInfo struct {
	EnvelopeID int64  `json:"envelope_id"`
	PartnerID  string `json:"partner"`
	FileName   string `json:"file_name"` // the uploaded file's name
	Name       string `json:"name"`      // NAME.review.csv (NAME.review.csv.pgp when Sealed)
	Size       int64  `json:"size"`
	// Sealed: stored sealed for the partner (OpenPGP), read as such.
	Sealed    bool      `json:"sealed"`
	CreatedAt time.Time `json:"created_at"`
}

// ReviewReports lists the review reports of a partner's submissions, oldest first.
func (s *Store) ReviewReports(ctx context.Context, partner string) ([]ReviewReportInfo, error) {
	rows, err := s.pool.Query(ctx, sqlReviewReports, partner)
	if err != nil {
		return nil, fmt.Errorf("list review reports of partner %q: %w", partner, err)
	}
	rs, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (ReviewReportInfo, error) {
		var i ReviewReportInfo
		err := r.Scan(&i.EnvelopeID, &i.PartnerID, &i.FileName, &i.Size, &i.CreatedAt, &i.Sealed)
		i.Name = ReviewReportName(i.FileName)
		if i.Sealed {
			i.Name += SealedSuffix
		}
		return i, err
	})
	if err != nil {
		return nil, fmt.Errorf("list review reports of partner %q: %w", partner, err)
	}
	return rs, nil
}

// ReviewReport writes the stored review report of an envelope (following a
// repeat to its original) to w — sealed, when it was sealed for the
// partner — or returns ErrNotFound while the envelope still has open
// exceptions (or never had any).
func (s *Store) ReviewReport(ctx context.Context, envelopeID int64, w io.Writer) error {
	env, err := s.Envelope(ctx, envelopeID)
	if err != nil {
		return err
	}
	if env, err = s.Outcome(ctx, env); err != nil {
		return err
	}
	if _, ok, err := s.Sealed(ctx, env.ID, SealedReview); err != nil {
		return err
	} else if ok {
		return s.WriteSealed(ctx, env.ID, SealedReview, w)
	}
	var data []byte
	err = s.pool.QueryRow(ctx, sqlReviewReport, env.ID).Scan(&data)
	if errors.Is(err, pgx.ErrNoRows) {
		return fmt.Errorf("review report of envelope %d: %w", env.ID, ErrNotFound)
	}
	if err != nil {
		return fmt.Errorf("read review report of envelope %d: %w", env.ID, err)
	}
	if _, err := w.Write(data); err != nil {
		return fmt.Errorf("write review report: %w", err)
	}
	return nil
}
