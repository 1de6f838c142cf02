package apply

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/jackc/pgx/v5"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/payintake/payintake/normalize"
	"github.com/payintake/payintake/records"
)

// A resubmission compared on its keys first. Nearly every row of a
// payroll resubmission is unchanged, and staging it whole costs what it
// costs to stage a first file: every column of every row copied into
// stage (2.2 s of backend CPU at 1,000,000 rows, more on a connection
// whose local buffers are still cold), only for classify to find that the
// content hash is the stored one. A file that may be a resubmission (the
// first read of applyDirect found records in its pay periods) is applied
// in three steps instead, unless a sample of its first rows says that
// many of them changed (sampleRows: then it is staged whole, which costs
// less):
//
//  1. keys: the file is read on every core, each valid row's row number,
//     natural key, content hash and key hash are copied by binary COPY into
//     stage_keys (a third of a stage row, nothing for the backend to
//     parse), and each row's result line is composed in Go as if it were
//     unchanged (resultLines; a rejected row's line as it is);
//  2. compare: one join of stage_keys with records finds the rows whose
//     key has no record or whose content hash differs (changedRowsSQL);
//  3. the changed rows are read again from the file (the others are read
//     as CSV only) and staged whole,
//     classified and applied as any staged file's rows are (classifySQL,
//     applySQL), and the result file is the lines of step 1 with
//     classify's decisions in place of theirs (storeMerged, mergeCompared).
//
// A row that is not read again is valid, is not held for its component
// code (such a row is copied without a hash, so it is always read again),
// has a record of its key with its content hash, and repeats no key of the file (step 1 confirms the key
// filter's candidates, and gives up on a repeat): classify would find it
// unchanged, the first outcome of its CASE that such a row can meet (an
// invalid row is rejected by Go already, the employee checks only meet
// keys without a record). So every row's outcome is classify's, and the
// unchanged rows write nothing, but in a file with a sequence number: one
// statement moves their records' last_seq on (confirmSeqSQL), as applySQL
// does for the unchanged rows of a staged file.
//
// Everything runs in a savepoint: at the first doubt (a repeated key, a
// rejected row or employee in an all-or-nothing file, any error) it is
// rolled back and the file is staged whole from a new read. The result
// file and every table are the same either way
// (TestResubmissionWithoutUnchangedRowsMatchesClassify, apply/resubmission_test.go).

// errNotCompared is why a file is not applied compared; it is staged whole.
type errNotCompared string

func (e errNotCompared) Error() string { return "not compared: " + string(e) }

// applyCompared applies a file compared on its keys first, as applyDirect
// applies a first file read twice: a reason why not (and no error) means
// nothing was done, and the caller stages the file whole from a new
// RowSource.
func (e *Engine) applyCompared(ctx context.Context, tx pgx.Tx, env *records.Envelope, pl Plan) (counts map[string]int, why, err error) {
	return e.attempt(ctx, tx, env, "compared", "a resubmission could not be compared on its keys; it is staged instead",
		func(tx pgx.Tx) (map[string]int, error) { return e.compared(ctx, tx, env, pl) })
}

// attempt runs apply in a savepoint of tx. When apply fails the savepoint
// is rolled back and why is its error; a failure that is neither a reason not
// to apply the file that way (errNotDirect, errNotCompared) nor a file the
// staging will reject (a *normalize.ParseError) is logged with warning.
// The process span notes whether way ("direct", "compared") was taken, and
// why not. An error is returned only when the transaction cannot go on
// (the savepoint not taken or not rolled back, ctx done).
func (e *Engine) attempt(ctx context.Context, tx pgx.Tx, env *records.Envelope, way, warning string,
	apply func(pgx.Tx) (map[string]int, error)) (counts map[string]int, why, err error) {
	sp, err := tx.Begin(ctx)
	if err != nil {
		return nil, nil, fmt.Errorf("savepoint: %w", err)
	}
	process := trace.SpanFromContext(ctx)
	counts, why = apply(sp)
	if why == nil {
		if err = sp.Commit(ctx); err != nil {
			return nil, nil, fmt.Errorf("release savepoint: %w", err)
		}
		process.SetAttributes(attribute.Bool("payintake."+way, true))
		return counts, nil, nil
	}
	process.SetAttributes(attribute.Bool("payintake."+way, false), attribute.String("payintake."+way+"_fallback", why.Error()))
	if rbErr := sp.Rollback(ctx); rbErr != nil {
		return nil, nil, fmt.Errorf("roll back %s apply (%v): %w", way, why, rbErr)
	}
	if ctx.Err() != nil {
		return nil, nil, ctx.Err()
	}
	var notDirect errNotDirect
	var notCompared errNotCompared
	var pe *normalize.ParseError
	if !errors.As(why, &notDirect) && !errors.As(why, &notCompared) && !errors.As(why, &pe) {
		e.log.WarnContext(ctx, warning, "envelope", env.ID, "partner", env.PartnerID, "err", why)
	}
	return nil, why, nil
}

