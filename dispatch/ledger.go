package dispatch

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/jackc/pgerrcode"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/payintake/payintake/internal/fault"
)

// The statements of ledger.sql.
var (
	sqlOpenRun             = query("OpenRun")
	sqlRuns                = query("Runs")
	sqlRun                 = query("Run")
	sqlPendingLines        = query("PendingLines")
	sqlInsertConflicts     = query("InsertConflicts")
	sqlMarkConflicts       = query("MarkConflicts")
	sqlSettleDueLines      = query("SettleDueLines")
	sqlCountSettled        = query("CountSettled")
	sqlAnyArchived         = query("AnyArchived")
	sqlLedgerAndArchive    = query("LedgerAndArchive")
	sqlCopyBackArchived    = query("CopyBackArchived")
	sqlTxSettings          = query("TxSettings")
	sqlAnalyzeDue          = query("AnalyzeDue")
	sqlRecordLedgerAnswers = query("RecordLedgerAnswers")
	sqlLedgerStates        = query("LedgerStates")
	sqlRecordDueAnswers    = query("RecordDueAnswers")
	sqlRecordRunAnswers    = query("RecordRunAnswers")
	sqlFinishRun           = query("FinishRun")
	sqlRetryLedger         = query("RetryLedger")
	sqlRetryDueLines       = query("RetryDueLines")
	sqlReopenRuns          = query("ReopenRuns")
	sqlArchiveLedger       = query("ArchiveLedger")
)

// Run is the resume record of one run of a partner's period.
type Run struct {
	ID        int64
	Partner   string
	Period    string
	Number    int
	Target    string
	State     string // in_progress, complete
	Total     int
	Settled   int
	Cursor    int64
	Requests  int64
	CreatedAt time.Time
}

// BatchKey is the run's batch key.
func (r Run) BatchKey() string { return BatchKey(r.Partner, r.Period, r.Number) }

// Run states.
const (
	RunInProgress = "in_progress"
	RunComplete   = "complete"
)

// Line states (ledger and due lines); a due line can also be a conflict.
const (
	StatePending   = "pending"
	StateSucceeded = "succeeded"
	StateFailed    = "failed"
	StateConflict  = "conflict"
)

const runColumns = `id, partner_id, pay_period, run, target, state, total, settled, cursor, requests, created_at`

func scanRun(row pgx.Row) (Run, error) {
	var r Run
	err := row.Scan(&r.ID, &r.Partner, &r.Period, &r.Number, &r.Target, &r.State, &r.Total, &r.Settled, &r.Cursor, &r.Requests, &r.CreatedAt)
	return r, err
}

// OpenRun opens the run of a locked period if it has none yet (the lock's
// trigger normally did: this covers a partner whose target was set after the
// lock) and returns the period's runs still in progress, oldest first.
func (s *Store) OpenRun(ctx context.Context, partner, period string) ([]Run, error) {
	if _, err := s.pool.Exec(ctx, sqlOpenRun, partner, period); err != nil {
		return nil, fmt.Errorf("open the run of period %s of partner %s: %w", period, partner, err)
	}
	return s.Runs(ctx, partner, period, true)
}

// Runs lists runs (all partners or periods when empty), oldest first.
func (s *Store) Runs(ctx context.Context, partner, period string, inProgressOnly bool) ([]Run, error) {
	rows, err := s.pool.Query(ctx, sqlRuns, partner, period, inProgressOnly)
	if err != nil {
		return nil, fmt.Errorf("list dispatch runs: %w", err)
	}
	runs, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Run, error) { return scanRun(r) })
	if err != nil {
		return nil, fmt.Errorf("list dispatch runs: %w", err)
	}
	return runs, nil
}

func (s *Store) run(ctx context.Context, id int64) (Run, error) {
	r, err := scanRun(s.pool.QueryRow(ctx, sqlRun, id))
	if err != nil {
		return r, fmt.Errorf("read dispatch run %d: %w", id, err)
	}
	return r, nil
}

// line is one due line on its way to the vendor.
type line struct {
	dueID    int64
	round    int
	key      string
	body     []byte // the line object exactly as sent (the ledger's copy)
	attempts int
	ref      string
	comp     string
	version  int
}

// dueRow is a due line as the trigger stored it.
type dueRow struct {
	id                                 int64
	recordID                           int64
	version, round                     int
	employeeID, employeeRef, component string
	amount, currency                   string
	hours, rate, payDate               *string
}

