package apply

import (
	"bytes"
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"hash/maphash"
	"io"
	"slices"
	"strconv"
	"strings"

	"go.opentelemetry.io/otel/attribute"

	"github.com/jackc/pgx/v5"

	"github.com/payintake/payintake/normalize"
	"github.com/payintake/payintake/records"
)

// appendEchoedCells appends the five cells a valid row's result line
// echoes (employee_ref .. currency: the value as sent where it differs from
// the normalised one), quoted as the result file quotes them.
func appendEchoedCells(b []byte, r *records.StagedRow) []byte {
	return normalize.AppendResultCells(b, or(r.DEmployeeRef, r.EmployeeRef), or(r.DPayPeriod, r.PayPeriod),
		or(r.DComponent, r.Component), or(r.DAmount, r.Amount), or(r.DCurrency, r.Currency))
}

// appendRowLine appends row r's line of a result file with the outcome,
// code, field and message classify decided: it echoes the values as sent
// (an invalid row has only those), else as appendEchoedCells does.
func appendRowLine(b []byte, r *records.StagedRow, outcome, code, field, message string) []byte {
	if r.Code != "" {
		return normalize.AppendResultLine(b, r.Line, r.Row, outcome,
			[8]string{r.DEmployeeRef, r.DPayPeriod, r.DComponent, r.DAmount, r.DCurrency, code, field, message})
	}
	return normalize.AppendResultLine(b, r.Line, r.Row, outcome,
		[8]string{or(r.DEmployeeRef, r.EmployeeRef), or(r.DPayPeriod, r.PayPeriod),
			or(r.DComponent, r.Component), or(r.DAmount, r.Amount), or(r.DCurrency, r.Currency), code, field, message})
}

// processSettingsSQL gives the processing transaction room for its temporary
// tables and hashes (stage and classified of a 1,000,000-row file are a few
// hundred MB): temp_buffers keeps them in the backend's memory rather than
// in the kernel's page cache, work_mem keeps classify's hashes in memory
// (the result file's sort of a 1,000,000-row file still spills to a temp
// file: keeping it in memory would cost far more memory than the time it
// saves). Both are PostgreSQL backend memory, not
// payintake's, and last until the transaction ends. temp_buffers can only be
// set before the session's first temporary table (PostgreSQL refuses a new
// value once the session's local buffers exist), so it is set only on a
// session without a temporary schema; on one that has used temporary tables
// before, processing goes on with the local buffers it already has. jit is
// off: compiling the classify statement costs ~0.9 s per 1,000,000-row
// file and wins back less. All three are one statement, one round trip: a
// savepoint around each setting would be twelve round trips, a share of a
// small file's latency.
var processSettingsSQL = query("ProcessSettings")

func tune(ctx context.Context, tx pgx.Tx) error {
	if _, err := tx.Exec(ctx, processSettingsSQL); err != nil {
		return fmt.Errorf("process settings: %w", err)
	}
	return nil
}

// smallStageRows: a file of at most this many rows is analysed from a
// sample of 3,000 rows (statistics target 10) instead of 30,000. The
// default sample is the whole of such a file, and the smaller one costs a
// third of the CPU with the same estimates. Larger files keep the default:
// 3,000 rows of a 1,000,000-row file underestimate its distinct employees
// about tenfold, and classify's plan depends on that estimate.
const smallStageRows = 30_000

func analyzeStageSQL(rows int) string {
	const analyze = `ANALYZE stage (employee_ref, pay_period, component, code, key_hash)`
	if rows > smallStageRows {
		return analyze
	}
	return `SET LOCAL default_statistics_target = 10; ` + analyze + `; SET LOCAL default_statistics_target = DEFAULT`
}

// A pure first file: when, under the partner lock, every valid staged row
// is certain to be created, classify's outcome of each row is already
// known (invalid rows rejected with their own code, field and message,
// valid rows created), so the rows are applied straight from stage, and
// the result file stored from the lines Go composed while staging them
// (resultLines), without writing
// every row into classified and counting it (classify and its counts cost
// ~3.5 s of a 1,000,000-row first file). Any doubt runs classify as usual.
// What makes every valid row created, in the order of classifySQL's CASE:
// no key repeats in the file, no employee has a kind (rejected, taken or
// held: emp), the file is not rejected whole, and no key has a record or
// a closed period, known
// for every key at once when the partner has no lock in any of the file's
// pay periods and either no record in them (a probe of the natural key's
// index, whose first columns are partner and pay period, per period) or
// no mapping for any of the file's employees: every record's employee has
// a mapping, and mappings are never deleted (the schema guarantees it), so an
// unmapped employee has no record. The latter is a new employee's first
// rows in a period the partner already sends, e.g. a new site's staff
// (emp holds every distinct reference of the file). The database still
// checks what it checks on every insert: the unique natural key, and that
// every record's employee is mapped and its partner and envelope exist.

// firstFile is what staging learnt of a file for the pure-first-file test.
type firstFile struct {
	periods         periodSet
	valid, rejected int
	held            int // valid rows held for their component code (records.StagedRow.HeldCode)
	repeats         repeats
	refs            int64        // the file's distinct employee references (empRefs), -1 if not counted
	lines           *resultLines // the result lines staging composed
	stats           *stageStats
}

