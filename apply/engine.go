// Package apply applies a partner's rows to the stored records: a file's
// way from its rows to their outcomes, in one transaction — stage, decide
// (created, unchanged, updated, held, stale, rejected), write the records,
// their history and exceptions, and store the result file. Webhook changes
// and leg replays go through the same statements as a file's rows.
//
// The caller (package intake) opens an envelope (Open), reads its bytes
// into a Plan (how its rows are read), and applies it (Job.Apply). The
// engine asks the store (package records) for every read and write; the
// store never calls back.
package apply

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"

	"github.com/jackc/pgx/v5"
	"go.opentelemetry.io/otel/attribute"

	"github.com/payintake/payintake/normalize"
	"github.com/payintake/payintake/records"
	"github.com/payintake/payintake/workbook"
)

// Engine applies envelopes, webhook changes and leg replays to one store.
// It is safe for concurrent use.
type Engine struct {
	store           *records.Store
	log             *slog.Logger
	spoolDir        string
	stageWholeFiles bool
	workbookRows    int
	// blocks are COPY buffers kept for the next file's stageSource: a new
	// 260 KB block for every COPY would be garbage the collector and the
	// OS's page faults pay for with every file.
	blocks chan []byte
}

// Options tune New.
type Options struct {
	Logger *slog.Logger
	// StageWholeFiles stages every row of every file, as classify reads
	// them, instead of reading a first file without staging (applyDirect)
	// or comparing a resubmission's keys first (applyCompared): the
	// strategies store the same records and result, which the tests
	// compare.
	StageWholeFiles bool
	// WorkbookRows is the most data rows a file may have when its
	// partner's results are workbooks (0: workbook.MaxResultRows, what a
	// sheet holds). Tests lower it to try a file over the limit.
	WorkbookRows int
}

// New returns an engine on store. Temporary copies of envelopes go to the
// store's spool directory (records.Options.SpoolDir).
func New(store *records.Store, opts Options) *Engine {
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	rows := opts.WorkbookRows
	if rows <= 0 {
		rows = workbook.MaxResultRows
	}
	return &Engine{store: store, log: log, spoolDir: store.SpoolDir(), stageWholeFiles: opts.StageWholeFiles,
		workbookRows: rows, blocks: make(chan []byte, stageBlocks+2)}
}

// RowSource yields the rows of one file in order. Next returns io.EOF after
// the last row, or a *normalize.ParseError when the whole file must be rejected.
// A RowSource that is also an io.Closer (one that reads ahead in the
// background) is closed once processing is done with it, read or not.
type RowSource interface {
	Next() (records.StagedRow, error)
}

// closeRows closes rows if it is an io.Closer.
func closeRows(rows RowSource) {
	if c, ok := rows.(io.Closer); ok {
		_ = c.Close()
	}
}

// Plan is how one envelope is to be applied, decided by the caller once the
// envelope and its partner are locked (Open).
type Plan struct {
	// Refusal, when set, rejects the whole file before a row is read (an
	// empty file, a name that breaks the partner's pattern, an OpenPGP
	// refusal): its result is that one line. Seq and Seal still apply.
	Refusal      *normalize.ParseError
	Seq          *int64 // the file's sequence number, if the partner's file pattern gives one
	AllOrNothing bool
	Rows         RowSource
	// Reread, when set, returns a new RowSource over the same file from
	// its first row, read as ReadOptions say. Processing then tries the
	// file as a pure first file read twice, without staging (applyDirect),
	// and a resubmission compared on its keys first (applyCompared); once
	// it has called Reread, it reads Rows from a further Reread, not from
	// Rows.
	Reread func(ReadOptions) (RowSource, error)
	// Replay, when set, makes the envelope a leg replay of another
	// submission (a NAME.replay.csv file): its legs are applied as
	// Engine.Replay applies them, and Rows is not read.
	Replay *ReplayPlan
	// Seal, when set, seals the result for the partner (an OpenPGP
	// exchange), in the transaction that stores it. It is kept with a
	// whole-file refusal too: a refusal is sealed like any result.
	Seal *records.Sealer
}