// lineBody is the line object of the request body, in SPEC's field order.
func lineBody(key, partner, period string, d dueRow) []byte {
	b := make([]byte, 0, 256)
	b = append(b, `{"key":`...)
	b = appendJSONString(b, key)
	b = append(b, `,"employee_id":`...)
	b = appendJSONString(b, d.employeeID)
	b = append(b, `,"employee_ref":`...)
	b = appendJSONString(b, d.employeeRef)
	b = append(b, `,"pay_period":`...)
	b = appendJSONString(b, period)
	b = append(b, `,"component":`...)
	b = appendJSONString(b, d.component)
	b = append(b, `,"version":`...)
	b = strconv.AppendInt(b, int64(d.version), 10)
	b = append(b, `,"amount":`...)
	b = appendJSONString(b, d.amount)
	b = append(b, `,"currency":`...)
	b = appendJSONString(b, d.currency)
	for _, f := range []struct {
		name string
		v    *string
	}{{"hours", d.hours}, {"rate", d.rate}, {"pay_date", d.payDate}} {
		if f.v != nil {
			b = append(b, `,"`+f.name+`":`...)
			b = appendJSONString(b, *f.v)
		}
	}
	return append(b, '}')
}

// conflict is a line whose key already holds another request hash.
type conflict struct {
	key          string
	stored, want []byte
}

// takePending returns up to limit pending lines of a run in sending order
// (round, then due order), giving a ledger row (key and request hash, state
// pending) to those that have none yet, in one transaction: the request-hash
// guard holds before anything is sent. Lines whose key is already settled
// (by another run) are settled in this run too; lines whose key holds
// another request hash are marked as conflicts and returned in conflicts,
// never sent.
// Only lines after position from (round, id) are taken: the caller has
// settled, put back (into a later round) or handed to the sender every line
// before it, and the index scan does not wade through the settled lines'
// dead entries.
func (s *Store) takePending(ctx context.Context, run Run, limit int, from position) (lines []line, conflicts []conflict, settledNow int, err error) {
	err = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		lines, conflicts, settledNow = nil, nil, 0
		if err := txSettings(ctx, tx); err != nil {
			return err
		}
		rows, err := tx.Query(ctx, sqlPendingLines, run.ID, limit, from.round, from.id)
		if err != nil {
			return err
		}
		var due []dueRow
		var d dueRow
		_, err = pgx.ForEachRow(rows, []any{&d.id, &d.recordID, &d.version, &d.round, &d.employeeID, &d.employeeRef,
			&d.component, &d.amount, &d.currency, &d.hours, &d.rate, &d.payDate}, func() error {
			due = append(due, d)
			return nil
		})
		if err != nil {
			return err
		}
		if len(due) == 0 {
			return nil
		}
		// A ledger row for every line: new keys get theirs here; a key the
		// ledger (or its archive) already holds keeps its row.
		n := len(due)
		pg := newLines{due: due, keys: make([]string, n), hashes: make([][]byte, n), bodies: make([][]byte, n)}
		for i, d := range due {
			k := LineKey(run.Partner, d.employeeID, run.Period, d.component, d.version)
			body := lineBody(k, run.Partner, run.Period, d)
			sum := sha256.Sum256(body)
			pg.keys[i], pg.hashes[i], pg.bodies[i] = k, sum[:], body
		}
		keys, hashes, bodies := pg.keys, pg.hashes, pg.bodies
		// What the ledger (or its archive) already holds for these keys,
		// whoever wrote it; the others get their row below.
		ledger, err := s.copyFresh(ctx, tx, run, pg)
		if err != nil {
			return err
		}
		if ledger == nil {
			if ledger, err = s.lookUpAndCopy(ctx, tx, run, pg); err != nil {
				return err
			}
		}
		var settledIDs []int64
		var settledKeys, settledStates []string
		var conflictIDs []int64
		var conflictKeys []string
		lines = make([]line, 0, n)
		for i, d := range due {
			k := keys[i]
			l := line{dueID: d.id, round: d.round, key: k, body: bodies[i], ref: d.employeeRef, comp: d.component, version: d.version}
			h := ledger[k]
			if string(h.hash) != string(hashes[i]) {
				conflicts = append(conflicts, conflict{key: k, stored: h.hash, want: hashes[i]})
				conflictIDs, conflictKeys = append(conflictIDs, d.id), append(conflictKeys, k)
				continue
			}
			if h.state != StatePending {
				settledIDs, settledKeys, settledStates = append(settledIDs, d.id), append(settledKeys, k), append(settledStates, h.state)
				continue
			}
			l.body, l.attempts = h.body, h.attempts
			lines = append(lines, l)
		}
		if len(conflicts) > 0 {
			stored, want := make([][]byte, len(conflicts)), make([][]byte, len(conflicts))
			for i, c := range conflicts {
				stored[i], want[i] = c.stored, c.want
			}
			if _, err := tx.Exec(ctx, sqlInsertConflicts, run.ID, conflictKeys, stored, want); err != nil {
				return fmt.Errorf("record request-hash conflicts: %w", err)
			}
			if _, err := tx.Exec(ctx, sqlMarkConflicts, conflictIDs, conflictKeys); err != nil {
				return fmt.Errorf("record request-hash conflicts: %w", err)
			}
		}
		if len(settledIDs) > 0 {
			if _, err := tx.Exec(ctx, sqlSettleDueLines,
				settledIDs, settledKeys, settledStates); err != nil {
				return fmt.Errorf("settle lines already settled: %w", err)
			}
		}
		settledNow = len(settledIDs) + len(conflictIDs)
		if settledNow > 0 {
			if _, err := tx.Exec(ctx, sqlCountSettled,
				run.ID, settledNow); err != nil {
				return fmt.Errorf("count settled lines: %w", err)
			}
		}
		return nil
	})
	if err != nil {
		return nil, nil, 0, fmt.Errorf("take the pending lines of run %s: %w", run.BatchKey(), err)
	}
	return lines, conflicts, settledNow, nil
}

