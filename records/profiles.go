package records

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/payintake/payintake/normalize"
)

// Statements of profiles.sql.
var (
	sqlLockPartnerRow        = query("LockPartnerRow")
	sqlAddPartnerProfile     = query("AddPartnerProfile")
	sqlPartnerProfile        = query("PartnerProfile")
	sqlPartnerProfiles       = query("PartnerProfiles")
	sqlRecordProfileVersion  = query("RecordProfileVersion")
	sqlPreviewRows           = query("PreviewRows")
	sqlNoteExcelResult       = query("NoteExcelResult")
	sqlSealedWorkbookResults = query("SealedWorkbookResults")
)

// PartnerProfile is one version of a partner's profile (package profile
// reads its YAML): how the partner's own export maps onto payintake's
// fields and components. The store keeps every version; files are read
// with the latest.
type PartnerProfile struct {
	Version int       `json:"version"`
	SetBy   string    `json:"set_by"`
	SetAt   time.Time `json:"set_at"`
	// Columns: a payintake field → the partner's headers for it.
	Columns map[string][]string `json:"columns,omitempty"`
	// Components: the partner's code → payintake's component.
	Components map[string]string `json:"components,omitempty"`
	// UnknownComponent: what a code Components lacks gets.
	UnknownComponent string `json:"unknown_component,omitempty"`
	// Sheet is the workbook sheet to read ("" the first).
	Sheet string `json:"sheet,omitempty"`
	// Results is the result file's format ("" or "csv": the result's own bytes).
	Results string `json:"results,omitempty"`
	// Decided: codes Components lacks that reviewers gave a component
	// (approving a row held as unknown_component); not part of the
	// profile as set, read with it (Components first). Set when the
	// partner is read.
	Decided map[string]string `json:"decided,omitempty"`
}

// profileJSON is a partner_profiles row (alias pp) as PartnerProfile's JSON.
const profileJSON = `pp.mapping || jsonb_build_object('version', pp.version, 'set_by', pp.set_by, 'set_at', pp.set_at)`

// mapping is what of pr the mapping column keeps: the rest has columns of its own.
func (pr PartnerProfile) mapping() PartnerProfile {
	pr.Version, pr.SetBy, pr.SetAt, pr.Decided = 0, "", time.Time{}, nil
	return pr
}

// SetPartnerProfile stores a new version of partner id's profile (yaml as
// the operator wrote it, pr what it says) and the partner settings u it
// gives, in one transaction, with an audit entry naming who set it and
// through what. It returns the version stored (with its time), or
// ErrNotFound for an unknown partner. Files being processed keep the
// version they started with; the next file reads the new one.
func (s *Store) SetPartnerProfile(ctx context.Context, id, yaml string, pr PartnerProfile, u PartnerUpdate, actor, via string) (PartnerProfile, error) {
	pr = pr.mapping()
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		// The partner's row, locked: two operators setting a profile at
		// once get versions one after the other.
		var locked string
		if err := tx.QueryRow(ctx, sqlLockPartnerRow, id).Scan(&locked); errors.Is(err, pgx.ErrNoRows) {
			return fmt.Errorf("partner %q: %w", id, ErrNotFound)
		} else if err != nil {
			return fmt.Errorf("read partner %q: %w", id, err)
		}
		if err := tx.QueryRow(ctx, sqlAddPartnerProfile, id, yaml, pr, actor).Scan(&pr.Version, &pr.SetAt); err != nil {
			return fmt.Errorf("store the profile of partner %q: %w", id, err)
		}
		pr.SetBy = actor
		if err := updatePartner(ctx, tx, id, u); err != nil {
			return err
		}
		return audit(ctx, tx, AuditEntry{Actor: actor, Via: via, Action: "profile_set", PartnerID: id,
			Detail: fmt.Sprintf("profile version %d", pr.Version)})
	})
	if err != nil {
		return PartnerProfile{}, err
	}
	return pr, nil
}

// PartnerProfile returns version of partner id's profile (0: the latest)
// and its YAML as set, or ErrNotFound when there is none.
func (s *Store) PartnerProfile(ctx context.Context, id string, version int) (PartnerProfile, string, error) {
	var pr PartnerProfile
	var yaml string
	err := s.pool.QueryRow(ctx, sqlPartnerProfile, id, version).Scan(&pr, &yaml)
	if errors.Is(err, pgx.ErrNoRows) {
		if version == 0 {
			return pr, "", fmt.Errorf("partner %q has no profile: %w", id, ErrNotFound)
		}
		return pr, "", fmt.Errorf("partner %q has no profile version %d: %w", id, version, ErrNotFound)
	}
	if err != nil {
		return pr, "", fmt.Errorf("read the profile of partner %q: %w", id, err)
	}
	return pr, yaml, nil
}

