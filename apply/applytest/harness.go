// Package applytest drives the engine at the store level in tests: one
// partner on a fresh database, and files of staged rows built by the test
// (no CSV, no normalize) received and applied through apply.Engine, each
// case reading its effects back from the tables.
package applytest

import (
	"context"
	"crypto/sha256"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/payintake/payintake/apply"
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