// newLines is a page of due lines with their keys, request hashes and
// line objects (the bodies the hashes are of).
type newLines struct {
	due            []dueRow
	keys           []string
	hashes, bodies [][]byte
}

// held is what the ledger holds for a key.
type held struct {
	hash, body []byte
	state      string
	attempts   int
}

// copyFresh is the common case, a page of keys the ledger has never seen:
// their rows are written by one COPY, without looking them up first. If any
// key is already in the ledger (a resumed run, a key settled by another
// run), the primary key refuses the COPY; if any is in the archive (looked
// up after the COPY, so that a row moved there meanwhile is seen), the
// page is not fresh either. Then the savepoint is rolled back and it
// returns nil: the caller looks the keys up (lookUpAndCopy).
func (s *Store) copyFresh(ctx context.Context, tx pgx.Tx, run Run, pg newLines) (map[string]held, error) {
	sp, err := tx.Begin(ctx)
	if err != nil {
		return nil, fmt.Errorf("write ledger rows: %w", err)
	}
	ledger := make(map[string]held, len(pg.keys))
	if err := copyLedger(ctx, sp, run, ledger, pg); err != nil {
		_ = sp.Rollback(ctx)
		var pe *pgconn.PgError
		if errors.As(err, &pe) && pe.Code == pgerrcode.UniqueViolation {
			return nil, nil
		}
		return nil, err
	}
	var archived bool
	if err := sp.QueryRow(ctx, sqlAnyArchived, pg.keys).Scan(&archived); err != nil {
		_ = sp.Rollback(ctx)
		return nil, fmt.Errorf("consult the ledger archive: %w", err)
	}
	if archived {
		if err := sp.Rollback(ctx); err != nil {
			return nil, fmt.Errorf("consult the ledger archive: %w", err)
		}
		return nil, nil
	}
	if err := sp.Commit(ctx); err != nil {
		return nil, fmt.Errorf("write ledger rows: %w", err)
	}
	return ledger, nil
}

// copyLedger writes, by one COPY, a pending ledger row for every key that
// ledger does not hold yet, and adds it to ledger. No ON CONFLICT: only the
// owner of the period writes its keys (a key names its partner and period),
// and a row written meanwhile by anyone else fails the primary key, so the
// statement (and nothing is sent), never a silent overwrite. A key twice in
// the page is written once; its second line is compared with the first like
// any held key.
func copyLedger(ctx context.Context, tx pgx.Tx, run Run, ledger map[string]held, pg newLines) error {
	copyRows := make([][]any, 0, len(pg.keys))
	for i, k := range pg.keys {
		if _, ok := ledger[k]; ok {
			continue
		}
		d := pg.due[i]
		ledger[k] = held{hash: pg.hashes[i], body: pg.bodies[i], state: StatePending}
		copyRows = append(copyRows, []any{k, pg.hashes[i], run.Partner, run.Period, d.employeeID, d.employeeRef, d.component,
			int32(d.version), d.recordID, pg.bodies[i]})
	}
	if len(copyRows) == 0 {
		return nil
	}
	if _, err := tx.CopyFrom(ctx, pgx.Identifier{"dispatch_ledger"}, []string{"key", "request_hash", "partner_id", "pay_period",
		"employee_id", "employee_ref", "component", "version", "record_id", "line"}, pgx.CopyFromRows(copyRows)); err != nil {
		return fmt.Errorf("write ledger rows: %w", err)
	}
	return nil
}