func (e *Engine) compared(ctx context.Context, tx pgx.Tx, env *records.Envelope, pl Plan) (map[string]int, error) {
	lines, err := newResultLines(e.spoolDir)
	if err != nil {
		return nil, errNotCompared(err.Error())
	}
	defer lines.close()
	args := pgx.NamedArgs{"partner": env.PartnerID, "seq": env.Seq, "env": env.ID,
		"by": fmt.Sprintf("envelope %d", env.ID), "file_rejected": false, "all_or_nothing": pl.AllOrNothing}

	if env.Size >= sampleMinBytes {
		sctx, span := records.StartSpan(ctx, "sample")
		sampled, changed, err := sampleRows(sctx, tx, pl, env.PartnerID)
		span.SetAttributes(attribute.Int("payintake.rows", sampled), attribute.Int("payintake.rows_changed", changed))
		span.End()
		if err != nil {
			return nil, err
		}
		if changed*4 > sampled {
			return nil, errNotCompared(fmt.Sprintf("%d of the first %d valid rows changed", changed, sampled))
		}
	}

	sctx, span := records.StartSpan(ctx, "stage", attribute.Bool("payintake.compared", true))
	k, err := stageKeys(sctx, tx, pl, lines, e.blocks)
	if k != nil {
		span.SetAttributes(attribute.Int("payintake.rows", k.count), attribute.Int("payintake.rows_rejected", k.rejected))
	}
	span.End()
	if err != nil {
		return nil, err
	}

	cctx, span := records.StartSpan(ctx, "compare")
	again, err := changedRows(cctx, tx, env.PartnerID)
	if again != nil {
		span.SetAttributes(attribute.Int("payintake.rows_read_again", again.n))
	}
	span.End()
	if err != nil {
		return nil, err
	}

	counts := map[string]int{}
	validAgain, rejectedAgain := 0, 0
	if again.n > 0 {
		// Few changed rows: classify and the updates probe the indexes of
		// records (probeRecords).
		probe := again.n*4 <= k.count-k.rejected
		if counts, validAgain, rejectedAgain, err = classifyAgain(ctx, tx, pl, args, again, probe, e.blocks); err != nil {
			return nil, err
		}
	}
	if env.Seq != nil {
		// A newer file confirming a record moves its sequence on.
		if _, err := tx.Exec(ctx, confirmSeqSQL, args); err != nil {
			return nil, fmt.Errorf("confirm records: %w", err)
		}
	}
	// The rows not read again: valid ones unchanged, rejected ones as Go
	// rejected them.
	if n := k.count - k.rejected - validAgain; n > 0 {
		counts[string(records.OutcomeUnchanged)] += n
	}
	if n := k.rejected - rejectedAgain; n > 0 {
		counts[string(records.OutcomeRejected)] += n
	}
	rctx, span := records.StartSpan(ctx, "result")
	mode := mergeCompared
	if again.n == 0 {
		mode = mergeUnchanged
	}
	err = lines.storeMerged(rctx, tx, env.ID, mode)
	records.EndSpan(span, err)
	if err != nil {
		return nil, err
	}
	return counts, nil
}

// sampleRowCount is how many valid rows sampleRows compares, in a file of
// at least sampleMinBytes (a smaller one is compared whatever it changes:
// the difference is a few milliseconds either way, less than the sample).
const (
	sampleRowCount = 1024
	sampleMinBytes = 1 << 20
)

// sampleRows compares the file's first sampleRowCount valid rows (among
// its first 8×sampleRowCount rows) with the records, by index probes
// (sampleSQL), and returns how many it compared and how many of them
// changed (no record, or another content hash). A file whose sample
// changed in more than a quarter of its rows is staged whole:
// comparing first costs a 1,000,000-row file about 4 s (the keys copied and
// joined) and saves the staging of each unchanged row, so it pays up to
// about a third of the rows changed; a correction of every amount is
// cheaper staged whole. The sample decides the cost only, never an
// outcome.
func sampleRows(ctx context.Context, tx pgx.Tx, pl Plan, partner string) (sampled, changed int, err error) {
	rows, err := pl.Reread(ReadOptions{})
	if err != nil {
		return 0, 0, fmt.Errorf("read the file: %w", err)
	}
	defer closeRows(rows)
	var refs, periods, components []string
	var hashes [][]byte
	// At most sampleRowCount valid rows, among at most eight times as
	// many: a file that starts with many rejected rows is not read to its
	// end for a sample.
	for read := 0; len(refs) < sampleRowCount && read < 8*sampleRowCount; read++ {
		r, err := rows.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return 0, 0, err // a file rejected whole: staged, which says why
		}
		if r.Code == "" {
			refs, periods, components = append(refs, r.EmployeeRef), append(periods, r.PayPeriod), append(components, r.Component)
			hashes = append(hashes, r.Hash)
		}
	}
	if len(refs) == 0 {
		return 0, 0, nil
	}
	if err := tx.QueryRow(ctx, sampleSQL, partner, refs, periods, components, hashes).Scan(&changed); err != nil {
		return 0, 0, fmt.Errorf("compare a sample: %w", err)
	}
	return len(refs), changed, nil
}

