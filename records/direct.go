package records

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/jackc/pgerrcode"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"go.opentelemetry.io/otel/attribute"
)

// A pure first file read twice, without staging. A pure first file (see
// firstFile) writes every valid row as a new record, so staging it is
// work done twice: its rows were copied into stage (2.2 s of backend CPU
// at 1,000,000 rows, with Go's normalising on the other core) and then
// inserted from stage into records (5 s). Read twice instead, the file
// needs neither stage nor the INSERT ... SELECT:
//
//  1. a first pass normalises every row and keeps what the pure-first-file
//     test needs (the count of valid and rejected rows, the key filter, the
//     distinct employee references, the pay periods) and nothing else: no
//     hashing of contents, no COPY text, the database idle but for a large
//     file's onboarding (step 2), which runs beside it;
//  2. the test runs as for a staged file: no key repeats, no record or
//     closed period in the file's pay periods (or no mapped employee), no
//     employee rejected or held; the employees are onboarded by the
//     statements that find them (onboardDirect): a large file's in
//     batches while the first pass reads on (onboarder), a small file's
//     (fewer than onboardBatch employees) in one statement at the end;
//  3. a second pass normalises the rows again and streams the valid ones
//     straight into records by COPY (the backend writing records while Go
//     normalises the next rows), composing the result lines as staging
//     does. It starts before the test's statement, so that Go encodes the
//     first blocks while the backend onboards; a file found not pure
//     stops it.
//
// Everything runs in a savepoint: at the first doubt (the file's first
// valid row is in a pay period that is closed, or has records and the
// row's employee is mapped, which is every resubmission, found after one
// row; a mapped employee in a period with records; a repeated key
// candidate; too many periods or references to collect; a row or a cell
// Go cannot compose; any error), the savepoint is rolled back and the
// file is staged and classified as usual, from a new read of it. What the
// database checks on every insert it checks here too: the unique natural
// key, every record's employee mapped, its partner and envelope present.
// The records and the result file are the same either way
// (intake.TestPureFirstFileMatchesClassify).

// errNotDirect is why a file is not applied directly; the file is staged.
type errNotDirect string

func (e errNotDirect) Error() string { return "not a direct first file: " + string(e) }

// The reasons not to apply a file directly that say it has records in its
// pay periods: the file is then compared on its keys (applyCompared)
// rather than staged whole.
const (
	errFirstRowTaken = errNotDirect("the first row's pay period is closed, or has records and its employee is mapped")
	errNotPure       = errNotDirect("not a pure first file (a closed period, a mapped employee in a period with records, or an employee rejected, taken or held)")
)

// applyDirect applies a file as a pure first file read twice, if it is
// one. A reason why not (and no error) means nothing was done: the caller
// stages the file from a new RowSource. An error is returned only when the
// transaction cannot go on (attempt). A failure other than a reason not to
// read the file twice (errNotDirect) or a file the staging will reject (a
// *normalize.ParseError) is logged: the file is staged all the same.
func (s *Store) applyDirect(ctx context.Context, tx pgx.Tx, env *Envelope, pl Plan) (counts map[string]int, why, err error) {
	return s.attempt(ctx, tx, env, "direct", "a first file could not be read twice; it is staged instead",
		func(tx pgx.Tx) (map[string]int, error) { return s.direct(ctx, tx, env, pl) })
}

// directScan is what the first pass keeps of a file.
type directScan struct {
	onboard         *onboarder // the file's new employees, onboarded while it is read (nil before its first valid row)
	count, rejected int
	keys            keyFilter
	refs            empRefs
	periods         periodSet
}