// lookUpAndCopy reads what the ledger and its archive hold for the keys
// (an archived key is copied back as it was), then writes the rows of the
// others (copyLedger).
func (s *Store) lookUpAndCopy(ctx context.Context, tx pgx.Tx, run Run, pg newLines) (map[string]held, error) {
	ledger := make(map[string]held, len(pg.keys))
	var archived []string
	rows, err := tx.Query(ctx, sqlLedgerAndArchive, pg.keys)
	if err != nil {
		return nil, fmt.Errorf("read the ledger: %w", err)
	}
	var k string
	var h held
	var inArchive bool
	if _, err := pgx.ForEachRow(rows, []any{&k, &h.hash, &h.body, &h.state, &h.attempts, &inArchive}, func() error {
		if _, dup := ledger[k]; dup {
			return nil // in both: the ledger's row is the one that counts
		}
		if inArchive {
			archived = append(archived, k)
		}
		ledger[k] = h
		return nil
	}); err != nil {
		return nil, fmt.Errorf("read the ledger: %w", err)
	}
	// An archived key stays taken: it is copied back as it was
	// (settled), so it is neither sent again nor given a new hash.
	if len(archived) > 0 {
		if _, err := tx.Exec(ctx, sqlCopyBackArchived, archived); err != nil {
			return nil, fmt.Errorf("consult the ledger archive: %w", err)
		}
	}
	if err := copyLedger(ctx, tx, run, ledger, pg); err != nil {
		return nil, err
	}
	return ledger, nil
}

// txSettings sets a dispatch transaction's local settings:
//
//   - synchronous_commit off: the transaction commits without waiting for
//     its WAL flush. Safe by design: the transaction is still atomic, and if
//     the database server itself crashed before the flush, the line is
//     simply pending again and is sent again under the same key, which the
//     vendor deduplicates. What it saves is a disk flush per transaction.
//   - plan_cache_mode force_custom_plan and no hash or merge joins, bitmap
//     scans or sorts: every statement here either walks a run's lines in
//     their index order past a cursor or looks rows up by key or id from an
//     array. Index scans in nested loops are the right plan for all of them
//     whatever the statistics say, and the statistics are always stale here
//     (a lock has just added 100,000 due lines; the run is adding as many
//     ledger rows): with them the planner joined an answer's 5,000 ids
//     against a sequential scan of the run, and sorted 95,000 lines to take
//     the first 5,000.
func txSettings(ctx context.Context, tx pgx.Tx) error {
	if _, err := tx.Exec(ctx, sqlTxSettings); err != nil {
		return fmt.Errorf("dispatch transaction: %w", err)
	}
	return nil
}

// analyzeAbove: a run with at least this many lines to send first brings
// the planner's statistics of the due lines up to date (see analyze).
const analyzeAbove = 2000

// analyze refreshes the statistics of the due lines. The lock that opened a
// run has just added its lines, and autovacuum has not looked yet: with the
// old statistics the planner believes the run has one pending line and
// joins an answer's 5,000 ids against it by scanning the run for each
// (seconds a statement at 100,000 lines instead of a tenth). It samples at
// most 30,000 rows (default_statistics_target), so it costs the same at any
// size, and only the columns the dispatcher's statements filter on (the
// table's row count is refreshed whatever the columns): a third of the time
// of all fifteen.
func (s *Store) analyze(ctx context.Context) error {
	if _, err := s.pool.Exec(ctx, sqlAnalyzeDue); err != nil {
		return fmt.Errorf("refresh the statistics of the due lines: %w", err)
	}
	return nil
}

// position is a place in a run's sending order.
type position struct {
	round int
	id    int64
}

// outcome is what one response (or its absence) did to one line.
type outcome struct {
	key     string
	dueID   int64
	state   string // succeeded, failed, or pending (to be sent again)
	status  int    // HTTP status; 0: no answer
	detail  string
	requeue bool // pending: back for a later chunk (207); otherwise first in line for the same chunk again
}