// sampleSQL counts the keys ($2-$4, with content hashes $5) of partner $1
// that have no record or one with another content hash: changedRowsSQL's
// test, on arrays, one probe of the natural key's index per key (LATERAL
// with LIMIT 1, which the planner cannot turn into a hash). As a plain
// join, with the partner's statistics taken before its large first file,
// PostgreSQL would hash all of its records for the 1,024 keys: most of a
// second for a partner of a million records.
var sampleSQL = query("SampleChanged")

// stageKeysDDL holds a compared file's valid rows: their number, natural
// key, content hash and key hash (keyHash).
var stageKeysDDL = query("CreateStageKeys")

const stageKeysColumns = `row_no, employee_ref, pay_period, component, content_hash, key_hash`

// stageKeysColumnCount is the number of stageKeysColumns.
const stageKeysColumnCount = 6

// keyRows is step 1: it encodes each valid row as a binary COPY tuple of
// stage_keys and writes every row's result line.
type keyRows struct {
	aon      bool // all-or-nothing: a rejected row rejects the file, which is staged whole
	lines    *resultLines
	keys     keyFilter
	cells    []byte
	count    int
	rejected int
}

func (k *keyRows) encode(b []byte, r *records.StagedRow) ([]byte, error) {
	if r.Code != "" {
		if k.aon {
			return b, errNotCompared("a rejected row in an all-or-nothing file")
		}
		k.lines.addRejected(r)
		return b, nil
	}
	kh := keyHash(r)
	k.keys.add(kh)
	k.cells = appendEchoedCells(k.cells[:0], r)
	k.lines.addCreated(r, k.cells)
	b = appendInt16(b, stageKeysColumnCount)
	b = appendBinaryInt4(b, int32(r.Row))
	b = appendBinaryText(b, r.EmployeeRef)
	b = appendBinaryText(b, r.PayPeriod)
	b = appendBinaryText(b, r.Component)
	if r.HeldCode() {
		// No hash: the row is read again and classified (held), whatever
		// record its key (the partner's code) may have.
		b = appendBinaryNull(b)
	} else {
		b = appendBinaryBytes(b, r.Hash)
	}
	return appendBinaryInt8(b, int64(kh)), nil
}

// stageKeys is step 1: it reads the file and fills stage_keys and lines.
// It gives up on a file that has no row, or a key that repeats (the
// duplicates are named by classify, staged whole).
func stageKeys(ctx context.Context, tx pgx.Tx, pl Plan, lines *resultLines, free chan []byte) (*keyRows, error) {
	if _, err := tx.Exec(ctx, stageKeysDDL); err != nil {
		return nil, fmt.Errorf("create stage_keys: %w", err)
	}
	rows, err := pl.Reread(ReadOptions{Parallel: true})
	if err != nil {
		return nil, fmt.Errorf("read the file: %w", err)
	}
	defer closeRows(rows)
	k := &keyRows{aon: pl.AllOrNothing, lines: lines}
	src := newStageSource(ctx, rows, lines, k.encode, free)
	err = copyBinary(ctx, tx.Conn(), "stage_keys", stageKeysColumns, src)
	src.close()
	k.count, k.rejected = src.count, src.rejected
	if err != nil {
		if src.err != nil {
			err = src.err
		}
		return k, fmt.Errorf("copy keys: %w", err)
	}
	switch {
	case k.count == 0:
		return k, errNotCompared("no rows")
	case !lines.ok():
		return k, errNotCompared("result lines not written")
	}
	if cands := k.keys.candidates(); len(cands) > 0 {
		var repeated bool
		if err := tx.QueryRow(ctx, repeatedKeysSQL("stage_keys"), cands).Scan(&repeated); err != nil {
			return k, fmt.Errorf("check duplicates: %w", err)
		}
		if repeated {
			return k, errNotCompared("a key repeats")
		}
	}
	return k, nil
}