func (s *Store) direct(ctx context.Context, tx pgx.Tx, env *Envelope, pl Plan) (map[string]int, error) {
	args := pgx.NamedArgs{"partner": env.PartnerID, "seq": env.Seq, "env": env.ID}
	sctx, span := startSpan(ctx, "scan")
	sc, err := scanDirect(sctx, tx, env.PartnerID, pl)
	if sc != nil {
		span.SetAttributes(attribute.Int("payintake.rows", sc.count), attribute.Int("payintake.rows_rejected", sc.rejected))
	}
	span.End() // a file that is not a direct first file is not an error
	if err != nil {
		return nil, err
	}
	lines := newResultLines(s.spoolDir)
	if lines == nil {
		return nil, errNotDirect("no result lines")
	}
	defer lines.close()
	// The second read starts now: while the backend runs the test (the
	// onboarding statement), Go normalises and encodes the first blocks of
	// records on the other core. A file that is not pure stops it.
	second, err := startDirectApply(ctx, env, pl, lines, s.blocks)
	if err != nil {
		return nil, err
	}
	defer second.close()
	cctx, span := startSpan(ctx, "classify", attribute.Bool("payintake.first_file", true))
	counts, err := directTest(cctx, tx, sc, args)
	span.End()
	if err != nil {
		return nil, err
	}
	actx, span := startSpan(ctx, "apply")
	err = second.apply(actx, tx, sc)
	span.End()
	if err != nil {
		return nil, err
	}
	rctx, span := startSpan(ctx, "result", attribute.Bool("payintake.result_from_go", true))
	err = lines.store(rctx, tx, env.ID)
	EndSpan(span, err)
	if err != nil {
		return nil, err
	}
	return counts, nil
}

// directTest is the pure-first-file test of a scanned file: what only a
// file read twice needs (a valid row, no key candidate at all, since there
// is no stage to confirm one on; scanDirect refused the files whose keys,
// references or periods it could not collect), then pureFirstFile, the
// one test of a staged file too, whose employee step takes the counts of
// the file's new employees, onboarded while it was read (onboarder). It
// returns the file's counts.
func directTest(ctx context.Context, tx pgx.Tx, sc *directScan, args pgx.NamedArgs) (map[string]int, error) {
	if sc.onboard != nil {
		unmapped, onboarded, err := sc.onboard.finish()
		sc.onboard = nil
		if err != nil {
			return nil, err
		}
		args["onboarded"] = [2]int64{unmapped, onboarded}
	}
	valid := sc.count - sc.rejected
	switch {
	case valid == 0:
		return nil, errNotDirect("no valid row")
	case len(sc.keys.candidates()) > 0:
		return nil, errNotDirect("a key may repeat")
	}
	refs := int64(len(sc.refs.list))
	sc.refs, sc.keys = empRefs{}, keyFilter{} // memory for the second pass
	args["file_rejected"] = false
	ff := firstFile{periods: sc.periods, valid: valid, rejected: sc.rejected, repeats: repeatsNone, refs: refs}
	pure, _, err := pureFirstFile(ctx, tx, args, ff)
	if err != nil {
		return nil, err
	}
	if !pure {
		return nil, errNotPure
	}
	counts := map[string]int{string(OutcomeCreated): valid}
	if sc.rejected > 0 {
		counts[string(OutcomeRejected)] = sc.rejected
	}
	return counts, nil
}

// directSecond is the second read of a file read twice: its valid rows
// encoded for records (directRows) by a stageSource, started before the
// pure-first-file test so that the encoding runs beside the test's
// statement, and copied into records by apply.
type directSecond struct {
	rows   RowSource
	src    *stageSource
	lines  *resultLines
	closed bool
}

// startDirectApply starts the second read of the file, composing the
// result lines into lines.
func startDirectApply(ctx context.Context, env *Envelope, pl Plan, lines *resultLines, free chan []byte) (*directSecond, error) {
	rows, err := pl.Reread(ReadOptions{})
	if err != nil {
		return nil, fmt.Errorf("read the file again: %w", err)
	}
	return &directSecond{rows: rows, lines: lines, src: newStageSource(ctx, rows, lines, newDirectRows(env, lines).encode, free)}, nil
}

// apply copies the second read's rows into records (the file's employees
// onboarded by directTest) and checks that it read what the first did.
func (d *directSecond) apply(ctx context.Context, tx pgx.Tx, sc *directScan) error {
	err := copyBinary(ctx, tx.Conn(), "records", directColumns, d.src)
	d.close()
	if err != nil {
		if d.src.err != nil {
			err = d.src.err
		}
		return fmt.Errorf("copy records: %w", err)
	}
	if d.src.count != sc.count || d.src.rejected != sc.rejected {
		return fmt.Errorf("the second read gave %d rows (%d rejected), the first %d (%d)", d.src.count, d.src.rejected, sc.count, sc.rejected)
	}
	if !d.lines.ok() {
		return errNotDirect("result lines")
	}
	return nil
}