// stageStats analyses stage once, before the first statement whose plan
// needs the staged rows' statistics: classify (the duplicate check and the
// joins), and onboarding when it groups the staged rows (employeesSQL).
// A pure first file needs none: its repeats check hashes the key filter's
// few candidates and scans stage whatever the statistics say, its records
// are a scan of stage, its employees come from emp_refs (an exact list, no
// statistics needed) and its result lines from staging; so it is spared
// the ANALYZE (0.2-0.3 s of CPU at 1,000,000 rows).
type stageStats struct {
	rows int
	done bool
}

// ensure runs the ANALYZE unless it ran: of a sample of the staged rows
// (a fixed cost), of the columns classify joins, groups or filters on only
// (about a third less CPU than every column).
func (s *stageStats) ensure(ctx context.Context, tx pgx.Tx) error {
	if s == nil || s.done {
		return nil
	}
	if _, err := tx.Exec(ctx, analyzeStageSQL(s.rows)); err != nil {
		return fmt.Errorf("analyze stage: %w", err)
	}
	s.done = true
	return nil
}

// repeats says whether a file's keys may repeat.
type repeats int

const (
	repeatsUnknown repeats = iota // a key repeats, or the key filter's candidates were not confirmed
	repeatsNone                   // no valid key repeats in the file
)

// maxFirstFilePeriods bounds the pay periods staging collects for the
// probe; a file with more goes through classify.
const maxFirstFilePeriods = 32

// periodSet collects the distinct pay periods of the valid staged rows, up
// to maxFirstFilePeriods (over is then set and the list dropped).
type periodSet struct {
	list []string
	over bool
}

func (p *periodSet) add(v string) {
	if p.over {
		return
	}
	for i := len(p.list) - 1; i >= 0; i-- { // the last one first: rows of a period come together
		if p.list[i] == v {
			return
		}
	}
	if len(p.list) == maxFirstFilePeriods {
		p.list, p.over = nil, true
		return
	}
	p.list = append(p.list, v)
}

// repeatedKeysSQL tells whether any of the key filter's candidates
// ($1) repeats a key on the real key among the rows of table: stage (whose
// rejected rows have no key_hash) or stage_keys.
func repeatedKeysSQL(table string) string {
	return `SELECT EXISTS (SELECT 1 FROM ` + table + ` WHERE key_hash IN (SELECT unnest($1::bigint[]))
	GROUP BY employee_ref, pay_period, component HAVING count(*) > 1)`
}

func repeatedKeys(ctx context.Context, tx pgx.Tx, cands []int64) (bool, error) {
	var found bool
	if err := tx.QueryRow(ctx, repeatedKeysSQL("stage"), cands).Scan(&found); err != nil {
		return false, fmt.Errorf("check duplicates: %w", err)
	}
	return found, nil
}

// periodsTakenSQL tells whether the partner has a record, and whether it
// has a period lock, in any of the pay periods @periods.
// Statements of applying staged rows (apply.sql).
var (
	analyzeEmpSQL      = query("AnalyzeEmp")
	partnerHasLocksSQL = query("PartnerHasLocks")
	materialOffSQL     = query("MaterialOff")
	materialDefaultSQL = query("MaterialDefault")
	countOutcomesSQL   = query("CountOutcomes")
)

var periodsTakenSQL = query("PeriodsTaken")

// employeeKindsSQL tells whether any unmapped employee of the file is
// other than created (rejected, taken or held).
var employeeKindsSQL = query("EmployeeKinds")

// applyStaged classifies and applies an envelope's staged rows: as a pure
// first file when it is one, else through classify. It returns the count
// of rows per outcome.
func applyStaged(ctx context.Context, tx pgx.Tx, args pgx.NamedArgs, ff firstFile, hasSeq bool) (map[string]int, error) {
	cctx, span := records.StartSpan(ctx, "classify")
	pure, empRows, err := pureFirstFile(cctx, tx, args, ff)
	var counts map[string]int
	if err == nil && !pure {
		err = ff.stats.ensure(cctx, tx)
		if err == nil && empRows < 0 {
			empRows, err = lookUpEmployees(cctx, tx, args)
		}
		if err == nil {
			// A file with a sequence number keeps its unchanged rows in
			// classified: applySQL moves their records' last_seq on.
			staged := 0
			if !hasSeq {
				staged = ff.valid + ff.rejected
			}
			counts, err = classifyStaged(cctx, tx, args, empRows, staged)
		}
	}
	span.SetAttributes(attribute.Bool("payintake.first_file", pure))
	records.EndSpan(span, err)
	if err != nil {
		return nil, err
	}
	if !pure {
		return applyClassified(ctx, tx, args, counts, hasSeq, true, ff.lines)
	}
	return applyFirstFile(ctx, tx, args, ff)
}

