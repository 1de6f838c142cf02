package apply

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/jackc/pgerrcode"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/payintake/payintake/records"
	"go.opentelemetry.io/otel/attribute"
)

// A pure first file, read without staging. A pure first file (see
// firstFile) writes every valid row as a new record, so staging it is
// work done twice: its rows were copied into stage (2.2 s of backend CPU
// at 1,000,000 rows, with Go's normalising on the other core) and then
// inserted from stage into records (5 s). Read directly instead, the file
// needs neither stage nor the INSERT ... SELECT. The file is read up to
// its first valid row, which is looked up (lookUpFirstRow: a resubmission
// is found there and compared instead, applyCompared); then it is read
// twice: a first pass of the natural keys only, normalised on every core,
// and a second that normalises the rows and streams the valid ones
// straight into records by binary COPY, composing the result lines as
// staging does. The second starts before the statements between the two,
// so that Go encodes the first blocks meanwhile.
//
//   - For a partner that creates mappings for unknown employees (the
//     default), the first pass keeps the distinct employee references
//     (scanDirect); the ones without a mapping are onboarded by one
//     statement before the copy (directOnboarding), and the natural key's
//     unique index refuses a key that repeats or has a record.
//   - For a partner that rejects or holds unknown employees, the first
//     pass keeps what the pure-first-file test needs (the count of valid
//     and rejected rows, the key filter, the distinct employee references,
//     the pay periods; no hashing of contents, no COPY text), its
//     employees looked up while it reads on (mappingLookup); the test runs
//     as for a staged file (no key repeats, no record or closed period in
//     the file's pay periods, every employee mapped) before the copy.
//
// Everything runs in a savepoint: at the first doubt (the file's first
// valid row is in a pay period that is closed, or has records and the
// row's employee is mapped, which is every resubmission, found after one
// row; a key refused; a closed period; an unknown employee of a partner
// that does not create mappings, or a taken derived id of one that does;
// a row held for its component code; too many periods or references to
// collect; a row or a cell Go cannot compose; any error), the savepoint
// is rolled back and the file is compared or staged and classified as
// usual, from a new read of it. What the database checks on every insert
// it checks here too: the unique natural key, every record's employee
// mapped, its partner and envelope present. The records, mappings and
// result file are the same either way
// (TestPureFirstFileMatchesClassify, apply/firstfile_test.go).

// errNotDirect is why a file is not applied directly; the file is staged.
type errNotDirect string

func (e errNotDirect) Error() string { return "not a direct first file: " + string(e) }

// The reasons not to apply a file directly that say it has records in its
// pay periods: the file is then compared on its keys (applyCompared)
// rather than staged whole.
const (
	errFirstRowTaken = errNotDirect("the first row's pay period is closed, or has records and its employee is mapped")
	errNotPure       = errNotDirect("not a pure first file (a closed period, a mapped employee in a period with records, or an employee rejected, taken or held)")
	errKeyTaken      = errNotDirect("a key of the file repeats or has a record")
)

// errHeldCode: a row is held for its component code (a code the profile
// does not map, under unknown_component: hold), which only classify
// holds: the file is staged whole. Such a row is rare, and holding it
// needs the exceptions a direct read does not write.
const errHeldCode = errNotDirect("a row is held for its component code")

// applyDirect applies a file as a pure first file read twice, if it is
// one. A reason why not (and no error) means nothing was done: the caller
// stages the file from a new RowSource. An error is returned only when the
// transaction cannot go on (attempt). A failure other than a reason not to
// read the file twice (errNotDirect) or a file the staging will reject (a
// *normalize.ParseError) is logged: the file is staged all the same.
func (e *Engine) applyDirect(ctx context.Context, tx pgx.Tx, env *records.Envelope, pl Plan) (counts map[string]int, why, err error) {
	return e.attempt(ctx, tx, env, "direct", "a first file could not be read without staging; it is staged instead",
		func(tx pgx.Tx) (map[string]int, error) { return e.direct(ctx, tx, env, pl) })
}

// directScan is what the first pass keeps of a file.
type directScan struct {
	lookup          *mappingLookup // the file's employees, looked up while it is read (nil before its first valid row)
	count, rejected int
	keys            keyFilter
	refs            empRefs
	periods         periodSet
}

