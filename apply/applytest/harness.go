// Package applytest drives the engine at the store level in tests: one
// partner on a fresh database, and files of staged rows built by the test
// (no CSV, no normalize) received and applied through apply.Engine, each
// case reading its effects back from the tables.
package applytest

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/payintake/payintake/apply"
	"github.com/payintake/payintake/normalize"
	"github.com/payintake/payintake/pgserver/pgtest"
	"github.com/payintake/payintake/records"
)

// Period is the pay period of Row's rows.
const Period = "2026-11"

// Harness is one partner on a fresh database.
type Harness struct {
	Store   *records.Store
	Engine  *apply.Engine
	Partner string
	files   int
}

// New gives a partner "acme" (currency USD) that treats unknown employees
// as unknownEmployee says, on a fresh database.
func New(t *testing.T, unknownEmployee string) *Harness {
	t.Helper()
	st := pgtest.Store(t)
	h := &Harness{Store: st, Engine: apply.New(st, apply.Options{}), Partner: "acme"}
	if err := h.Store.AddPartner(context.Background(), records.Partner{ID: h.Partner, Name: "Acme", Currency: "USD",
		UnknownEmployee: unknownEmployee}); err != nil {
		t.Fatal(err)
	}
	return h
}

// Config is a harness's partner, store and engine where New's do not do.
type Config struct {
	Partner   records.Partner // its ID is "acme"
	Employees []string        // employee references mapped (ref to W-ref) before any file
	Tracer    pgx.QueryTracer // told every statement of the store (records.Options.QueryTracer)
	// StageWholeFiles: the engine stages every file whole
	// (apply.Options.StageWholeFiles).
	StageWholeFiles bool
}

// NewWith gives the partner, store and engine c says, on a fresh database.
func NewWith(t *testing.T, c Config) *Harness {
	t.Helper()
	ctx := context.Background()
	st, err := records.Open(ctx, pgtest.New(t), records.Options{SecretKeys: pgtest.TestSecretKeys, QueryTracer: c.Tracer})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(st.Close)
	h := &Harness{Store: st, Engine: apply.New(st, apply.Options{StageWholeFiles: c.StageWholeFiles}), Partner: "acme"}
	c.Partner.ID = h.Partner
	if err := st.AddPartner(ctx, c.Partner); err != nil {
		t.Fatal(err)
	}
	var m []records.EmployeeMapping
	for i, ref := range c.Employees {
		m = append(m, records.EmployeeMapping{Line: i + 2, EmployeeRef: ref, EmployeeID: "W-" + ref})
	}
	if _, err := st.ImportEmployees(ctx, h.Partner, m); err != nil {
		t.Fatal(err)
	}
	return h
}

// Row is a valid staged row of employee ref for Period, component BASE,
// its content hash over the values (the key's own rows share it only when
// their values are the same).
func Row(ref, amount string) records.StagedRow {
	h := sha256.Sum256([]byte(amount + "|USD|||"))
	return records.StagedRow{EmployeeRef: ref, PayPeriod: Period, Component: "BASE", Amount: amount, Currency: "USD", Hash: h[:]}
}

// InPeriod is r in pay period p.
func InPeriod(r records.StagedRow, p string) records.StagedRow {
	r.PayPeriod = p
	return r
}

// HeldCode is r read under a profile that holds a code it does not map:
// its component is the partner's code, held for a reviewer with msg
// (records.StagedRow.HeldCode).
func HeldCode(r records.StagedRow, code, msg string) records.StagedRow {
	r.Component, r.Field, r.Message = code, "component", msg
	return r
}

// Invalid is a row normalize rejected: no normalised values, its raw cells
// (echoed in the result) in the D* fields.
func Invalid(ref, code, field, msg string) records.StagedRow {
	return records.StagedRow{DEmployeeRef: ref, DPayPeriod: Period, DComponent: "BASE", DAmount: "x", DCurrency: "USD",
		Code: code, Field: field, Message: msg}
}

// File is a file to send: its rows, numbered by Send.
type File struct {
	Seq          *int64
	AllOrNothing bool
	Lock         bool // Period is approved before the file is sent
	Rows         []records.StagedRow
}

type rowSource struct{ rows []records.StagedRow }