// applyFirstFile writes a pure first file's records and onboards its
// unknown employees from stage, and stores its result file: the lines
// staging composed.
func applyFirstFile(ctx context.Context, tx pgx.Tx, args pgx.NamedArgs, ff firstFile) (_ map[string]int, err error) {
	actx, span := records.StartSpan(ctx, "apply")
	defer func() { records.EndSpan(span, err) }()
	counts := map[string]int{}
	if ff.valid > 0 {
		counts[string(records.OutcomeCreated)] = ff.valid
		// Every unmapped reference in emp is of a valid row, which is
		// created: all are onboarded.
		for _, q := range []string{onboardSQL(""), insertRecordsSQL(`stage WHERE code IS NULL`)} {
			if _, err := tx.Exec(actx, q, args); err != nil {
				return nil, fmt.Errorf("apply rows: %w", err)
			}
		}
	}
	if ff.rejected > 0 {
		counts[string(records.OutcomeRejected)] = ff.rejected
	}
	span.End()
	actx, span = records.StartSpan(ctx, "result")
	env, _ := args["env"].(int64)
	return counts, ff.lines.store(actx, tx, env)
}

// pureFirstFile tells whether the staged file is a pure first file (see
// firstFile). empRows is how many of its references have no mapping once
// that is known (emp's row count; for a file read twice, mappingLookup's
// count, args["unmapped"]), -1 before.
func pureFirstFile(ctx context.Context, tx pgx.Tx, args pgx.NamedArgs, ff firstFile) (pure bool, empRows int64, err error) {
	if rej, _ := args["file_rejected"].(bool); rej || ff.periods.over || ff.held > 0 {
		return false, -1, nil
	}
	args["periods"] = ff.periods.list
	var recorded, locked bool
	if err := tx.QueryRow(ctx, periodsTakenSQL, args).Scan(&recorded, &locked); err != nil {
		return false, -1, fmt.Errorf("look up the file's pay periods: %w", err)
	}
	if locked || (recorded && ff.refs < 0) {
		return false, -1, nil
	}
	if ff.repeats != repeatsNone { // apply confirmed the key filter's candidates
		return false, -1, nil
	}
	if unmapped, direct := args["unmapped"].(int64); direct {
		// A first file read twice: its partner rejects or holds unknown
		// employees, and its employees were looked up while it was read
		// (mappingLookup). Pure only if every one is mapped, and then
		// only if its periods have no record (a mapped employee may have
		// a record of one of its keys).
		return !recorded && unmapped == 0, unmapped, nil
	}
	if refs, _ := args["emp_refs"].(bool); !refs {
		if err := ff.stats.ensure(ctx, tx); err != nil { // employeesSQL groups the staged rows
			return false, -1, err
		}
	}
	if empRows, err = lookUpEmployees(ctx, tx, args); err != nil {
		return false, -1, err
	}
	if recorded && empRows != ff.refs { // a mapped employee may have a record of a staged key
		return false, empRows, nil
	}
	var kinds bool
	if err := tx.QueryRow(ctx, employeeKindsSQL).Scan(&kinds); err != nil {
		return false, -1, fmt.Errorf("look up employees: %w", err)
	}
	return !kinds, empRows, nil
}

// classifyAndApply classifies the staged rows and writes their effects
// (classifySQL, then applySQL; the result file too when withResult), and
// returns the count of rows per outcome.
func classifyAndApply(ctx context.Context, tx pgx.Tx, args pgx.NamedArgs, hasSeq, withResult bool) (map[string]int, error) {
	cctx, span := records.StartSpan(ctx, "classify")
	counts, err := classify(cctx, tx, args)
	records.EndSpan(span, err)
	if err != nil {
		return nil, err
	}
	return applyClassified(ctx, tx, args, counts, hasSeq, withResult, nil)
}

// stageAndApply stages rows composed in Go rather than read from a file (a
// webhook's change, a replay's legs) and classifies and applies them by the
// very statements of a file's rows (classifyAndApply), the result file
// aside: theirs is not a file's.
func stageAndApply(ctx context.Context, tx pgx.Tx, rows []*records.StagedRow, args pgx.NamedArgs, hasSeq bool) error {
	if _, err := tx.Exec(ctx, stageDDL); err != nil {
		return fmt.Errorf("create stage: %w", err)
	}
	var buf []byte
	for _, r := range rows {
		buf = appendStageRow(buf, r, keyHash(r), nil)
	}
	if err := copyText(ctx, tx.Conn(), "stage", stageColumns, bytes.NewReader(buf)); err != nil {
		return fmt.Errorf("stage rows: %w", err)
	}
	_, err := classifyAndApply(ctx, tx, args, hasSeq, false)
	return err
}

// applyClassified runs the statements of applySQL that the classified
// rows' outcome counts need (the result file's too when withResult). lines
// are the result lines staging composed (see storeMerged), needed
// withResult.
func applyClassified(ctx context.Context, tx pgx.Tx, args pgx.NamedArgs, counts map[string]int, hasSeq, withResult bool, lines *resultLines) (_ map[string]int, err error) {
	// Every row created (a partner's first file): onboarding needs not
	// look in classified for which unmapped references have a created row.
	args["all_created"] = len(counts) == 1 && counts[string(records.OutcomeCreated)] > 0
	skipped, _ := args["skip_unchanged"].(bool)
	if skipped && hasSeq {
		// applySQL moves the unchanged records' last_seq on from classified.
		return nil, errors.New("apply rows: classify left out the unchanged rows of a file with a sequence number")
	}
	actx, span := records.StartSpan(ctx, "apply")
	defer func() { records.EndSpan(span, err) }()
	for _, st := range applySQL {
		if (st.needs != nil && !st.needs(counts, hasSeq)) || (st.result && !withResult) {
			continue // no row has the outcome this statement writes
		}
		if st.result {
			span.End()
			actx, span = records.StartSpan(ctx, "result") // the result file comes last
			env, _ := args["env"].(int64)
			if err := lines.storeMerged(actx, tx, env, mergeClassified); err != nil {
				return nil, err
			}
			continue
		}
		sql := st.sql
		switch {
		case st.closes:
			err = closeExceptions(actx, tx, args, sql)
		case st.probes:
			err = probeRecords(actx, tx, args, sql)
		default:
			_, err = tx.Exec(actx, sql, args)
		}
		if err != nil {
			return nil, fmt.Errorf("apply rows: %w", err)
		}
	}
	return counts, nil
}