func (e *Engine) direct(ctx context.Context, tx pgx.Tx, env *records.Envelope, pl Plan) (map[string]int, error) {
	creates, err := lookUpFirstRow(ctx, tx, env.PartnerID, pl)
	if err != nil {
		return nil, err
	}
	if creates {
		return e.directOnboarding(ctx, tx, env, pl)
	}
	args := pgx.NamedArgs{"partner": env.PartnerID, "seq": env.Seq, "env": env.ID}
	sc, err := scanDirect(ctx, tx, env.PartnerID, pl, false)
	if err != nil {
		return nil, err
	}
	// The second read starts now: while the backend runs the test (the
	// last employees' lookup), Go normalises and encodes the first blocks
	// of records on the other core. A file that is not pure stops it.
	second, err := e.startDirectApply(ctx, env, pl)
	if err != nil {
		return nil, err
	}
	defer second.release()
	cctx, span := records.StartSpan(ctx, "classify", attribute.Bool("payintake.first_file", true))
	counts, err := directTest(cctx, tx, sc, args)
	span.End()
	if err != nil {
		return nil, err
	}
	actx, span := records.StartSpan(ctx, "apply")
	err = second.apply(actx, tx, sc)
	span.End()
	if err != nil {
		return nil, err
	}
	if err := second.storeResult(ctx, tx, env.ID); err != nil {
		return nil, err
	}
	return counts, nil
}

// directOnboarding applies a first file of a partner that creates mappings
// for unknown employees, read twice. The first pass (scanDirect) keeps only
// the distinct employee references of the valid rows; the second read
// starts encoding the records while onboardRefsSQL maps the references
// without a mapping under their derived ids, a statement of its own before
// the records that name them; then the valid rows are copied into records
// as they are read, and the insert trigger finds every one of them mapped.
// Nothing else is tested before the copy: a key that repeats or already
// has a record is refused by the natural key's unique index (errKeyTaken:
// the file is then compared on its keys), a taken derived id by
// employee_id's when onboarding (the file is staged), a rejected row of an
// all-or-nothing file by the first pass, too many pay periods by the
// encoder, and a closed pay period by the statement after the copy. The
// first pass normalises only the natural keys, on every core, while the
// backend waits; the encoding of the second runs beside the onboarding
// and the copy.
func (e *Engine) directOnboarding(ctx context.Context, tx pgx.Tx, env *records.Envelope, pl Plan) (map[string]int, error) {
	sc, err := scanDirect(ctx, tx, env.PartnerID, pl, true)
	if err != nil {
		return nil, err
	}
	valid := sc.count - sc.rejected
	if valid == 0 {
		return nil, errNotDirect("no valid row")
	}
	// The list alone goes on to onboarding: the first pass's set of
	// references (a map of 182,062 at 1,000,000 rows) is garbage before
	// the second read allocates its blocks.
	refs := sc.refs.list
	sc.refs = empRefs{}
	second, err := e.startDirectApply(ctx, env, pl)
	if err != nil {
		return nil, err
	}
	defer second.release()
	actx, span := records.StartSpan(ctx, "apply")
	err = onboardRefs(actx, tx, env.PartnerID, refs)
	if err == nil {
		err = second.apply(actx, tx, sc)
	}
	span.End()
	if err != nil {
		return nil, err
	}
	var locked bool
	if err := tx.QueryRow(ctx, periodsLockedSQL, env.PartnerID, second.enc.periods.list).Scan(&locked); err != nil {
		return nil, fmt.Errorf("look up the file's pay periods: %w", err)
	}
	if locked {
		return nil, errNotPure
	}
	counts := directCounts(valid, sc.rejected)
	if err := second.storeResult(ctx, tx, env.ID); err != nil {
		return nil, err
	}
	return counts, nil
}

// onboardRefsSQL maps each reference of @refs that partner @partner has
// not mapped under its derived id, in the order every onboarding inserts
// them (onboardSQL). A plain INSERT: under the partner lock nothing maps
// them meanwhile, and a taken derived id is refused by employee_id's
// unique index.
var onboardRefsSQL = query("OnboardRefs")

