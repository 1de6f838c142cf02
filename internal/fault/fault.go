// Package fault is a test-only crash hook. It is inert unless the
// environment variable PAYINTAKE_FAULT names a stage; then the process kills
// itself with SIGKILL (no deferred code, no clean shutdown: as a power cut
// or the OOM killer would) the first time it reaches that stage. The crash
// tests (cmd/payintake, TestCrash*) use it to stop `serve` at exact points:
//
//	after-receive  an envelope and its job are committed; before it is processed
//	mid-apply      inside the processing transaction, once records are
//	               written: after the rows are staged and the statement
//	               that inserts records has run, or after a first file's
//	               COPY into records (apply's applyDirect)
//	before-commit  the processing transaction has done all its work
//	               (records, history, result file) and is about to COMMIT
//	after-commit   processing committed; the job is not yet marked done
//
// and the outbound dispatch (package dispatch, TestCrashDispatch):
//
//	dispatch-before-send  a chunk's ledger rows are written; its request is not sent
//	dispatch-after-send   the vendor answered; the answer is not recorded
//	dispatch-mid-record   inside the transaction recording an answer, after
//	                      the ledger is updated, before the run's lines are (rolled back)
//
// Nothing here runs in production: Enabled is false, Point returns at once.
package fault

import (
	"context"
	"os"
	"regexp"
	"strings"
	"syscall"

	"github.com/jackc/pgx/v5"
)

// Stage names, see the package comment.
const (
	AfterReceive = "after-receive"
	MidApply     = "mid-apply"
	BeforeCommit = "before-commit"
	AfterCommit  = "after-commit"

	DispatchBeforeSend = "dispatch-before-send"
	DispatchAfterSend  = "dispatch-after-send"
	DispatchMidRecord  = "dispatch-mid-record"
)

var stage = os.Getenv("PAYINTAKE_FAULT")

// Enabled reports whether a fault stage is set.
func Enabled() bool { return stage != "" }

// Point kills the process if s is the configured stage.
func Point(s string) {
	if stage != "" && s == stage {
		_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
		select {} // never return: the signal is on its way
	}
}

type processingKey struct{}

// Processing marks ctx as the processing of an envelope, so the statements of
// its transaction can be told apart by Tracer.
func Processing(ctx context.Context) context.Context {
	if stage == "" {
		return ctx
	}
	return context.WithValue(ctx, processingKey{}, &progress{})
}

type progress struct{ staged bool }

var insertRecords = regexp.MustCompile(`(?i)\binsert\s+into\s+records\b`)

// Tracer is a pgx query tracer that fires mid-apply and before-commit in the
// statements of a processing transaction. Install it only when Enabled.
type Tracer struct{}

type sqlKey struct{}

func (Tracer) TraceQueryStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceQueryStartData) context.Context {
	if p, _ := ctx.Value(processingKey{}).(*progress); p != nil {
		if strings.EqualFold(strings.TrimSpace(d.SQL), "commit") {
			Point(BeforeCommit)
		}
		return context.WithValue(ctx, sqlKey{}, d.SQL)
	}
	return ctx
}

func (Tracer) TraceQueryEnd(ctx context.Context, _ *pgx.Conn, d pgx.TraceQueryEndData) {
	p, _ := ctx.Value(processingKey{}).(*progress)
	if p != nil && p.staged && d.Err == nil && d.CommandTag.RowsAffected() > 0 && insertRecords.MatchString(sqlOf(ctx)) {
		Point(MidApply)
	}
}

type copyKey struct{}

func (Tracer) TraceCopyFromStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceCopyFromStartData) context.Context {
	if p, _ := ctx.Value(processingKey{}).(*progress); p != nil {
		return context.WithValue(ctx, copyKey{}, d.TableName.Sanitize())
	}
	return ctx
}

// recordsTable is how a COPY into records names its table: a first file
// read without staging (apply's applyDirect) writes its records by COPY, not INSERT.
var recordsTable = pgx.Identifier{"records"}.Sanitize()

func (Tracer) TraceCopyFromEnd(ctx context.Context, _ *pgx.Conn, d pgx.TraceCopyFromEndData) {
	if p, _ := ctx.Value(processingKey{}).(*progress); p != nil && d.Err == nil {
		p.staged = true
		if table, _ := ctx.Value(copyKey{}).(string); table == recordsTable && d.CommandTag.RowsAffected() > 0 {
			Point(MidApply)
		}
	}
}

func sqlOf(ctx context.Context) string {
	s, _ := ctx.Value(sqlKey{}).(string)
	return s
}
