package records

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/jackc/pgx/v5"
)

// Statements of reviewreports.sql.
var (
	sqlReviewReports = query("ReviewReports")
	sqlReviewReport  = query("ReviewReport")
)

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