func (s *rowSource) Next() (records.StagedRow, error) {
	if len(s.rows) == 0 {
		return records.StagedRow{}, io.EOF
	}
	r := s.rows[0]
	s.rows = s.rows[1:]
	return r, nil
}

// Send receives f as a new file and applies it, and returns the envelope
// and its result rows.
func (h *Harness) Send(t *testing.T, f File) (records.Envelope, []records.ResultRow) {
	t.Helper()
	ctx := context.Background()
	if f.Lock {
		h.Lock(t)
	}
	h.files++
	name := fmt.Sprintf("pay-%d.csv", h.files)
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, []byte(fmt.Sprintf("file %d of %s\n", h.files, t.Name())), 0o600); err != nil {
		t.Fatal(err)
	}
	env, err := h.Store.Receive(ctx, records.Incoming{PartnerID: h.Partner, FileName: name, Source: "cli", Path: path}, nil)
	if err != nil {
		t.Fatal(err)
	}
	rows := make([]records.StagedRow, len(f.Rows))
	for i, r := range f.Rows {
		r.Row, r.Line = i+1, i+2
		rows[i] = r
	}
	job, err := h.Engine.Open(ctx, env.ID, false)
	if err != nil {
		t.Fatal(err)
	}
	defer job.Close(ctx)
	env, err = job.Apply(ctx, apply.Plan{Seq: f.Seq, AllOrNothing: f.AllOrNothing, Rows: &rowSource{rows: rows}})
	if err != nil {
		t.Fatal(err)
	}
	got, _, err := h.Store.ResultRows(ctx, env.ID, -1, 1000, func(r records.ResultRow) (records.ResultRow, bool) { return r, true })
	if err != nil {
		t.Fatal(err)
	}
	return env, got
}

// SendCSV receives content, a CSV file of payintake's own columns, as a
// new file (with sequence number seq, if not nil, and the partner's mode)
// and applies it, its rows read by normalize with default settings and
// staged as apply.Stage stages them, read again as often as the engine
// asks (apply.Plan.Reread, honouring ReadOptions.Only; a keys-only read
// gets whole rows, which carry the keys too); it returns the envelope.
func (h *Harness) SendCSV(t *testing.T, content string, seq *int64) records.Envelope {
	t.Helper()
	ctx := context.Background()
	p, err := h.Store.Partner(ctx, h.Partner)
	if err != nil {
		t.Fatal(err)
	}
	h.files++
	name := fmt.Sprintf("pay-%d.csv", h.files)
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	env, err := h.Store.Receive(ctx, records.Incoming{PartnerID: h.Partner, FileName: name, Source: "cli", Path: path}, nil)
	if err != nil {
		t.Fatal(err)
	}
	job, err := h.Engine.Open(ctx, env.ID, false)
	if err != nil {
		t.Fatal(err)
	}
	defer job.Close(ctx)
	read := func(o apply.ReadOptions) (apply.RowSource, error) {
		r, err := normalize.NewReader(strings.NewReader(content), normalize.Settings{})
		if err != nil {
			return nil, err
		}
		return &csvRows{r: r, only: o.Only}, nil
	}
	pl := apply.Plan{Seq: seq, AllOrNothing: p.Mode == records.ModeAllOrNothing, Reread: read}
	var fr *normalize.ParseError
	if pl.Rows, err = read(apply.ReadOptions{}); errors.As(err, &fr) {
		pl.Refusal = fr
	} else if err != nil {
		t.Fatal(err)
	}
	env, err = job.Apply(ctx, pl)
	if err != nil {
		t.Fatal(err)
	}
	return env
}

// csvRows are a CSV file's rows, staged; with only, the rows it selects.
type csvRows struct {
	r    *normalize.Reader
	only func(row int) bool
}

func (s *csvRows) Next() (records.StagedRow, error) {
	for {
		p, err := s.r.Read()
		if err != nil {
			return records.StagedRow{}, err
		}
		if s.only == nil || s.only(p.Index()) {
			return apply.Stage(s.r.Finish(p)), nil
		}
	}
}