// closeExceptions runs sql, a statement that closes exceptions and returns
// their envelope ids, and writes the review report of each envelope whose
// last open exception it closed.
func closeExceptions(ctx context.Context, tx pgx.Tx, args pgx.NamedArgs, sql string) error {
	rows, err := tx.Query(ctx, sql, args)
	if err != nil {
		return err
	}
	envs, err := pgx.CollectRows(rows, pgx.RowTo[*int64])
	if err != nil {
		return err
	}
	return records.WriteReviewReports(ctx, tx, envs)
}

// probeRecords runs sql, a statement that joins classified's rows with
// records by a key records has an index for (classify, the updates). With
// args["probe_records"] (a compared resubmission of few changed rows) it
// runs with hash and merge joins off, so that it probes the index once per
// row: the planner's statistics of records may predate the partner's last
// large file (a few thousand records estimated for a million), and hashing
// all of them for a few changed rows costs two to three times the probes.
// Only these statements: with the joins off for every statement, the
// lookup of the changed rows' employees would loop over a materialised
// scan of all of the partner's mappings for each row.
func probeRecords(ctx context.Context, tx pgx.Tx, args pgx.NamedArgs, sql string) error {
	probe, _ := args["probe_records"].(bool)
	if probe {
		if _, err := tx.Exec(ctx, `SET LOCAL enable_hashjoin = off; SET LOCAL enable_mergejoin = off`); err != nil {
			return fmt.Errorf("plan for few rows: %w", err)
		}
	}
	if _, err := tx.Exec(ctx, sql, args); err != nil {
		return err
	}
	if probe {
		if _, err := tx.Exec(ctx, `SET LOCAL enable_hashjoin = DEFAULT; SET LOCAL enable_mergejoin = DEFAULT`); err != nil {
			return fmt.Errorf("plan for few rows: %w", err)
		}
	}
	return nil
}

// classify writes the staged rows' outcomes into classified and counts them.
func classify(ctx context.Context, tx pgx.Tx, args pgx.NamedArgs) (map[string]int, error) {
	n, err := lookUpEmployees(ctx, tx, args)
	if err != nil {
		return nil, err
	}
	return classifyStaged(ctx, tx, args, n, 0)
}

// lookUpEmployees fills emp (employeesSQL) and returns its row count.
func lookUpEmployees(ctx context.Context, tx pgx.Tx, args pgx.NamedArgs) (int64, error) {
	if _, err := tx.Exec(ctx, empDDL); err != nil {
		return 0, fmt.Errorf("create emp: %w", err)
	}
	empSQL := employeesSQL
	if refs, _ := args["emp_refs"].(bool); refs {
		empSQL = empRefsSQL
	}
	tag, err := tx.Exec(ctx, empSQL, args)
	if err != nil {
		return 0, fmt.Errorf("look up employees: %w", err)
	}
	return tag.RowsAffected(), nil
}