// close stops the second read, if it still runs, and closes the file; a
// second call does nothing.
func (d *directSecond) close() {
	if d.closed {
		return
	}
	d.closed = true
	d.src.close()
	closeRows(d.rows)
}

// scanDirect is the first pass. It gives up after the first valid row if
// that row's pay period is closed, or has a record and the row's employee
// is mapped (any resubmission), and at a rejected row of an all-or-nothing
// file (rejected whole). A file of new employees in a period with records
// (a new site's staff) is read on: directTest then finds whether every
// employee of the file is new.
func scanDirect(ctx context.Context, tx pgx.Tx, partner string, pl Plan) (_ *directScan, err error) {
	rows, err := pl.Reread(ReadOptions{KeysOnly: true, Parallel: true})
	if err != nil {
		return nil, fmt.Errorf("read the file: %w", err)
	}
	defer closeRows(rows)
	sc := &directScan{}
	defer func() {
		if err != nil && sc.onboard != nil {
			_, _, _ = sc.onboard.finish() // the connection is the caller's once this returns
		}
	}()
	sent := 0 // sc.refs.list[:sent] went to sc.onboard
	for {
		if sc.count%4096 == 0 && ctx.Err() != nil {
			return nil, ctx.Err()
		}
		r, err := rows.Next()
		if errors.Is(err, io.EOF) {
			if sc.onboard != nil && sent < len(sc.refs.list) {
				sc.onboard.batches <- sc.refs.list[sent:len(sc.refs.list):len(sc.refs.list)]
			}
			return sc, nil
		}
		if err != nil {
			return nil, err
		}
		sc.count++
		if r.Code != "" {
			if pl.AllOrNothing {
				return nil, errNotDirect("a rejected row in an all-or-nothing file")
			}
			sc.rejected++
			continue
		}
		if len(sc.periods.list) == 0 {
			var recorded, locked, mapped, unmappedPartner bool
			if err := tx.QueryRow(ctx, firstRowTakenSQL, partner, r.PayPeriod, r.EmployeeRef).Scan(&recorded, &locked, &mapped, &unmappedPartner); err != nil {
				return nil, fmt.Errorf("look up the first row: %w", err)
			}
			if locked || recorded && mapped {
				return nil, errFirstRowTaken
			}
			// From here on this goroutine leaves the connection to the
			// onboarder until finish.
			sc.onboard = startOnboarder(ctx, tx, partner, unmappedPartner)
		}
		sc.keys.add(keyHash(&r))
		sc.refs.add(r.EmployeeRef)
		sc.periods.add(r.PayPeriod)
		if n := len(sc.refs.list); n-sent >= onboardBatch {
			sc.onboard.batches <- sc.refs.list[sent:n:n]
			sent = n
		}
		// What directTest would refuse at the end is refused now, not
		// after reading the rest of a large file.
		switch {
		case sc.keys.bits != nil:
			return nil, errNotDirect("too many rows to find repeated keys exactly")
		case sc.refs.over:
			return nil, errNotDirect("too many employees")
		case sc.periods.over:
			return nil, errNotDirect("too many pay periods")
		}
	}
}

// onboarder onboards the new employees of a file read twice while its
// first pass reads on (scanDirect): each batch of onboardBatch references
// first seen goes through onboardDirect, on the transaction's connection,
// which the first pass does not use once its first valid row was looked
// up, and the last batch when the first pass ends (finish). A file of
// fewer than onboardBatch employees (a 10,000-row file has ~2,000) is
// onboarded in one statement at the end, as if there were no batches: in
// batches of 512, such a file's scan and onboarding took 41.8-44.0 ms
// against 29.0-42.8 (BENCHMARKS.md, session 17). A 1,000,000-row file's
// ~200,000 employees take ~1.8 s to onboard and ~0.8 s to read: onboarded
// in batches, most of the one is spent during the other (BENCHMARKS.md,
// session 18).
type onboarder struct {
	batches             chan []string
	done                chan struct{}
	unmapped, onboarded int64
	err                 error
}