// record writes the outcomes of answers (one or more requests; every
// line once) in one transaction: the ledger, the run's due lines and the
// resume record (answers requests more, cursor at least cursor). It
// returns how many of the lines are settled now.
func (s *Store) record(ctx context.Context, run Run, outs []outcome, answers int, cursor int64) (settled int, err error) {
	n := len(outs)
	keys, states, details := make([]string, n), make([]string, n), make([]string, n)
	statuses := make([]int32, n)
	ids := make([]int64, n)
	for i, o := range outs {
		keys[i], states[i], statuses[i], details[i], ids[i] = o.key, o.state, int32(o.status), o.detail, o.dueID
	}
	err = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if err := txSettings(ctx, tx); err != nil {
			return err
		}
		rows, err := tx.Query(ctx, sqlRecordLedgerAnswers, keys, states, statuses, details)
		if err != nil {
			return fmt.Errorf("update the ledger: %w", err)
		}
		updated := make(map[string]bool, n)
		var k string
		if _, err := pgx.ForEachRow(rows, []any{&k}, func() error { updated[k] = true; return nil }); err != nil {
			return fmt.Errorf("update the ledger: %w", err)
		}
		fault.Point(fault.DispatchMidRecord)
		// A key settled meanwhile by another run kept its ledger state; its
		// due line takes the ledger's state.
		var others []string
		for _, k := range keys {
			if !updated[k] {
				others = append(others, k)
			}
		}
		ledgerState := map[string]string{}
		if len(others) > 0 {
			rows, err := tx.Query(ctx, sqlLedgerStates, others)
			if err != nil {
				return fmt.Errorf("read the ledger: %w", err)
			}
			var st string
			if _, err := pgx.ForEachRow(rows, []any{&k, &st}, func() error { ledgerState[k] = st; return nil }); err != nil {
				return fmt.Errorf("read the ledger: %w", err)
			}
		}
		dueIDs, dueKeys, dueStates := ids[:0:0], keys[:0:0], states[:0:0]
		var bumps []int32
		for i, o := range outs {
			st := o.state
			if !updated[o.key] {
				var ok bool
				if st, ok = ledgerState[o.key]; !ok {
					continue // no ledger row: the line stays as it is
				}
			}
			bump := int32(0)
			if st == StatePending && o.requeue {
				bump = 1
			}
			dueIDs, dueKeys, dueStates, bumps = append(dueIDs, ids[i]), append(dueKeys, o.key), append(dueStates, st), append(bumps, bump)
		}
		rows, err = tx.Query(ctx, sqlRecordDueAnswers, run.ID, dueIDs, dueKeys, dueStates, bumps)
		if err != nil {
			return fmt.Errorf("update the due lines: %w", err)
		}
		var st string
		settled = 0
		if _, err := pgx.ForEachRow(rows, []any{&st}, func() error {
			if st != StatePending {
				settled++
			}
			return nil
		}); err != nil {
			return fmt.Errorf("update the due lines: %w", err)
		}
		if _, err := tx.Exec(ctx, sqlRecordRunAnswers, run.ID, settled, cursor, answers); err != nil {
			return fmt.Errorf("update the resume record: %w", err)
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("record the answers for run %s: %w", run.BatchKey(), err)
	}
	return settled, nil
}

// finish marks a run complete when no line of it is pending any more.
func (s *Store) finish(ctx context.Context, runID int64) (bool, error) {
	tag, err := s.pool.Exec(ctx, sqlFinishRun, runID)
	if err != nil {
		return false, fmt.Errorf("complete dispatch run %d: %w", runID, err)
	}
	return tag.RowsAffected() == 1, nil
}

// Retry puts the dead-lettered lines of a period's runs back to be sent
// again under the same keys (same bytes), with their attempts counted from
// zero, and reopens those runs. Request-hash conflicts are not retried:
// they stay a bug to fix. It returns how many lines were put back.
func (s *Store) Retry(ctx context.Context, partner, period string) (int, error) {
	var n int
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, sqlRetryLedger,
			partner, period)
		if err != nil {
			return err
		}
		_ = tag
		tag, err = tx.Exec(ctx, sqlRetryDueLines,
			partner, period)
		if err != nil {
			return err
		}
		n = int(tag.RowsAffected())
		_, err = tx.Exec(ctx, sqlReopenRuns, partner, period)
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("retry the dead letters of period %s of partner %s: %w", period, partner, err)
	}
	return n, nil
}

// ArchiveAfter is how long a settled ledger row stays in the ledger.
const ArchiveAfter = 90 * 24 * time.Hour

// Archive moves ledger rows settled before now − 90 days to the archive, in
// one transaction. It returns how many moved.
func (s *Store) Archive(ctx context.Context, now time.Time) (int64, error) {
	tag, err := s.pool.Exec(ctx, sqlArchiveLedger, now.Add(-ArchiveAfter), now)
	if err != nil {
		return 0, fmt.Errorf("archive settled ledger rows: %w", err)
	}
	return tag.RowsAffected(), nil
}