// classifyStaged is classify once emp holds empRows rows. With staged > 0
// (the number of staged rows) classify leaves the unchanged rows out of
// classified (skipUnchanged) and counts them as the staged rows it did not
// write; with 0 (a webhook, a replay's legs, which read the outcome of
// every row from classified, and a file with a sequence number) it writes
// every row.
func classifyStaged(ctx context.Context, tx pgx.Tx, args pgx.NamedArgs, empRows int64, staged int) (map[string]int, error) {
	args["skip_unchanged"] = staged > 0
	if _, err := tx.Exec(ctx, classifiedDDL); err != nil {
		return nil, fmt.Errorf("create classified: %w", err)
	}
	// Statistics of a large emp, so the planner hashes it and classify
	// keeps the staged rows' order: without them it hashes the staged rows
	// instead, writes classified in emp's order, and the records then go
	// into their natural key's index in random order (1-2 s more at
	// 1,000,000 rows). A small file's plan does not suffer, and is spared
	// the ANALYZE.
	joins := classifyJoins(0)
	if empRows > 0 {
		joins |= joinEmp
	}
	if empRows > smallStageRows/10 {
		if _, err := tx.Exec(ctx, analyzeEmpSQL); err != nil {
			return nil, fmt.Errorf("analyze emp: %w", err)
		}
	}
	// An all-or-nothing file with a row rejected for its employee is
	// rejected whole.
	if aon, _ := args["all_or_nothing"].(bool); aon && args["file_rejected"] == false {
		var rejected bool
		if err := tx.QueryRow(ctx, employeeRejectsSQL).Scan(&rejected); err != nil {
			return nil, fmt.Errorf("check unknown employees: %w", err)
		}
		args["file_rejected"] = rejected
	}
	// Rows staged with their keys filtered (stageWhole) name the candidate
	// duplicates; other callers (a webhook, a replay's legs) have every row
	// checked.
	dup := dupAll
	if c, ok := args["dup_candidates"].([]int64); ok {
		dup = dupCandidates
		if len(c) == 0 {
			dup = dupNone
		}
	}
	// The partner's closed periods, if any, are joined (they change only
	// under the partner lock, which this transaction holds).
	var locks bool
	if err := tx.QueryRow(ctx, partnerHasLocksSQL, args["partner"]).Scan(&locks); err != nil {
		return nil, fmt.Errorf("look up closed periods: %w", err)
	}
	if locks {
		joins |= joinLocks
	}
	// No Materialize in classify's plan: when the statistics of employees
	// or records predate a partner's last files, the planner believes the
	// partner has a row or two and loops over a materialised scan of all
	// of them for every staged employee (millions of comparisons for a
	// 10,000-row file); without it, it hashes them or probes the index.
	if _, err := tx.Exec(ctx, materialOffSQL); err != nil {
		return nil, fmt.Errorf("classify rows: %w", err)
	}
	if err := probeRecords(ctx, tx, args, classifySQL(dup, joins)); err != nil {
		return nil, fmt.Errorf("classify rows: %w", err)
	}
	if _, err := tx.Exec(ctx, materialDefaultSQL); err != nil {
		return nil, fmt.Errorf("classify rows: %w", err)
	}
	counts := map[string]int{}
	rows, err := tx.Query(ctx, countOutcomesSQL)
	if err != nil {
		return nil, fmt.Errorf("count outcomes: %w", err)
	}
	for rows.Next() {
		var o string
		var n int
		if err := rows.Scan(&o, &n); err != nil {
			return nil, fmt.Errorf("count outcomes: %w", err)
		}
		counts[o] = n
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("count outcomes: %w", err)
	}
	if staged > 0 {
		n := staged
		for _, c := range counts {
			n -= c
		}
		if n > 0 {
			counts[string(records.OutcomeUnchanged)] = n
		}
	}
	return counts, nil
}

// copyText runs COPY table (columns) FROM STDIN in text format with r as
// the data, telling the connection's tracer as pgx's own CopyFrom does.
func copyText(ctx context.Context, conn *pgx.Conn, table, columns string, r io.Reader) error {
	return copyFrom(ctx, conn, table, columns, r, "")
}

// copyFrom runs COPY table (columns) FROM STDIN with options (after the
// statement, "" for none) and r as the data.
func copyFrom(ctx context.Context, conn *pgx.Conn, table, columns string, r io.Reader, options string) error {
	tracer, _ := conn.Config().Tracer.(pgx.CopyFromTracer)
	if tracer != nil {
		ctx = tracer.TraceCopyFromStart(ctx, conn, pgx.TraceCopyFromStartData{
			TableName: pgx.Identifier{table}, ColumnNames: strings.Split(strings.Join(strings.Fields(columns), ""), ",")})
	}
	tag, err := conn.PgConn().CopyFrom(ctx, r, strings.TrimSpace(`COPY `+table+` (`+columns+`) FROM STDIN `+options))
	if tracer != nil {
		tracer.TraceCopyFromEnd(ctx, conn, pgx.TraceCopyFromEndData{CommandTag: tag, Err: err})
	}
	return err
}

// copyBinary runs COPY table (columns) FROM STDIN in binary format with r
// as the tuples (copybinary.go), header and trailer added here.
func copyBinary(ctx context.Context, conn *pgx.Conn, table, columns string, r io.Reader) error {
	return copyFrom(ctx, conn, table, columns, io.MultiReader(bytes.NewReader(copyBinaryHeader), r, bytes.NewReader(copyBinaryTrailer)),
		`(FORMAT binary)`)
}

const stageColumns = `row_no, line, employee_ref, pay_period, component, amount, currency, hours, rate, pay_date,
	content_hash, key_hash, d_employee_ref, d_pay_period, d_component, d_amount, d_currency, code, field, message`

// stageSource turns a RowSource into COPY text format. A goroutine reads,
// normalises and encodes rows into blocks while COPY sends the previous
// ones, so parsing in Go and inserting in PostgreSQL overlap; at most
// stageBlocks blocks are in flight, so memory stays flat whatever the size.
// A block COPY has sent goes to free, where the producer of this source,
// or of the Engine's next one, takes it rather than a new one.
type stageSource struct {
	ctx      context.Context
	blocks   chan []byte
	free     chan []byte
	stop     chan struct{}
	done     chan struct{}
	blk      []byte // the block being read
	off      int
	err      error // the source's error, valid once done is closed
	count    int
	rejected int
	held     int // valid rows held for their component code, counted by stageRow
	// encode appends a row's COPY text: stageRow, or what the caller gave.
	encode  func(b []byte, r *records.StagedRow) ([]byte, error)
	keys    keyFilter    // the valid rows' natural keys seen so far, valid once done is closed
	refs    empRefs      // the valid rows' distinct employee references, valid once done is closed
	periods periodSet    // the valid rows' pay periods, valid once done is closed
	lines   *resultLines // the rows' result lines as if each valid row were created (nil: none composed)
}