// ReadOptions say how Plan.Reread reads a file again.
type ReadOptions struct {
	// KeysOnly: a valid row need carry only its natural key (EmployeeRef,
	// PayPeriod, Component).
	KeysOnly bool
	// Parallel: the rows are normalised on every core, for a read the
	// database waits for.
	Parallel bool
	// Only, when set, selects the rows to yield by their number
	// (records.StagedRow.Row): the others are read as CSV, to find where each row
	// ends, but neither normalised nor yielded.
	Only func(row int) bool
}

// ReplayPlan is a replay file's legs and the submission they replay.
type ReplayPlan struct {
	Of   records.Envelope // the submission (its outcome envelope)
	Legs []records.Leg
}

// Job is an envelope opened for processing: its row and its partner locked
// in a transaction, its bytes spooled to a temporary file. Apply it, then
// Close it (Close alone rolls back: nothing was done).
type Job struct {
	// Envelope is the envelope as stored. When its Status is not
	// records.StatusReceived it already has its outcome: there is nothing
	// to apply, and Apply returns it as it is.
	Envelope records.Envelope
	Partner  records.Partner
	// Body is the envelope's bytes as received, from their start; seek
	// back to 0 to read them again.
	Body io.ReadSeeker

	e    *Engine
	tx   pgx.Tx
	file *os.File
}

// Open begins processing envelope id: one transaction holds the envelope
// and its partner until Apply commits or Close rolls back. An envelope
// another transaction is processing gives records.ErrBusy at once rather
// than waiting with a connection held. With ifPartnerFree, a partner
// another transaction holds gives records.ErrPartnerBusy at once (the
// returned job's Envelope says whose partner) instead of waiting, so a
// queue worker can take another partner's file.
//
// The envelope's bytes are copied, over the same connection, to a
// temporary file, so processing needs one connection and flat memory.
func (e *Engine) Open(ctx context.Context, id int64, ifPartnerFree bool) (*Job, error) {
	tx, err := e.store.Pool().Begin(ctx)
	if err != nil {
		return nil, fmt.Errorf("process envelope %d: %w", id, err)
	}
	j := &Job{e: e, tx: tx}
	env, p, todo, err := e.store.LockForProcessing(ctx, tx, id, ifPartnerFree)
	j.Envelope, j.Partner = env, p
	if err == nil && todo {
		j.file, err = e.store.SpoolEnvelope(ctx, tx, env)
		j.Body = j.file
	}
	if err != nil {
		j.Close(ctx)
		if errors.Is(err, records.ErrPartnerBusy) {
			return j, fmt.Errorf("process envelope %d: %w", id, err) // j.Envelope says whose partner
		}
		return nil, fmt.Errorf("process envelope %d: %w", id, err)
	}
	return j, nil
}

// Close ends the job: its transaction is rolled back if Apply did not
// commit it, and its spooled bytes are freed.
func (j *Job) Close(ctx context.Context) {
	if j.file != nil {
		_ = j.file.Close()
	}
	_ = j.tx.Rollback(context.WithoutCancel(ctx)) // after a commit: pgx.ErrTxClosed
}

// Apply applies the job's envelope as pl says and commits: every record
// change, the history, the exceptions, the result file (sealed when pl.Seal
// says so) and the envelope's new status, or none of them. The returned
// envelope's Applied is true when this call applied it; an envelope that
// already had its outcome is returned as it is (processing twice is a
// no-op, so a retried job is safe).
func (j *Job) Apply(ctx context.Context, pl Plan) (records.Envelope, error) {
	defer func() { closeRows(pl.Rows) }()
	env := j.Envelope
	if env.Status != records.StatusReceived {
		return env, nil
	}
	env.Applied = true // if this transaction commits
	env.Seq = pl.Seq
	err := j.e.applyEnvelope(ctx, j.tx, &env, j.Partner, pl)
	if err == nil {
		err = j.tx.Commit(ctx)
	}
	if err != nil {
		return records.Envelope{}, fmt.Errorf("process envelope %d: %w", env.ID, err)
	}
	return env, nil
}

