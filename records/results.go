package records

import (
	"context"
	"fmt"
	"path"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// ResultSuffix ends the name of every result file.
const ResultSuffix = ".result.csv"

// ReviewSuffix ends the name of every review report.
const ReviewSuffix = ".review.csv"

// SealedSuffix ends the name of a result or review report sealed for its
// partner (OpenPGP: encrypted to the partner, signed by the platform).
const SealedSuffix = ".pgp"

// ResultName is the name of the result file of an uploaded file: the name
// without an OpenPGP suffix (PlainName) and then without its last
// extension, plus ".result.csv" (pay.csv → pay.result.csv, pay.2024.txt →
// pay.2024.result.csv, pay → pay.result.csv, pay.csv.pgp → pay.result.csv,
// which is sealed as pay.result.csv.pgp). The SQL of resultFilesSQL
// applies the same rule.
func ResultName(fileName string) string { return stem(fileName) + ResultSuffix }

// ReviewReportName is the review report's file name for an uploaded file,
// by the same rule: NAME without its last extension, plus ".review.csv".
func ReviewReportName(fileName string) string { return stem(fileName) + ReviewSuffix }

func stem(fileName string) string {
	fileName = PlainName(fileName)
	return strings.TrimSuffix(fileName, path.Ext(fileName))
}

// pgpSuffixes end the name of an OpenPGP file (binary or armored), in
// lower case; pgpSuffixSQL is the same rule in resultFilesSQL.
var pgpSuffixes = []string{".pgp", ".gpg", ".asc"}

const pgpSuffixSQL = `'(.)\.(pgp|gpg|asc)$', '\1', 'i'`

// IsPGPName tells whether a file name says the file is OpenPGP
// (NAME.pgp, NAME.gpg or NAME.asc, in any case).
func IsPGPName(fileName string) bool { return PlainName(fileName) != fileName }

// PlainName is a file's name without its OpenPGP suffix: the name its
// plaintext is processed under (pay.csv.pgp → pay.csv).
func PlainName(fileName string) string {
	lower := strings.ToLower(fileName)
	for _, suf := range pgpSuffixes {
		if strings.HasSuffix(lower, suf) && len(fileName) > len(suf) {
			return fileName[:len(fileName)-len(suf)]
		}
	}
	return fileName
}

// ResultFile is one result a partner can download: the result of its latest
// envelope with that result name.
type ResultFile struct {
	Name       string // NAME.result.csv
	EnvelopeID int64  // the upload it answers
	OutcomeID  int64  // the envelope whose stored result it is (differs for a repeat)
	Size       int64  // bytes of the result file (sealed, when Sealed)
	// Sealed: the result is stored sealed for the partner (Name ends in
	// SealedSuffix); its bytes are read with WriteSealed.
	Sealed  bool
	ModTime time.Time // when the result became available for this upload
}

// resultFilesSQL picks, per result name (case-folded like submission keys;
// NAME.result.csv, or NAME.result.xlsx for a result served as a workbook,
// ServedResultName),
// the partner's latest envelope that was received whole (listed in the
// order of their .result.csv names, whatever the format), and shows it only
// when its outcome is stored: a result appears when the transaction that
// writes it commits, never half-written. Two servers on one database list
// the same files.
const resultFilesSQL = `
	WITH named AS (
		SELECT e.id, e.status, e.replay_of, e.processed_at,
			regexp_replace(regexp_replace(e.file_name, ` + pgpSuffixSQL + `), '\.[^.]*$', '') AS stem
		FROM envelopes e
		WHERE e.partner_id = $1 AND e.status <> 'incomplete'
	), latest AS (
		SELECT DISTINCT ON (lower(stem)) * FROM named
		WHERE $2::text IS NULL OR lower(stem) = lower(regexp_replace($2::text, '\.result\.(csv|xlsx)(\.pgp)?$', '', 'i'))
		ORDER BY lower(stem), id DESC
	)
	SELECT l.stem || CASE WHEN sr.envelope_id IS NOT NULL THEN '` + ResultSuffix + SealedSuffix + `'
		WHEN o.result_format = 'xlsx' THEN '` + WorkbookResultSuffix + `' ELSE '` + ResultSuffix + `' END, l.id, o.id,
		coalesce(sr.size, o.result_size, 0), greatest(l.processed_at, o.processed_at), sr.envelope_id IS NOT NULL
	FROM latest l
	JOIN envelopes o ON o.id = coalesce(l.replay_of, l.id)
	LEFT JOIN sealed_results sr ON sr.envelope_id = o.id AND sr.kind = 'result'
	WHERE o.status <> 'received'
	ORDER BY lower(l.stem || '` + ResultSuffix + `')`

// ResultFiles lists the result files partner can download, by name.
func (s *Store) ResultFiles(ctx context.Context, partner string) ([]ResultFile, error) {
	return s.resultFiles(ctx, partner, nil)
}

// ResultFileNamed returns the result file with this name (compared
// case-insensitively), or ErrNotFound while there is none (yet).
func (s *Store) ResultFileNamed(ctx context.Context, partner, name string) (ResultFile, error) {
	fs, err := s.resultFiles(ctx, partner, &name)
	if err != nil {
		return ResultFile{}, err
	}
	// A sealed result is only ever named sealed, a plain one plain.
	if len(fs) == 0 || !strings.EqualFold(fs[0].Name, name) {
		return ResultFile{}, fmt.Errorf("result file %q: %w", name, ErrNotFound)
	}
	return fs[0], nil
}

func (s *Store) resultFiles(ctx context.Context, partner string, name *string) ([]ResultFile, error) {
	rows, err := s.pool.Query(ctx, resultFilesSQL, partner, name)
	if err != nil {
		return nil, fmt.Errorf("list result files of partner %q: %w", partner, err)
	}
	fs, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (ResultFile, error) {
		var f ResultFile
		var mod *time.Time
		err := r.Scan(&f.Name, &f.EnvelopeID, &f.OutcomeID, &f.Size, &mod, &f.Sealed)
		if mod != nil {
			f.ModTime = *mod
		}
		return f, err
	})
	if err != nil {
		return nil, fmt.Errorf("list result files of partner %q: %w", partner, err)
	}
	return fs, nil
}