const (
	stageBlockSize = 256 << 10
	stageBlocks    = 4
)

func newStageSource(ctx context.Context, rows RowSource, lines *resultLines, encode func(b []byte, r *records.StagedRow) ([]byte, error), free chan []byte) *stageSource {
	if free == nil {
		free = make(chan []byte, stageBlocks+2)
	}
	s := &stageSource{ctx: ctx, blocks: make(chan []byte, stageBlocks), free: free,
		stop: make(chan struct{}), done: make(chan struct{}), lines: lines, encode: encode}
	if s.encode == nil {
		s.encode = s.stageRow
	}
	go s.produce(rows)
	return s
}

func (s *stageSource) produce(rows RowSource) {
	defer close(s.done)
	defer close(s.blocks)
	var buf []byte
	select {
	case buf = <-s.free:
	default:
		buf = make([]byte, 0, stageBlockSize+4096)
	}
	var r records.StagedRow // one for every row: encode takes its address, so it lives on the heap
	for {
		var err error
		r, err = rows.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			s.err = err
			return
		}
		s.count++
		if r.Code != "" {
			s.rejected++
		}
		if buf, err = s.encode(buf, &r); err != nil {
			s.err = err
			return
		}
		if len(buf) >= stageBlockSize {
			select {
			case s.blocks <- buf:
			case <-s.stop:
				return
			}
			select {
			case buf = <-s.free:
				buf = buf[:0]
			default:
				buf = make([]byte, 0, stageBlockSize+4096)
			}
		}
	}
	s.lines.finish()
	if len(buf) > 0 {
		select {
		case s.blocks <- buf:
		case <-s.stop:
		}
	}
}

// stageRow appends r's line of COPY text for stage (appendStageRow) and
// notes what the pure-first-file test needs of a valid row.
func (s *stageSource) stageRow(b []byte, r *records.StagedRow) ([]byte, error) {
	var kh uint64
	if r.Code == "" {
		if r.HeldCode() {
			s.held++
		}
		kh = keyHash(r)
		s.keys.add(kh)
		s.refs.add(r.EmployeeRef)
		s.periods.add(r.PayPeriod)
	}
	return appendStageRow(b, r, kh, s.lines), nil
}

// Read gives COPY the next encoded rows; it returns the source's error when
// the file is rejected mid-stream, which makes COPY fail.
func (s *stageSource) Read(p []byte) (int, error) {
	for s.off >= len(s.blk) {
		if s.blk != nil {
			select {
			case s.free <- s.blk[:0]:
			default:
			}
			s.blk, s.off = nil, 0
		}
		select {
		case b, ok := <-s.blocks:
			if !ok {
				<-s.done
				if s.err != nil {
					return 0, s.err
				}
				return 0, io.EOF
			}
			s.blk = b
		case <-s.ctx.Done():
			return 0, s.ctx.Err()
		}
	}
	n := copy(p, s.blk[s.off:])
	s.off += n
	return n, nil
}

// close stops the producer (if COPY ended early) and waits for it.
func (s *stageSource) close() {
	close(s.stop)
	<-s.done
}

// appendStageRow encodes one row as a line of COPY text format; kh is the
// row's keyHash (unused for a rejected row), computed once by the caller.
// When res is not nil, the row's result line is written to it too, as if
// the row were created if it is valid (see resultLines).
func appendStageRow(b []byte, r *records.StagedRow, kh uint64, res *resultLines) []byte {
	b = strconv.AppendInt(b, int64(r.Row), 10)
	b = append(b, '\t')
	b = strconv.AppendInt(b, int64(r.Line), 10)
	if r.Code != "" {
		// A rejected row takes part in nothing but the result file.
		if res != nil {
			res.addRejected(r)
		}
		b = append(b, "\t\\N\t\\N\t\\N\t\\N\t\\N\t\\N\t\\N\t\\N\t\\N\t\\N"...)
		for _, v := range [...]string{r.DEmployeeRef, r.DPayPeriod, r.DComponent, r.DAmount, r.DCurrency, r.Code, r.Field, r.Message} {
			b = appendCopyText(append(b, '\t'), v)
		}
		return append(b, '\n')
	}
	for _, v := range [...]string{r.EmployeeRef, r.PayPeriod, r.Component, r.Amount, r.Currency, r.Hours, r.Rate, r.PayDate} {
		b = appendCopyText(append(b, '\t'), v)
	}
	b = append(b, "\t\\\\x"...)
	b = hex.AppendEncode(b, r.Hash)
	b = append(b, '\t')
	b = strconv.AppendInt(b, int64(kh), 10)
	if res != nil {
		// The cells as the result file quotes them, composed after the
		// row's COPY text so as to reuse its buffer, then cut off.
		mark := len(b)
		res.addCreated(r, appendEchoedCells(b, r)[mark:])
		b = b[:mark]
	}
	for _, v := range [...]string{r.DEmployeeRef, r.DPayPeriod, r.DComponent, r.DAmount, r.DCurrency} {
		b = appendCopyText(append(b, '\t'), v)
	}
	if r.HeldCode() {
		// Held for its component code: why, for classify.
		b = append(b, "\t\\N"...)
		b = appendCopyText(append(b, '\t'), r.Field)
		b = appendCopyText(append(b, '\t'), r.Message)
		return append(b, '\n')
	}
	return append(b, "\t\\N\t\\N\t\\N\n"...)
}