// PartnerProfiles lists every version of partner id's profile, oldest first.
func (s *Store) PartnerProfiles(ctx context.Context, id string) ([]PartnerProfile, error) {
	rows, err := s.pool.Query(ctx, sqlPartnerProfiles, id)
	if err != nil {
		return nil, fmt.Errorf("list the profiles of partner %q: %w", id, err)
	}
	prs, err := pgx.CollectRows(rows, pgx.RowTo[PartnerProfile])
	if err != nil {
		return nil, fmt.Errorf("list the profiles of partner %q: %w", id, err)
	}
	return prs, nil
}

// recordProfileVersion notes on the envelope the profile version its file
// is read with, in the transaction that processes it.
func recordProfileVersion(ctx context.Context, tx pgx.Tx, env *Envelope, p Partner) error {
	if p.Profile == nil {
		return nil
	}
	if _, err := tx.Exec(ctx, sqlRecordProfileVersion, env.ID, p.Profile.Version); err != nil {
		return fmt.Errorf("note the profile version of envelope %d: %w", env.ID, err)
	}
	env.ProfileVersion = p.Profile.Version
	return nil
}

// NoteResultFormat notes, in the transaction that stored env's result,
// the format the profile asks its result to be served in, and the size
// served. An xlsx result's workbook is built here, once, by book, and its
// bytes stored (storeResultWorkbook): what every later read serves.
func (s *Store) NoteResultFormat(ctx context.Context, tx pgx.Tx, env *Envelope, p Partner, book WorkbookBuilder) error {
	if p.Profile == nil {
		return nil
	}
	var err error
	switch p.Profile.Results {
	case normalize.ResultsCSVExcel:
		err = tx.QueryRow(ctx, sqlNoteExcelResult, env.ID).Scan(&env.ResultSize)
	case normalize.ResultsXLSX:
		var n int64
		if n, err = s.storeResultWorkbook(ctx, tx, env.ID, book); err == nil {
			_, err = tx.Exec(ctx, sqlNoteWorkbookResult, env.ID, n)
			env.ResultSize = n
		}
	default:
		return nil
	}
	if err != nil {
		return fmt.Errorf("note the result format of envelope %d: %w", env.ID, err)
	}
	env.ResultFormat = p.Profile.Results
	return nil
}

// ErrSealedWorkbook: a partner's profile asks for results as xlsx while
// its OpenPGP policy may seal them. A sealed result is the encrypted CSV
// file (pgp.Keys.Seal, in the transaction that stores it): there is no
// workbook of it, and one made from its plaintext would go in the clear.
var ErrSealedWorkbook = errors.New("results: xlsx cannot go with OpenPGP")

// checkWorkbookResults refuses, in the transaction that changes partner
// id's profile or settings, a profile asking for xlsx results together
// with an OpenPGP policy other than off (ErrSealedWorkbook).
func checkWorkbookResults(ctx context.Context, tx pgx.Tx, id string) error {
	var policy string
	err := tx.QueryRow(ctx, sqlSealedWorkbookResults, id).Scan(&policy)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("read the result format and OpenPGP policy of partner %q: %w", id, err)
	}
	return fmt.Errorf("partner %q: %w (its pgp policy is %s, so its results may go encrypted and signed, and a sealed result is the CSV file): "+
		"use results: csv or csv-excel, or set the partner's pgp policy to off", id, ErrSealedWorkbook, policy)
}

// ResultWriter is w as a result of env is written to it: through
// normalize's Excel form for a csv-excel result. A workbook is not a
// stream of lines: it is stored whole (writeResultWorkbook).
func ResultWriter(env Envelope, w io.Writer) io.Writer {
	if env.ResultFormat == normalize.ResultsCSVExcel {
		return normalize.NewExcelResultWriter(w)
	}
	return w
}