// applyEnvelope applies an envelope of any kind (a file refused whole, a
// replay file, a file of rows), then seals what it completed.
func (e *Engine) applyEnvelope(ctx context.Context, tx pgx.Tx, env *records.Envelope, p records.Partner, pl Plan) error {
	var err error
	switch {
	case pl.Refusal != nil:
		err = e.store.RejectFile(ctx, tx, env, *pl.Refusal, records.StatusProcessed)
	case pl.Replay != nil:
		err = e.applyReplayFile(ctx, tx, env, *pl.Replay)
	default:
		if limit := e.RowLimit(p); limit > 0 {
			pl = limitRows(pl, limit)
		}
		err = e.applyFile(ctx, tx, env, pl)
	}
	if err != nil {
		return err
	}
	// A workbook result is built here, once, from the lines just stored.
	if err := e.store.NoteResultFormat(ctx, tx, env, p, workbook.ResultWorkbook); err != nil {
		return err
	}
	// A later file supersedes held changes: review reports it completes
	// are sealed as decisions' are.
	if err := e.store.SealReviews(ctx, tx, env.PartnerID); err != nil {
		return err
	}
	if pl.Seal == nil {
		return nil
	}
	// Sealed in the transaction that stores the result: the sealed
	// bytes are the outcome the partner reads, every time.
	return e.store.SealResult(ctx, tx, env, pl.Seal)
}

// applyFile chooses how a file's rows are applied, from three strategies.
// Each stores the same records, history, exceptions and result file
// (apply's TestPureFirstFileMatchesClassify and
// TestResubmissionWithoutUnchangedRowsMatchesClassify compare them byte for
// byte); they differ in what they cost, and the two cheaper ones give up,
// rolled back to a savepoint, at the first doubt:
//
//  1. applyDirect: a first file (no records in its pay periods), read
//     twice without staging (direct: a first pass of keys, then the
//     records by binary COPY; a partner that creates mappings has the
//     first pass's new employees onboarded between the two,
//     directOnboarding). It spares the stage, ~2.7 s of an 11 s
//     1,000,000-row transaction. It gives up when the file meets stored
//     records or is not pure; then applyCompared is tried.
//  2. applyCompared: a resubmission, compared on its keys first: only keys
//     and content hashes are copied, and only the changed rows are read
//     again and staged (an unchanged 1M resubmission's stage alone was
//     3.1 s; the target is 0.8× the baseline). It gives up on a repeated
//     key, a rejected row of an all-or-nothing file, or a sample saying
//     many rows changed.
//  3. stageWhole: every row staged and classified by set-based SQL, a pure
//     first file written by one statement. It never gives up: it is what
//     the others fall back to (the file read again from its first row),
//     and the only way for a file that cannot be read twice (no
//     Plan.Reread) or an engine told to (Options.StageWholeFiles).
func (e *Engine) applyFile(ctx context.Context, tx pgx.Tx, env *records.Envelope, pl Plan) error {
	if err := tune(ctx, tx); err != nil {
		return err
	}
	if pl.Reread == nil || e.stageWholeFiles {
		return e.stageWhole(ctx, tx, env, pl.Rows, pl.AllOrNothing)
	}
	counts, why, err := e.applyDirect(ctx, tx, env, pl)
	if err == nil && why != nil && hasRecords(why) {
		counts, why, err = e.applyCompared(ctx, tx, env, pl)
	}
	if err != nil {
		return err
	}
	// Too many rows for a workbook: the attempt was rolled back, and
	// staging the file would only read as far again to be refused.
	var fr *normalize.ParseError
	if errors.As(why, &fr) && errors.Is(fr, normalize.CodeTooManyRowsForWorkbook) {
		return e.store.RejectFile(ctx, tx, env, *fr, records.StatusProcessed)
	}
	if why == nil {
		return records.CloseEnvelope(ctx, tx, env, counts)
	}
	closeRows(pl.Rows) // the first read of the file was consumed
	rows, err := pl.Reread(ReadOptions{})
	if err != nil {
		return fmt.Errorf("read the file again: %w", err)
	}
	defer closeRows(rows)
	return e.stageWhole(ctx, tx, env, rows, pl.AllOrNothing)
}