var keySeed = maphash.MakeSeed()

// keyFilter finds, while rows are staged, the natural keys that may repeat
// in a file, so that SQL confirms duplicates on those few candidates only
// instead of aggregating every row's key (an aggregate of 1,000,000 key
// hashes that spilled to disk). Up to keyExactMax rows it keeps every key
// hash, sorted: a hash seen twice is a candidate, so only a repeated key (or, once in ~10^8 files of a million
// rows, two keys whose 64-bit hashes collide) is one, and a file without
// a repeated key has none, which spares SQL any duplicate check: the
// pure-first-file test's scan of stage and classify's grouping of the
// candidates (0.17-0.2 s each at 1,000,000 rows, for the ~4,300 false
// candidates a Bloom filter alone gives). The hashes cost 8 bytes a row
// (8 MB at 1,000,000 rows), kept by their top byte in small chunks, so
// the lists grow without copying (one slice that doubles would raise the
// peak memory by ~15 MB at 1,000,000 rows), each chunk sorted as it fills (while the
// backend copies the rows), so that what is left once staging is done is
// a merge of each bucket's few chunks. Past keyExactMax rows, so memory
// stays bounded, it becomes a Bloom filter of
// the hashes (two bits per key in keyFilterBits bits, 2 MiB whatever the
// file's size): a key whose bits are all set already may have been seen,
// so its hash becomes a candidate; a repeated key is always one (no false
// negatives), other keys by chance, which SQL then finds distinct on the
// real key.
type keyFilter struct {
	exact [keyBuckets][][]uint64 // every hash added, by its top byte, in chunks of keyChunk, until keyExactMax
	n     int
	bits  []uint64 // the Bloom filter, past keyExactMax
	cands map[uint64]struct{}
}

const (
	keyExactMax   = 1 << 21
	keyBuckets    = 256     // by a hash's top byte: a repeated hash is in one bucket
	keyChunk      = 1 << 10 // hashes a chunk: the lists grow without copying
	keyFirstChunk = 1 << 6  // hashes in a bucket's first chunk: a small file's 256 buckets take 128 KiB, not 2 MiB
	keyFilterBits = 1 << 24
)

func (f *keyFilter) add(h uint64) {
	if f.bits == nil {
		if f.n < keyExactMax {
			b := &f.exact[h>>56]
			if len(*b) == 0 {
				*b = append(*b, make([]uint64, 0, keyFirstChunk))
			} else if last := (*b)[len(*b)-1]; len(last) == cap(last) {
				*b = append(*b, make([]uint64, 0, keyChunk))
			}
			last := &(*b)[len(*b)-1]
			*last = append(*last, h)
			if len(*last) == cap(*last) {
				slices.Sort(*last) // while staging goes on: the merge is left
			}
			f.n++
			return
		}
		f.bits = make([]uint64, keyFilterBits/64)
		f.cands = map[uint64]struct{}{}
		for _, b := range f.exact {
			for _, c := range b {
				for _, e := range c {
					f.bloom(e)
				}
			}
		}
		f.exact = [keyBuckets][][]uint64{}
	}
	f.bloom(h)
}

func (f *keyFilter) bloom(h uint64) {
	const mask = keyFilterBits - 1
	a, b := h&mask, (h>>32)&mask
	wa, ba, wb, bb := a/64, uint64(1)<<(a%64), b/64, uint64(1)<<(b%64)
	if f.bits[wa]&ba != 0 && f.bits[wb]&bb != 0 {
		f.cands[h] = struct{}{}
	}
	f.bits[wa] |= ba
	f.bits[wb] |= bb
}

// candidates returns the key hashes that may repeat, as stage.key_hash
// holds them; empty (not nil) when no key can repeat. Call it once
// staging is done.
func (f *keyFilter) candidates() []int64 {
	c := make([]int64, 0, len(f.cands))
	if f.bits == nil {
		// Bucket by bucket, its sorted chunks merged: a hash seen twice
		// comes out twice in a row.
		var heads []int
		for _, b := range f.exact {
			if len(b) > 0 {
				if last := b[len(b)-1]; len(last) < cap(last) {
					slices.Sort(last)
				}
			}
			heads = slices.Grow(heads[:0], len(b))[:len(b)]
			clear(heads)
			var prev uint64
			for i := 0; ; i++ {
				m := -1
				for j, ch := range b {
					if heads[j] < len(ch) && (m < 0 || ch[heads[j]] < b[m][heads[m]]) {
						m = j
					}
				}
				if m < 0 {
					break
				}
				h := b[m][heads[m]]
				heads[m]++
				if i > 0 && h == prev && (len(c) == 0 || c[len(c)-1] != int64(h)) {
					c = append(c, int64(h))
				}
				prev = h
			}
		}
		return c
	}
	for h := range f.cands {
		c = append(c, int64(h))
	}
	return c
}