// onboardBatch is how many references an onboardDirect statement takes
// while the first pass reads on.
const onboardBatch = 8192

// startOnboarder starts onboarding batches. They are slices of the first
// pass's list of references (no copies), so the channel can hold every
// batch of a file the first pass accepts (empRefs's limit) and the first
// pass never waits for the backend.
func startOnboarder(ctx context.Context, tx pgx.Tx, partner string, unmappedPartner bool) *onboarder {
	o := &onboarder{batches: make(chan []string, empRefsMax/onboardBatch+2), done: make(chan struct{})}
	q := onboardDirectSQL
	if unmappedPartner {
		q = onboardUnmappedSQL
	}
	go func() {
		defer close(o.done)
		var ids []string
		for refs := range o.batches {
			if o.err != nil || o.onboarded < o.unmapped {
				continue // the file is not a pure first file: nothing more to onboard
			}
			ids = appendDerivedEmployeeIDs(ids[:0], partner, refs)
			u, n, err := onboardDirect(ctx, tx, q, pgx.NamedArgs{"partner": partner, "refs": refs, "ids": ids})
			o.unmapped, o.onboarded, o.err = o.unmapped+u, o.onboarded+n, err
		}
	}()
	return o
}

// finish waits for the batches sent and returns how many references had
// no mapping and how many were onboarded; the connection is then free.
func (o *onboarder) finish() (unmapped, onboarded int64, err error) {
	close(o.batches)
	<-o.done
	return o.unmapped, o.onboarded, o.err
}

// onboardDirect is the employees step of a first file read twice, for a
// batch of its distinct references (args["refs"], their derived ids
// args["ids"]): one statement q (onboardDirectSQL, or onboardUnmappedSQL
// for a partner without mappings) finds the references without a mapping
// and, if the partner creates mappings, onboards them under their derived
// ids. It returns how many
// had no mapping and how many were onboarded; the file is pure only if
// they are the same number (directTest, pureFirstFile). Staged, the same
// work takes five statements: emp_refs and emp created, the references
// copied, emp filled, a test of its kinds, then onboarding from emp:
// ~27 ms of a 10,000-row file's ~120 against ~18 (BENCHMARKS.md, session
// 17), two temporary tables fewer (each a few files created and removed). A
// derived id that is taken (an 80-bit collision of two references' SHA-256
// prefixes: an import refuses ids of the derived form) is refused by the
// unique index on employee_id: the file is staged, where employeesSQL
// probes for it and the row is rejected as employee_taken.
func onboardDirect(ctx context.Context, tx pgx.Tx, q string, args pgx.NamedArgs) (unmapped, onboarded int64, err error) {
	err = tx.QueryRow(ctx, q, args).Scan(&unmapped, &onboarded)
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == pgerrcode.UniqueViolation && pgErr.ConstraintName == "employees_employee_id_key" {
		return 0, 0, errNotDirect("the id derived for an unknown employee is taken")
	}
	if err != nil {
		return 0, 0, fmt.Errorf("onboard employees: %w", err)
	}
	return unmapped, onboarded, nil
}

// onboardDirectSQL: u is the file's references (@refs, with their
// derived ids @ids, derivedEmployeeID) without a mapping, looked up in the
// partner's mappings; they are onboarded in the order onboardSQL inserts
// them, when the partner's --unknown-employee is create.
const onboardDirectSQL = `WITH u AS MATERIALIZED (
	SELECT r.employee_ref, r.employee_id FROM unnest(@refs::text[], @ids::text[]) r(employee_ref, employee_id)
	WHERE NOT EXISTS (SELECT 1 FROM employees em WHERE em.partner_id = @partner AND em.employee_ref = r.employee_ref)),
` + onboardFromU