// writeServedResult writes env's stored result to w as the partner is
// served it: the workbook stored when it was processed for an xlsx
// result, else the stored lines through ResultWriter.
func writeServedResult(ctx context.Context, q querier, env Envelope, w io.Writer) error {
	if env.ResultFormat == normalize.ResultsXLSX {
		return writeResultWorkbook(ctx, q, env, w)
	}
	return writeChunks(ctx, q, ResultWriter(env, w), fmt.Sprintf("result of envelope %d", env.ID), sqlResultChunks, env.ID)
}

// ServedResultName is the name a file's result is served under:
// ResultName (NAME.result.csv), or NAME.result.xlsx when it is served as
// a workbook (format, the outcome envelope's ResultFormat). resultFilesSQL
// applies the same rule.
func ServedResultName(fileName, format string) string {
	if format == normalize.ResultsXLSX {
		return stem(fileName) + WorkbookResultSuffix
	}
	return ResultName(fileName)
}

// PreviewKey is a valid row of a file being previewed: its key and hash,
// and whether it is held for its component code (StagedRow.HeldCode).
type PreviewKey struct {
	EmployeeRef, PayPeriod, Component string
	Hash                              []byte
	HeldCode                          bool
}

// Preview is the outcome a row would get, and its code.
type Preview struct {
	Outcome Outcome
	Code    normalize.Code
}

// Preview tells what the valid rows keys of a file would get against
// partner's records today — created, unchanged, updated, held (a locked
// record, a closed period, an unknown employee or component code held) or rejected (a key
// twice in the file, an unknown employee rejected) — in a read-only
// transaction: nothing is written. A file's sequence is not considered
// (processing the file decides), nor are the other rows of an
// all-or-nothing file (the caller, which knows them all, does).
func (s *Store) Preview(ctx context.Context, partner string, keys []PreviewKey) ([]Preview, error) {
	emp, period, comp := make([]string, len(keys)), make([]string, len(keys)), make([]string, len(keys))
	seen := map[[3]string]int{}
	for i, k := range keys {
		emp[i], period[i], comp[i] = k.EmployeeRef, k.PayPeriod, k.Component
		seen[[3]string{k.EmployeeRef, k.PayPeriod, k.Component}]++
	}
	out := make([]Preview, 0, len(keys))
	err := pgx.BeginTxFunc(ctx, s.pool, pgx.TxOptions{AccessMode: pgx.ReadOnly}, func(tx pgx.Tx) error {
		rows, err := tx.Query(ctx, sqlPreviewRows, partner, emp, period, comp)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			k := keys[len(out)]
			var hash []byte
			var locked, periodLocked, mapped bool
			var policy string
			if err := rows.Scan(&hash, &locked, &periodLocked, &mapped, &policy); err != nil {
				return err
			}
			out = append(out, previewOutcome(k, seen[[3]string{k.EmployeeRef, k.PayPeriod, k.Component}] > 1,
				hash, locked, periodLocked, mapped, policy))
		}
		return rows.Err()
	})
	if err != nil {
		return nil, fmt.Errorf("preview a file of partner %q: %w", partner, err)
	}
	if len(out) != len(keys) {
		return nil, fmt.Errorf("preview a file of partner %q: %w", partner, ErrNotFound)
	}
	return out, nil
}

// previewOutcome is classify's order (classify.go) for one row; approving
// a row held for its component code asks it too (the row as it would have
// been applied with the component the reviewer names).
func previewOutcome(k PreviewKey, dup bool, hash []byte, locked, periodLocked, mapped bool, policy string) Preview {
	switch {
	case dup:
		return Preview{OutcomeRejected, normalize.CodeDuplicateKeyInFile}
	case !mapped && policy == UnknownReject:
		return Preview{OutcomeRejected, normalize.CodeUnknownEmployee}
	case k.HeldCode:
		return Preview{OutcomeHeld, normalize.CodeUnknownComponent}
	case !mapped && policy == UnknownHold:
		return Preview{OutcomeHeld, normalize.CodeUnknownEmployee}
	case hash == nil && periodLocked:
		return Preview{OutcomeHeld, normalize.CodePeriodLocked}
	case hash == nil:
		return Preview{OutcomeCreated, ""}
	case bytes.Equal(hash, k.Hash):
		return Preview{OutcomeUnchanged, ""}
	case locked:
		return Preview{OutcomeHeld, normalize.CodeRecordLocked}
	case periodLocked:
		return Preview{OutcomeHeld, normalize.CodePeriodLocked}
	}
	return Preview{OutcomeUpdated, ""}
}