// hasRecords reports whether applyDirect gave up because the file meets
// stored records (a resubmission, or a later file of the same periods):
// such a file is compared on its keys before it is staged whole.
func hasRecords(why error) bool {
	return errors.Is(why, errFirstRowTaken) || errors.Is(why, errNotPure) || errors.Is(why, errKeyTaken)
}

// stageWhole applies a file by staging every row: the rows are copied into
// stage (COPY, text), classified against the stored records by one
// set-based statement (classifySQL), and written by applySQL's statements;
// a pure first file (every valid row created) is written by one statement
// instead (applyFirstFile), with the result lines composed in Go as the
// rows were staged. It costs the whole file's columns through the backend
// twice (stage, then records). It never gives up: a file refused mid-stream
// (a *normalize.ParseError from rows) gets that refusal as its result.
func (e *Engine) stageWhole(ctx context.Context, tx pgx.Tx, env *records.Envelope, rows RowSource, allOrNothing bool) error {
	sp, err := tx.Begin(ctx) // savepoint: a file rejected mid-stream leaves no staged rows
	if err != nil {
		return fmt.Errorf("savepoint: %w", err)
	}
	sctx, stage := records.StartSpan(ctx, "stage")
	if _, err := sp.Exec(sctx, stageDDL); err != nil {
		records.EndSpan(stage, err)
		return fmt.Errorf("create stage: %w", err)
	}
	lines, err := newResultLines(e.spoolDir)
	if err != nil {
		records.EndSpan(stage, err)
		return err
	}
	defer lines.close()
	src := newStageSource(sctx, rows, lines, nil, e.blocks)
	err = copyText(sctx, sp.Conn(), "stage", stageColumns, src)
	src.close()
	stage.SetAttributes(attribute.Int("payintake.rows", src.count), attribute.Int("payintake.rows_rejected", src.rejected))
	records.EndSpan(stage, err)
	var fr *normalize.ParseError
	if err != nil && errors.As(src.err, &fr) {
		if rbErr := sp.Rollback(ctx); rbErr != nil {
			return fmt.Errorf("roll back staged rows: %w", rbErr)
		}
		return e.store.RejectFile(ctx, tx, env, *fr, records.StatusProcessed)
	}
	if err != nil {
		if src.err != nil {
			err = src.err
		}
		return fmt.Errorf("stage rows: %w", err)
	}
	if err := sp.Commit(ctx); err != nil {
		return fmt.Errorf("release savepoint: %w", err)
	}
	if src.count == 0 {
		return e.store.RejectFile(ctx, tx, env, normalize.ParseError{Err: normalize.CodeNoRows, StartLine: 1, Line: 1,
			Message: "the file has a header but no data rows; nothing was applied: send the rows of the payroll run"}, records.StatusProcessed)
	}
	// The file's distinct employee references, for onboarding (empRefsSQL).
	useRefs := src.refs.list != nil
	if useRefs {
		if err := copyEmpRefs(ctx, tx, src.refs.list); err != nil {
			return err
		}
	}

	ff := firstFile{periods: src.periods, valid: src.count - src.rejected, rejected: src.rejected, held: src.held,
		repeats: repeatsUnknown, refs: -1, lines: lines, stats: &stageStats{rows: src.count}}
	if useRefs {
		ff.refs = int64(len(src.refs.list))
	}
	// All-or-nothing: a rejected or repeated row rejects the whole file
	// (classify adds the rows rejected for their employee).
	fileRejected := allOrNothing && src.rejected > 0
	// The key filter's candidates are confirmed on the real key once, here
	// (up to 2,097,152 rows only a repeated key, or a 64-bit collision, is
	// one; past that the Bloom filter gives ~0.5% false ones, all but the
	// repeated keys found distinct here).
	// With none repeated, neither the pure-first-file test nor classify
	// looks for duplicates again: classify's check of the candidates
	// scanned stage for them and joined every row with the groups found,
	// 0.3-0.5 s of an unchanged 1,000,000-row resubmission.
	// A file rejected whole has them checked by classify, which names its
	// duplicates.
	cands := src.keys.candidates()
	if len(cands) == 0 {
		ff.repeats = repeatsNone
	} else if !fileRejected {
		repeated, err := repeatedKeys(ctx, tx, cands)
		if err != nil {
			return err
		}
		switch {
		case !repeated:
			cands, ff.repeats = cands[:0], repeatsNone
		case allOrNothing:
			fileRejected = true
		}
	}
	args := pgx.NamedArgs{"partner": env.PartnerID, "seq": env.Seq, "env": env.ID,
		"by": fmt.Sprintf("envelope %d", env.ID), "file_rejected": fileRejected, "all_or_nothing": allOrNothing,
		"dup_candidates": cands, "emp_refs": useRefs}
	counts, err := applyStaged(ctx, tx, args, ff, env.Seq != nil)
	if err != nil {
		return err
	}
	return records.CloseEnvelope(ctx, tx, env, counts)
}