// onboardRefs runs onboardRefsSQL; a taken derived id, or a mapping stored
// meanwhile, is a reason not to apply the file directly: staged, it gets
// classify's outcome for that employee.
func onboardRefs(ctx context.Context, tx pgx.Tx, partner string, refs []string) error {
	_, err := tx.Exec(ctx, onboardRefsSQL, pgx.NamedArgs{"partner": partner, "refs": refs})
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == pgerrcode.UniqueViolation {
		switch pgErr.ConstraintName {
		case "employees_employee_id_key":
			return errNotDirect("the id derived for an unknown employee is taken")
		case "employees_pkey":
			return errNotDirect("an employee of the file was mapped meanwhile")
		}
	}
	if err != nil {
		return fmt.Errorf("onboard employees: %w", err)
	}
	return nil
}

// periodsLockedSQL tells whether partner $1 has closed any of pay periods $2.
var periodsLockedSQL = query("PeriodsLocked")

// directTest is the pure-first-file test of a scanned file: what only a
// file read twice needs (a valid row, no key candidate at all, since there
// is no stage to confirm one on; scanDirect refused the files whose keys,
// references or periods it could not collect), then pureFirstFile, the
// one test of a staged file too, whose employee step takes the count of
// the file's unmapped employees, looked up while it was read
// (mappingLookup). It returns the file's counts.
func directTest(ctx context.Context, tx pgx.Tx, sc *directScan, args pgx.NamedArgs) (map[string]int, error) {
	if sc.lookup != nil {
		unmapped, err := sc.lookup.finish()
		sc.lookup = nil
		if err != nil {
			return nil, err
		}
		args["unmapped"] = unmapped
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
	return directCounts(valid, sc.rejected), nil
}

// directCounts are the outcome counts of a first file applied directly:
// every valid row created, the others rejected.
func directCounts(valid, rejected int) map[string]int {
	counts := map[string]int{string(records.OutcomeCreated): valid}
	if rejected > 0 {
		counts[string(records.OutcomeRejected)] = rejected
	}
	return counts
}

// directSecond is the second read of a file read twice: its valid rows
// encoded for records (directRows) by a stageSource, started before the
// pure-first-file test so that the encoding runs beside the test's
// statement, and copied into records by apply.
type directSecond struct {
	rows   RowSource
	src    *stageSource
	enc    *directRows
	lines  *resultLines
	closed bool
}

// startDirectApply starts the read of the file whose rows go into
// records, composing the result lines; release frees what it holds.
func (e *Engine) startDirectApply(ctx context.Context, env *records.Envelope, pl Plan) (*directSecond, error) {
	lines, err := newResultLines(e.spoolDir)
	if err != nil {
		return nil, errNotDirect(err.Error())
	}
	rows, err := pl.Reread(ReadOptions{})
	if err != nil {
		lines.close()
		return nil, fmt.Errorf("read the file again: %w", err)
	}
	enc := newDirectRows(env, lines)
	enc.allOrNothing = pl.AllOrNothing
	return &directSecond{rows: rows, lines: lines, enc: enc, src: newStageSource(ctx, rows, lines, enc.encode, e.blocks)}, nil
}

// apply copies the second read's rows into records (their employees
// mapped: looked up by directTest, or onboarded by directOnboarding) and
// checks that it read what the first pass did. A key that repeats or has a
// record is refused by the natural key's unique index: a reason not to
// apply the file directly (errKeyTaken), not a failure.
func (d *directSecond) apply(ctx context.Context, tx pgx.Tx, sc *directScan) error {
	err := copyBinary(ctx, tx.Conn(), "records", directColumns, d.src)
	d.close()
	if err != nil {
		if d.src.err != nil {
			return d.src.err
		}
		var pgErr *pgconn.PgError
		if errors.As(err, &pgErr) && pgErr.Code == pgerrcode.UniqueViolation && pgErr.ConstraintName == "records_natural_key" {
			return errKeyTaken
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

// storeResult stores the result lines the read composed as envelope env's
// result file.
func (d *directSecond) storeResult(ctx context.Context, tx pgx.Tx, env int64) error {
	ctx, span := records.StartSpan(ctx, "result")
	err := d.lines.store(ctx, tx, env)
	records.EndSpan(span, err)
	return err
}

// release stops the read, if it still runs, and frees the result lines
// (once stored, or not wanted).
func (d *directSecond) release() {
	d.close()
	d.lines.close()
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

// scanDirect is the first pass. It gives up at a rejected row of an
// all-or-nothing file (rejected whole). For a partner that creates
// mappings (creates) it keeps only the counts and the distinct employee
// references, for directOnboarding. Otherwise it keeps what directTest
// needs, the employees looked up as it reads; it gives up after the first
// valid row if that row's pay period is closed, or has a record and the
// row's employee is mapped (any resubmission). A file of new employees in
// a period with records (a new site's staff) is read on: directTest then
// finds whether every employee of the file is new.
func scanDirect(ctx context.Context, tx pgx.Tx, partner string, pl Plan, creates bool) (_ *directScan, err error) {
	ctx, span := records.StartSpan(ctx, "scan")
	sc := &directScan{}
	defer func() {
		span.SetAttributes(attribute.Int("payintake.rows", sc.count), attribute.Int("payintake.rows_rejected", sc.rejected))
		span.End() // a file that is not a direct first file is not an error
	}()
	rows, err := pl.Reread(ReadOptions{KeysOnly: true, Parallel: true})
	if err != nil {
		return nil, fmt.Errorf("read the file: %w", err)
	}
	defer closeRows(rows)
	defer func() {
		if err != nil && sc.lookup != nil {
			_, _ = sc.lookup.finish() // the connection is the caller's once this returns
		}
	}()
	sent := 0 // sc.refs.list[:sent] went to sc.lookup
	for {
		if sc.count%4096 == 0 && ctx.Err() != nil {
			return nil, ctx.Err()
		}
		r, err := rows.Next()
		if errors.Is(err, io.EOF) {
			if sc.lookup != nil && sent < len(sc.refs.list) {
				sc.lookup.batches <- sc.refs.list[sent:len(sc.refs.list):len(sc.refs.list)]
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
		if r.HeldCode() {
			return nil, errHeldCode
		}
		if creates {
			if sc.refs.add(r.EmployeeRef); sc.refs.over {
				return nil, errNotDirect("too many employees")
			}
			continue
		}
		if len(sc.periods.list) == 0 {
			// The first valid row was looked up (lookUpFirstRow). From
			// here on this goroutine leaves the connection to the
			// lookup until finish.
			sc.lookup = startMappingLookup(ctx, tx, partner)
		}
		sc.keys.add(keyHash(&r))
		sc.refs.add(r.EmployeeRef)
		sc.periods.add(r.PayPeriod)
		if n := len(sc.refs.list); n-sent >= lookupBatch {
			sc.lookup.batches <- sc.refs.list[sent:n:n]
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

// mappingLookup looks up the employees of a file read twice for a partner
// that does not create mappings (one that does onboards them instead,
// directOnboarding) while its first pass reads on (scanDirect): each batch of
// lookupBatch references first seen goes through unmappedRefsSQL, on the
// transaction's connection, which the first pass does not use once its
// first valid row was looked up, and the last batch when the first pass
// ends (finish). A file of fewer than lookupBatch employees (a 10,000-row
// file has ~2,000) is looked up in one statement at the end: several
// statements cost more than one, and the backend would take the cores the
// first pass normalises on.
type mappingLookup struct {
	batches  chan []string
	done     chan struct{}
	unmapped int64
	err      error
}

// lookupBatch is how many references an unmappedRefsSQL statement takes
// while the first pass reads on.
const lookupBatch = 8192

// startMappingLookup starts looking batches up. They are slices of the
// first pass's list of references (no copies), so the channel can hold
// every batch of a file the first pass accepts (empRefs's limit) and the
// first pass never waits for the backend.
func startMappingLookup(ctx context.Context, tx pgx.Tx, partner string) *mappingLookup {
	o := &mappingLookup{batches: make(chan []string, empRefsMax/lookupBatch+2), done: make(chan struct{})}
	go func() {
		defer close(o.done)
		for refs := range o.batches {
			if o.err != nil || o.unmapped > 0 {
				continue // the file is not a pure first file: nothing more to look up
			}
			var n int64
			if o.err = tx.QueryRow(ctx, unmappedRefsSQL, pgx.NamedArgs{"partner": partner, "refs": refs}).Scan(&n); o.err != nil {
				o.err = fmt.Errorf("look up employees: %w", o.err)
			}
			o.unmapped += n
		}
	}()
	return o
}

// finish waits for the batches sent and returns how many references had
// no mapping; the connection is then free.
func (o *mappingLookup) finish() (unmapped int64, err error) {
	close(o.batches)
	<-o.done
	return o.unmapped, o.err
}

// unmappedRefsSQL counts the references (@refs) that partner @partner has
// not mapped. A file read twice is pure only if there is none: its partner
// rejects or holds unknown employees (directTest, pureFirstFile).
var unmappedRefsSQL = query("UnmappedRefs")

// firstRowTakenSQL tells whether partner $1 has a record, and a lock, in
// pay period $2, whether employee $3 is mapped, and whether the partner
// creates mappings for unknown employees.
var firstRowTakenSQL = query("FirstRowTaken")

// lookUpFirstRow reads a file up to its first valid row and looks that
// row up (firstRowTakenSQL); it tells whether the partner creates mappings
// for unknown employees. The file is not read on directly if there is
// no valid row, if a row before it is rejected in an all-or-nothing file,
// or (errFirstRowTaken) if the row's pay period is closed, or has records
// and the row's employee is mapped (any resubmission).
func lookUpFirstRow(ctx context.Context, tx pgx.Tx, partner string, pl Plan) (creates bool, err error) {
	rows, err := pl.Reread(ReadOptions{KeysOnly: true})
	if err != nil {
		return false, fmt.Errorf("read the file: %w", err)
	}
	defer closeRows(rows)
	for {
		r, err := rows.Next()
		if errors.Is(err, io.EOF) {
			return false, errNotDirect("no valid row")
		}
		if err != nil {
			return false, err
		}
		if r.Code != "" {
			if pl.AllOrNothing {
				return false, errNotDirect("a rejected row in an all-or-nothing file")
			}
			continue
		}
		var recorded, locked, mapped bool
		if err := tx.QueryRow(ctx, firstRowTakenSQL, partner, r.PayPeriod, r.EmployeeRef).Scan(&recorded, &locked, &mapped, &creates); err != nil {
			return false, fmt.Errorf("look up the first row: %w", err)
		}
		if locked || recorded && mapped {
			return false, errFirstRowTaken
		}
		return creates, nil
	}
}

// directColumns are the columns the second pass copies into records.
const directColumns = `partner_id, employee_ref, pay_period, component, amount, currency, hours, rate, pay_date,
	content_hash, last_seq, envelope_id, line`

// directRows encodes the second pass's rows: a valid row as a tuple of
// binary COPY for records (copybinary.go), and every row's result line
// (resultLines).
type directRows struct {
	lines        *resultLines
	head         []byte // the field count and partner_id
	tail         []byte // last_seq and envelope_id
	cells        []byte
	allOrNothing bool      // a rejected row stops the file
	periods      periodSet // the valid rows' pay periods
}

// directColumnCount is the number of directColumns.
const directColumnCount = 13

func newDirectRows(env *records.Envelope, lines *resultLines) *directRows {
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

func (d *directRows) encode(b []byte, r *records.StagedRow) ([]byte, error) {
	if r.Code != "" {
		if d.allOrNothing {
			return b, errNotDirect("a rejected row in an all-or-nothing file")
		}
		d.lines.addRejected(r)
		if !d.lines.ok() {
			return b, errNotDirect("a result line Go cannot write")
		}
		return b, nil
	}
	if r.HeldCode() {
		return b, errHeldCode
	}
	d.cells = appendEchoedCells(d.cells[:0], r)
	d.lines.addCreated(r, d.cells)
	if !d.lines.ok() {
		return b, errNotDirect("a result line Go cannot write")
	}
	if d.periods.add(r.PayPeriod); d.periods.over {
		return b, errNotDirect("too many pay periods")
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