// Result is the result file of env, as the store writes it.
func (h *Harness) Result(t *testing.T, env records.Envelope) string {
	t.Helper()
	var b bytes.Buffer
	if err := h.Store.WriteResult(context.Background(), env.ID, &b); err != nil {
		t.Fatalf("result of envelope %d: %v", env.ID, err)
	}
	return b.String()
}

// Record reads the record of employee ref (Period, BASE); the test fails
// when there is none.
func (h *Harness) Record(t *testing.T, ref string) records.Record {
	t.Helper()
	r, err := h.Store.FindRecord(context.Background(), h.Partner, ref, Period, "BASE")
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// Lock approves Period.
func (h *Harness) Lock(t *testing.T) {
	t.Helper()
	if _, err := h.Store.LockPeriod(context.Background(), h.Partner, Period, records.LockApproved, "ops"); err != nil {
		t.Fatal(err)
	}
}

// Exec runs sql on the database.
func (h *Harness) Exec(t *testing.T, sql string, args ...any) {
	t.Helper()
	if _, err := h.Store.Pool().Exec(context.Background(), sql, args...); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
}

// Rows is a RowSource of rows, in order.
func Rows(rows []records.StagedRow) apply.RowSource { return &rowSource{rows: rows} }

// ResubmissionCounter is a query tracer (Config.Tracer) counting how a
// resubmission was applied: the classify statements that left the
// unchanged rows out of classified (SkipUnchanged: @skip_unchanged true),
// and the files compared on their keys first: Keys the attempts (a COPY
// into stage_keys), KeysUndone those rolled back (the savepoint undone
// after it: the file was then staged whole).
type ResubmissionCounter struct {
	SkipUnchanged, Keys, KeysUndone atomic.Int64
	sawKeys                         atomic.Bool
}

func (c *ResubmissionCounter) TraceQueryStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceQueryStartData) context.Context {
	if strings.Contains(d.SQL, "INSERT INTO classified") && len(d.Args) == 1 {
		if a, ok := d.Args[0].(pgx.NamedArgs); ok && a["skip_unchanged"] == true {
			c.SkipUnchanged.Add(1)
		}
	}
	// The savepoint of a compared file is released or rolled back next.
	if sql := strings.ToLower(d.SQL); strings.HasPrefix(sql, "rollback to savepoint") && c.sawKeys.Swap(false) {
		c.KeysUndone.Add(1)
	} else if strings.HasPrefix(sql, "release savepoint") {
		c.sawKeys.Store(false)
	}
	return ctx
}

func (c *ResubmissionCounter) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

func (c *ResubmissionCounter) TraceCopyFromStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceCopyFromStartData) context.Context {
	if d.TableName.Sanitize() == (pgx.Identifier{"stage_keys"}).Sanitize() {
		c.Keys.Add(1)
		c.sawKeys.Store(true)
	}
	return ctx
}

func (c *ResubmissionCounter) TraceCopyFromEnd(context.Context, *pgx.Conn, pgx.TraceCopyFromEndData) {
}

// Effects reads back the records (but their last_seq), exceptions and
// history of st's database (ids and clock times left out, the rest in a
// fixed order), for comparing two databases that applied the same files
// in different ways.
func Effects(t *testing.T, st *records.Store) map[string]string {
	t.Helper()
	out := map[string]string{}
	for k, q := range map[string]string{
		"records": `SELECT jsonb_agg(to_jsonb(r) - 'id' - 'created_at' - 'updated_at' - 'locked_at' - 'last_seq'
			ORDER BY pay_period, employee_ref, component) FROM records r`,
		"exceptions": `SELECT jsonb_agg(to_jsonb(x) - 'id' - 'created_at' - 'decided_at' - 'record_id' - 'superseded_by'
			ORDER BY envelope_id, row_no) FROM exceptions x`,
		"history": `SELECT jsonb_agg(to_jsonb(h) - 'record_id' - 'written_at' - 'replaced_at'
			ORDER BY h.replaced_by, r.pay_period, r.employee_ref, r.component)
			FROM record_history h JOIN records r ON r.id = h.record_id`,
	} {
		var v []byte
		if err := st.Pool().QueryRow(context.Background(), q).Scan(&v); err != nil {
			t.Fatalf("%s: %v", k, err)
		}
		out[k] = string(v)
	}
	return out
}