// empRefs collects, while rows are staged, the distinct employee_refs of
// the valid rows in the order first seen, so that onboarding (empRefsSQL)
// reads one row per employee instead of grouping every staged row. Rows of
// one employee usually come together, so most rows are matched against the
// previous reference alone. Memory is bounded: past empRefsMax references
// the list is dropped (list nil) and onboarding groups the staged rows as
// before; the 182,062 references of the bench's 1,000,000-row file raised
// its peak RSS by 3-9 MB (64 to 67-73 MB).
type empRefs struct {
	list []string
	seen map[string]struct{}
	last string
	over bool
}

const empRefsMax = 1 << 18

func (e *empRefs) add(ref string) {
	if e.over || (ref == e.last && e.list != nil) {
		return
	}
	if _, ok := e.seen[ref]; ok {
		return
	}
	if len(e.list) == empRefsMax {
		e.over, e.list, e.seen, e.last = true, nil, nil, ""
		return
	}
	if e.seen == nil {
		e.seen = map[string]struct{}{}
		e.list = make([]string, 0, 1024)
	}
	ref = strings.Clone(ref) // a row's strings may share its line's memory
	e.seen[ref] = struct{}{}
	e.list = append(e.list, ref)
	e.last = ref
}

// copyEmpRefs creates emp_refs (empRefsDDL) and copies refs, a file's
// distinct employee references, into it.
func copyEmpRefs(ctx context.Context, tx pgx.Tx, refs []string) error {
	if _, err := tx.Exec(ctx, empRefsDDL); err != nil {
		return fmt.Errorf("create emp_refs: %w", err)
	}
	if err := copyText(ctx, tx.Conn(), "emp_refs", "employee_ref", &refsReader{refs: refs}); err != nil {
		return fmt.Errorf("copy employee references: %w", err)
	}
	return nil
}

// refsReader gives COPY the references as text format, one a line, encoded
// as it reads.
type refsReader struct {
	refs []string
	buf  bytes.Buffer
}

func (r *refsReader) Read(p []byte) (int, error) {
	for r.buf.Len() < len(p) && len(r.refs) > 0 {
		b := appendCopyText(r.buf.AvailableBuffer(), r.refs[0])
		r.buf.Write(append(b, '\n'))
		r.refs = r.refs[1:]
	}
	if r.buf.Len() == 0 {
		return 0, io.EOF
	}
	return r.buf.Read(p)
}

// keyHash hashes a row's natural key for duplicate detection within one file.
func keyHash(r *records.StagedRow) uint64 {
	var h maphash.Hash
	h.SetSeed(keySeed)
	h.WriteString(r.EmployeeRef)
	h.WriteByte(0)
	h.WriteString(r.PayPeriod)
	h.WriteByte(0)
	h.WriteString(r.Component)
	return h.Sum64()
}

func or(v, def string) string {
	if v != "" {
		return v
	}
	return def
}

// appendCopyText appends v as a COPY text field: "" is NULL (\N), so empty
// cells stay unquoted in the result file; backslash, tab, LF and CR are
// escaped.
func appendCopyText(b []byte, v string) []byte {
	if v == "" {
		return append(b, '\\', 'N')
	}
	for i := 0; i < len(v); i++ {
		switch c := v[i]; c {
		case '\\':
			b = append(b, '\\', '\\')
		case '\t':
			b = append(b, '\\', 't')
		case '\n':
			b = append(b, '\\', 'n')
		case '\r':
			b = append(b, '\\', 'r')
		default:
			b = append(b, c)
		}
	}
	return b
}

// Stage converts a normalised row into the store's staged form.
func Stage(row normalize.Row) records.StagedRow {
	st := records.StagedRow{Row: row.Index, Line: row.Line}
	d := row.Display
	if row.Err != nil {
		st.Code, st.Field, st.Message = string(row.Err.Code), row.Err.Field, row.Err.Message
		st.DEmployeeRef, st.DPayPeriod, st.DComponent, st.DAmount, st.DCurrency =
			d.EmployeeRef, d.PayPeriod, d.Component, d.Amount, d.Currency
		return st
	}
	if row.Held != nil { // valid, held for a reviewer (records.StagedRow.HeldCode)
		st.Field, st.Message = row.Held.Field, row.Held.Message
	}
	h, v := row.Record.HashValues() // the numbers are formatted once, for the hash and the stage
	st.EmployeeRef, st.PayPeriod, st.Component, st.Amount = v[0], v[1], v[2], v[3]
	st.Currency, st.Hours, st.Rate, st.PayDate = v[4], v[5], v[6], v[7]
	st.Hash = h[:]
	// Echo a value only where it differs from the normalised one (a
	// formula-looking employee_ref is escaped in the result file).
	st.DEmployeeRef = differs(d.EmployeeRef, st.EmployeeRef)
	st.DPayPeriod = differs(d.PayPeriod, st.PayPeriod)
	st.DComponent = differs(d.Component, st.Component)
	st.DAmount = differs(d.Amount, st.Amount)
	st.DCurrency = differs(d.Currency, st.Currency)
	return st
}

func differs(display, normalised string) string {
	if display == normalised {
		return ""
	}
	return display
}