// onboardUnmappedSQL is onboardDirectSQL for a partner that had no mapping
// when the file's first row was looked up: every reference of the file
// is new (they are distinct, empRefs), so none is looked up. A mapping
// that another transaction stores meanwhile is refused by the primary key
// (the file is then staged, where employeesSQL looks every reference up).
// The lookups were ~0.3-0.5 s of a 1,000,000-row first file's ~2 s of
// onboarding (BENCHMARKS.md, session 19).
const onboardUnmappedSQL = `WITH u AS MATERIALIZED (
	SELECT r.employee_ref, r.employee_id FROM unnest(@refs::text[], @ids::text[]) r(employee_ref, employee_id)),
` + onboardFromU

// onboardFromU onboards the references of u under their ids and counts
// both.
const onboardFromU = `onboarded AS (
	INSERT INTO employees (partner_id, employee_ref, employee_id, source)
	SELECT @partner, u.employee_ref, u.employee_id, 'derived'
	FROM u
	WHERE (SELECT unknown_employee FROM partners WHERE id = @partner) = 'create'
	ORDER BY u.employee_ref COLLATE "C"
	RETURNING 1)
SELECT (SELECT count(*) FROM u), (SELECT count(*) FROM onboarded)`

// firstRowTakenSQL tells whether partner $1 has a record, and a lock, in
// pay period $2, whether employee $3 is mapped, and whether the partner
// has no mapping at all.
const firstRowTakenSQL = `SELECT EXISTS (SELECT 1 FROM records WHERE partner_id = $1 AND pay_period = $2),
	EXISTS (SELECT 1 FROM period_locks WHERE partner_id = $1 AND pay_period = $2),
	EXISTS (SELECT 1 FROM employees WHERE partner_id = $1 AND employee_ref = $3),
	NOT EXISTS (SELECT 1 FROM employees WHERE partner_id = $1)`

// directColumns are the columns the second pass copies into records.
const directColumns = `partner_id, employee_ref, pay_period, component, amount, currency, hours, rate, pay_date,
	content_hash, last_seq, envelope_id, line`

// directRows encodes the second pass's rows: a valid row as a tuple of
// binary COPY for records (copybinary.go), and every row's result line
// (resultLines).
type directRows struct {
	lines *resultLines
	head  []byte // the field count and partner_id
	tail  []byte // last_seq and envelope_id
	cells []byte
}

// directColumnCount is the number of directColumns.
const directColumnCount = 13

func newDirectRows(env *Envelope, lines *resultLines) *directRows {
	d := &directRows{lines: lines}
	d.head = appendBinaryText(appendInt16(nil, directColumnCount), env.PartnerID)
	if env.Seq != nil {
		d.tail = appendBinaryInt8(nil, *env.Seq)
	} else {
		d.tail = appendBinaryNull(nil)
	}
	d.tail = appendBinaryInt8(d.tail, env.ID)
	return d
}

func (d *directRows) encode(b []byte, r *StagedRow) ([]byte, error) {
	if r.Code != "" {
		d.lines.addRejected(r)
		if !d.lines.ok() {
			return b, errNotDirect("a result line Go cannot compose")
		}
		return b, nil
	}
	cells, ok := r.appendEchoedCells(d.cells[:0])
	d.cells = cells
	if !ok {
		return b, errNotDirect("a result cell Go cannot quote")
	}
	d.lines.addCreated(r, cells)
	if !d.lines.ok() {
		return b, errNotDirect("a result line Go cannot write")
	}
	mark := len(b)
	b = append(b, d.head...)
	b = appendBinaryText(b, r.EmployeeRef)
	b = appendBinaryText(b, r.PayPeriod)
	b = appendBinaryText(b, r.Component)
	b, err := appendBinaryNumeric(b, r.Amount)
	if err == nil {
		b = appendBinaryText(b, r.Currency)
		b, err = appendBinaryNumeric(b, r.Hours)
	}
	if err == nil {
		b, err = appendBinaryNumeric(b, r.Rate)
	}
	if err == nil {
		b, err = appendBinaryDate(b, r.PayDate)
	}
	if err != nil {
		return b[:mark], errNotDirect(fmt.Sprintf("row %d: %v", r.Row, err))
	}
	b = appendBinaryBytes(b, r.Hash)
	b = append(b, d.tail...)
	return appendBinaryInt4(b, int32(r.Line)), nil
}