// RowLimit is the most data rows a file of partner p may have, or 0 for no
// limit: a partner whose results are workbooks can send no more rows than
// a result workbook holds (Options.WorkbookRows).
func (e *Engine) RowLimit(p records.Partner) int {
	if p.Profile != nil && p.Profile.Results == normalize.ResultsXLSX {
		return e.workbookRows
	}
	return 0
}

// TooManyRows is the refusal of a file whose row at line is past limit
// (RowLimit): nothing of the file is applied.
func TooManyRows(line, limit int) *normalize.ParseError {
	return &normalize.ParseError{Err: normalize.CodeTooManyRowsForWorkbook, StartLine: line, Line: line,
		Message: fmt.Sprintf("the file has more than %d data rows, the most a result workbook holds, and the partner's profile asks for results: xlsx; "+
			"nothing was applied: send the rows in files of at most %d rows each, or ask the operator for results: csv", limit, limit)}
}

// limitRows is pl with every read of its rows refusing the file at its
// first row past limit: a file whose result a workbook cannot hold, for a
// partner whose results are workbooks. Refused as it is read, before
// anything of it is committed (each way of applying it runs in a
// savepoint), the file gets its refusal as its result, once, rather than
// fail to build the workbook after applying it, and again on every retry.
func limitRows(pl Plan, limit int) Plan {
	if pl.Rows != nil {
		pl.Rows = &limitedRows{rows: pl.Rows, limit: limit}
	}
	if reread := pl.Reread; reread != nil {
		pl.Reread = func(o ReadOptions) (RowSource, error) {
			rows, err := reread(o)
			if err != nil {
				return nil, err
			}
			return &limitedRows{rows: rows, limit: limit}, nil
		}
	}
	return pl
}

// limitedRows is a RowSource refusing its file at the first row numbered
// past limit.
type limitedRows struct {
	rows  RowSource
	limit int
}

func (l *limitedRows) Next() (records.StagedRow, error) {
	r, err := l.rows.Next()
	if err == nil && r.Row > l.limit {
		return records.StagedRow{}, TooManyRows(r.Line, l.limit)
	}
	return r, err
}

// Close closes the rows it limits.
func (l *limitedRows) Close() error {
	closeRows(l.rows)
	return nil
}