// changedRowsSQL is step 2: the staged keys of partner $1 that have no
// record, or a record with another content hash (records.content_hash is
// NOT NULL: a key without a record is distinct from any hash), and the
// rows held for their component code (staged without a hash). The one
// place besides classifySQL that decides "unchanged" (sampleSQL repeats
// it, for the cost only); the parity test named above holds them together.
var changedRowsSQL = query("ChangedRows")

// confirmSeqSQL moves the last_seq of the records a file with sequence
// number @seq found unchanged (the staged keys whose record has their
// content hash) on to @seq, as applySQL's statement for the unchanged rows
// of classified does.
var confirmSeqSQL = query("ConfirmSeq")

// changedRows is step 2: the rows to read again, the changed ones.
func changedRows(ctx context.Context, tx pgx.Tx, partner string) (*rowSet, error) {
	again := &rowSet{}
	rows, err := tx.Query(ctx, changedRowsSQL, partner)
	if err != nil {
		return nil, fmt.Errorf("compare keys: %w", err)
	}
	defer rows.Close()
	var row int32
	for rows.Next() {
		if err := rows.Scan(&row); err != nil {
			return nil, fmt.Errorf("compare keys: %w", err)
		}
		again.add(int(row))
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("compare keys: %w", err)
	}
	return again, nil
}

// classifyAgain is step 3: it stages the rows of again from a new read of
// the file, classifies and applies them (all but the result file), and
// returns their outcome counts and how many of them were valid and
// rejected.
func classifyAgain(ctx context.Context, tx pgx.Tx, pl Plan, args pgx.NamedArgs, again *rowSet, probe bool, free chan []byte) (counts map[string]int, valid, rejected int, err error) {
	sctx, span := records.StartSpan(ctx, "stage")
	if _, err := tx.Exec(sctx, stageDDL); err != nil {
		records.EndSpan(span, err)
		return nil, 0, 0, fmt.Errorf("create stage: %w", err)
	}
	rows, err := pl.Reread(ReadOptions{Only: again.has})
	if err != nil {
		records.EndSpan(span, err)
		return nil, 0, 0, fmt.Errorf("read the file again: %w", err)
	}
	defer closeRows(rows)
	src := newStageSource(sctx, rows, nil, nil, free)
	err = copyText(sctx, tx.Conn(), "stage", stageColumns, src)
	src.close()
	span.SetAttributes(attribute.Int("payintake.rows", src.count), attribute.Int("payintake.rows_rejected", src.rejected))
	records.EndSpan(span, err)
	if err != nil {
		if src.err != nil {
			err = src.err
		}
		return nil, 0, 0, fmt.Errorf("stage rows: %w", err)
	}
	if src.count != again.n {
		return nil, 0, 0, fmt.Errorf("the file read again gave %d of its %d changed rows", src.count, again.n)
	}
	args["probe_records"] = probe
	cctx, span := records.StartSpan(ctx, "classify")
	counts, err = classifyRows(cctx, tx, args, src)
	records.EndSpan(span, err)
	if err != nil {
		return nil, 0, 0, err
	}
	if rej, _ := args["file_rejected"].(bool); rej {
		return nil, 0, 0, errNotCompared("an employee rejected in an all-or-nothing file")
	}
	if _, err := applyClassified(ctx, tx, args, counts, false, false, nil); err != nil {
		return nil, 0, 0, err
	}
	return counts, src.count - src.rejected, src.rejected, nil
}

// classifyRows classifies the rows staged from src, every one of them
// into classified (none repeats a key: stageKeys confirmed it).
func classifyRows(ctx context.Context, tx pgx.Tx, args pgx.NamedArgs, src *stageSource) (map[string]int, error) {
	args["emp_refs"] = src.refs.list != nil
	if src.refs.list != nil {
		if err := copyEmpRefs(ctx, tx, src.refs.list); err != nil {
			return nil, err
		}
	}
	stats := &stageStats{rows: src.count}
	if err := stats.ensure(ctx, tx); err != nil {
		return nil, err
	}
	empRows, err := lookUpEmployees(ctx, tx, args)
	if err != nil {
		return nil, err
	}
	args["dup_candidates"] = []int64{}
	return classifyStaged(ctx, tx, args, empRows, 0)
}

// rowSet is a set of row numbers.
type rowSet struct {
	bits []uint64
	n    int
}

func (s *rowSet) add(row int) {
	i := row >> 6
	if i >= len(s.bits) {
		s.bits = append(s.bits, make([]uint64, i+1-len(s.bits))...)
	}
	if bit := uint64(1) << (row & 63); s.bits[i]&bit == 0 {
		s.bits[i] |= bit
		s.n++
	}
}

func (s *rowSet) has(row int) bool {
	i := row >> 6
	return i < len(s.bits) && s.bits[i]&(uint64(1)<<(row&63)) != 0
}
