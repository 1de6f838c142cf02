package apply_test

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"

	"github.com/payintake/payintake/apply/applytest"
	"github.com/payintake/payintake/bench"
	"github.com/payintake/payintake/records"
)

// classifyCounter counts the store's classify statements (INSERT INTO
// classified): a pure first file runs none. It counts too how result files
// are stored: by a statement (INSERT INTO envelope_results, the lines
// composed in SQL) or by a COPY of the lines staging composed in Go, and
// the ANALYZEs of stage (which only classify needs), the employee lookups
// of a file read twice, and the onboarding statements (INSERT INTO
// employees).
type classifyCounter struct {
	n, sqlResults, goResults, analyzes, stages, records, lookups, onboards atomic.Int64
}

func (c *classifyCounter) TraceQueryStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceQueryStartData) context.Context {
	if strings.Contains(d.SQL, "INSERT INTO classified") {
		c.n.Add(1)
	}
	if strings.Contains(d.SQL, "INSERT INTO envelope_results") {
		c.sqlResults.Add(1)
	}
	if strings.Contains(d.SQL, "ANALYZE stage") {
		c.analyzes.Add(1)
	}
	if strings.HasPrefix(d.SQL, "SELECT count(*) FROM unnest(@refs") { // firstfile.sql's UnmappedRefs
		c.lookups.Add(1)
	}
	if strings.HasPrefix(strings.TrimSpace(d.SQL), "INSERT INTO employees") {
		c.onboards.Add(1)
	}
	return ctx
}

func (c *classifyCounter) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

func (c *classifyCounter) TraceCopyFromStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceCopyFromStartData) context.Context {
	switch d.TableName.Sanitize() {
	case pgx.Identifier{"envelope_results"}.Sanitize():
		c.goResults.Add(1)
	case pgx.Identifier{"stage"}.Sanitize():
		c.stages.Add(1)
	case pgx.Identifier{"records"}.Sanitize():
		c.records.Add(1)
	}
	return ctx
}

func (c *classifyCounter) TraceCopyFromEnd(context.Context, *pgx.Conn, pgx.TraceCopyFromEndData) {}

func (c *classifyCounter) reset() {
	c.n.Store(0)
	c.sqlResults.Store(0)
	c.goResults.Store(0)
	c.analyzes.Store(0)
	c.stages.Store(0)
	c.records.Store(0)
	c.lookups.Store(0)
	c.onboards.Store(0)
}

// messyRows are data rows (CRLF line ends) of one period: messy valid
// values, non-ASCII and invisible characters, formula-looking cells, a
// quoted cell with a line break, and invalid rows of several kinds.
func messyRows(period string) string {
	return strings.Join([]string{
		` E1 ,` + period + `,base,"$1,234.50",usd,,,2026-11-30`,
		`Zoë-7,` + period + `,BONUS, 250.00 ,USD,,,`,
		"\u00a0E8\u00a0," + period + ",BASE,100,USD,,,",
		`"=HYPERLINK(""http://x"")",` + period + `,BASE,10.00,USD,,,`,
		`E2,` + period + `,BASE,=1+1,USD,,,`,
		`E3,` + period + `,BASE,12.345,USD,,,`,
		`E4,` + period + `,OVERTIME,375.00,USD,10.5,35.7143,`,
		"E5," + period + ",BASE,\"12\r\n00\",USD,,,",
		`E6,` + period + `,DEDUCTION,(50.00),USD,,,`,
		`E7,13/2026,BASE,1.00,USD,,,`,
		`E9,` + period + `,BASE,1.00,usd,,,2026-02-30`,
		`@E10,` + period + `,BASE,1.00,USD,,,`,
		`E11,` + period + `,BONUS,-5,USD,,,`,
		"E12," + period + ",\u200bBASE,1.00,USD,,,",
		"\u202eE13," + period + ",BASE,\u00a01.00,€,,,",
		`+E14,` + period + `,BASE, -3.00,USD,,,`,
	}, "\r\n") + "\r\n"
}

// asciiEdgeRows are messyRows without the rows that have a cell starting
// or ending with a non-ASCII character: the quoting of every cell of
// these is decided in Go, so a pure first file's result lines are
// composed while staging.
func asciiEdgeRows(period string) string {
	var keep []string
	for _, l := range strings.SplitAfter(messyRows(period), "\r\n") {
		edge := false
		for _, cell := range strings.Split(strings.TrimSuffix(l, "\r\n"), ",") {
			cell = strings.Trim(cell, `"`)
			edge = edge || cell != "" && (cell[0] >= utf8.RuneSelf || cell[len(cell)-1] >= utf8.RuneSelf)
		}
		if !edge {
			keep = append(keep, l)
		}
	}
	return strings.Join(keep, "")
}

const firstFileHeader = "employee_ref,pay_period,component,amount,currency,hours,rate,pay_date\r\n"

// manyPeriods are cleanRows of n pay periods, from 2024-01 on.
func manyPeriods(n int) string {
	var b strings.Builder
	for i := range n {
		b.WriteString(cleanRows(fmt.Sprintf("%d-%02d", 2024+i/12, 1+i%12)))
	}
	return b.String()
}

// cleanRows are valid rows of employees E1..E6 in period.
func cleanRows(period string) string {
	var b strings.Builder
	for i := 1; i <= 6; i++ {
		fmt.Fprintf(&b, "E%d,%s,BASE,%d.50,USD,,,\r\nE%d,%s,BONUS,%d,usd,,,\r\n", i, period, 1000+i, i, period, 10*i)
	}
	return b.String()
}

// A pure first file (every valid row certain to be created: no lock in
// its periods and no record in them or no mapping for any of its
// employees, no repeated key, no employee rejected, taken or held, the
// file not rejected whole) skips classify and is applied and answered
// straight from the staged rows. Each file here goes to two databases
// that differ only in one earlier record (of a component no file has):
// in a, of employee PRIOR, who is in no file, in another period (or, with
// unmappedInPeriod, in the file's own period, where the file's employees
// are all new); in b, in the file's period, where classify decides: of
// one of the file's employees (pivot, mapped beforehand with the id
// onboarding would derive) when a takes the pure path, else of PRIOR. The result files must be the same bytes and the
// tables the same, row for row. A third database, s, is a with every file
// staged (apply.Options.StageWholeFiles): where a reads a first file
// twice without staging (a pure file whose first row's period has no
// record and whose result Go composes), s takes the staged pure path, and
// the three must agree.
func TestPureFirstFileMatchesClassify(t *testing.T) {
	generated := func(rows int) string { return generatedFile(t, rows) }
	mapped := []string{"E1", "E2", "E3", "E4", "E5", "E6"}
	for name, tc := range map[string]struct {
		partner records.Partner
		seq     int64    // the file's sequence number (0: none)
		mapped  []string // employee_refs imported before the files
		before  func(t *testing.T, h *applytest.Harness)
		file    string
		period  string // the file's first period
		pivot   string // an employee of a valid row of the file; E6 if empty
		// unmappedInPeriod puts database a's earlier record in the file's
		// period: the file is pure only because its employees are new.
		unmappedInPeriod bool
		pure             bool // whether database a takes the pure first file path
		// once: database a applies the file without staging although it
		// is not a pure first file for classify (b) or the staged path
		// (s): a mapped employee in a period with records, which the
		// natural key's unique index shows has no record of the file's
		// keys (a partner that creates mappings).
		once bool
		// copied: database a's copy into records finds out that the file
		// is not pure (a key repeats, too many periods): the copy is
		// rolled back.
		copied bool
		// lookups is how many employee lookups database a runs (one per
		// 8,192 employees while reading, the rest at the end) for a
		// partner that does not create mappings, when not 0. A partner
		// that creates them runs none: its first pass's employees are
		// onboarded by one statement before the copy.
		lookups int64
	}{
		"invalid rows, CRLF, non-ASCII, formula cells":              {file: firstFileHeader + messyRows("2026-11"), pure: true},
		"invalid rows, CRLF, non-ASCII inside cells, formula cells": {file: firstFileHeader + asciiEdgeRows("2026-11"), pure: true},
		"a valid cell ending in a non-ASCII character": {
			file: firstFileHeader + cleanRows("2026-11") + "Zoé,2026-11,BASE,1.00,USD,,,\r\n", pure: true,
		},
		"an invalid row's cell starting with a non-ASCII character": {
			file: firstFileHeader + cleanRows("2026-11") + "E1,2026-11,ÉTÉ,1.00,USD,,,\r\nE1,2026-13,BASE,1.00,USD,,,\r\n", pure: true,
		},
		"a sequence number": {
			seq:  7,
			file: firstFileHeader + asciiEdgeRows("2026-11"), pure: true,
		},
		"two periods, semicolons, a byte order mark": {
			file: "\ufeff" + strings.ReplaceAll(firstFileHeader+cleanRows("2026-10")+cleanRows("2026-11"), ",", ";"), pure: true,
		},
		"a generated export of 20,000 rows": {file: generated(20000), period: "2026-03", pivot: "E00000001", pure: true},
		"new employees in a period with records": {
			file: firstFileHeader + messyRows("2026-11"), unmappedInPeriod: true, pure: true,
		},
		"new employees in a period with records, all-or-nothing": {
			partner: records.Partner{Mode: records.ModeAllOrNothing},
			file:    firstFileHeader + cleanRows("2026-11"), unmappedInPeriod: true, pure: true,
		},
		"new employees of a generated export in a period with records": {
			file: generated(20000), period: "2026-03", pivot: "E00000001", unmappedInPeriod: true, pure: true,
		},
		// ~10,900 employees onboarded by one statement before the copy;
		// and, when one late employee is mapped in a period with records,
		// its rows created all the same (it has no record of their keys),
		// where the staged path classifies the file.
		"a generated export of 60,000 rows": {
			file: generated(60000), period: "2026-03", pivot: "E00000001", pure: true,
		},
		"new employees of a generated export of 60,000 rows in a period with records, one mapped late": {
			mapped: []string{"E00010000"}, file: generated(60000), period: "2026-03", unmappedInPeriod: true, once: true,
		},
		// Read twice (a partner that holds unknown employees), more
		// employees than an onboarding statement takes while the first
		// pass reads on (records' lookupBatch, 8,192): looked up in
		// batches.
		"unknown employees held, every employee of a generated export of 60,000 rows mapped": {
			partner: records.Partner{UnknownEmployee: records.UnknownHold}, mapped: generatedRefs(11000),
			file: generated(60000), period: "2026-03", pivot: "E00000001", pure: true, lookups: 2,
		},
		"new employees in a period with records, one mapped": {
			partner: records.Partner{UnknownEmployee: records.UnknownReject}, mapped: mapped,
			file: firstFileHeader + cleanRows("2026-11"), unmappedInPeriod: true,
		},
		// Copied until the natural key refuses E6's BONUS, recorded
		// by an earlier file with another amount: compared on its keys
		// instead, E6's row updated, the others created.
		"new employees in a period with records, a later key recorded already": {
			before: func(t *testing.T, h *applytest.Harness) {
				if out := h.SendCSV(t, "employee_ref,pay_period,component,amount,currency\nE6,2026-11,BONUS,61.00,USD\n", nil); out.Counts["created"] != 1 {
					t.Fatalf("earlier file: %v", out.Counts)
				}
			},
			file: firstFileHeader + cleanRows("2026-11"), unmappedInPeriod: true, copied: true,
		},
		"a key twice": {
			file: firstFileHeader + messyRows("2026-11") + "E1,2026-11,BASE,1.00,USD,,,\r\n", copied: true,
		},
		"all-or-nothing, every row valid": {
			partner: records.Partner{Mode: records.ModeAllOrNothing},
			file:    firstFileHeader + cleanRows("2026-11"), pure: true,
		},
		"all-or-nothing, invalid rows": {
			partner: records.Partner{Mode: records.ModeAllOrNothing},
			file:    firstFileHeader + messyRows("2026-11"),
		},
		"unknown employees rejected, every employee mapped": {
			partner: records.Partner{UnknownEmployee: records.UnknownReject}, mapped: mapped,
			file: firstFileHeader + cleanRows("2026-11"), pure: true,
		},
		"unknown employees rejected, one not mapped": {
			partner: records.Partner{UnknownEmployee: records.UnknownReject}, mapped: mapped[1:],
			file: firstFileHeader + cleanRows("2026-11"),
		},
		"unknown employees rejected, all-or-nothing, one not mapped": {
			partner: records.Partner{UnknownEmployee: records.UnknownReject, Mode: records.ModeAllOrNothing}, mapped: mapped[1:],
			file: firstFileHeader + cleanRows("2026-11"),
		},
		"unknown employees held, every employee mapped": {
			partner: records.Partner{UnknownEmployee: records.UnknownHold}, mapped: mapped,
			file: firstFileHeader + cleanRows("2026-11"), pure: true,
		},
		"unknown employees held, one not mapped": {
			partner: records.Partner{UnknownEmployee: records.UnknownHold}, mapped: mapped[1:],
			file: firstFileHeader + cleanRows("2026-11"),
		},
		"the id an unknown employee would get is taken": {
			before: func(t *testing.T, h *applytest.Harness) {
				h.Exec(t, `INSERT INTO employees (partner_id, employee_ref, employee_id, source)
					VALUES ($1, 'OTHER', derived_employee_id($1, 'E3'), 'derived')`, h.Partner)
			},
			file: firstFileHeader + cleanRows("2026-11"),
		},
		"33 pay periods, more than a first file collects": {file: firstFileHeader + manyPeriods(33), copied: true},
		"the period is closed": {
			before: func(t *testing.T, h *applytest.Harness) {
				if _, err := h.Store.LockPeriod(context.Background(), h.Partner, "2026-11", records.LockApproved, "ops"); err != nil {
					t.Fatal(err)
				}
			},
			file: firstFileHeader + cleanRows("2026-11"),
		},
	} {
		t.Run(name, func(t *testing.T) {
			if tc.period == "" {
				tc.period = "2026-11"
			}
			if tc.pivot == "" {
				tc.pivot = "E6"
			}
			aPeriod := "2025-01"
			if tc.unmappedInPeriod {
				aPeriod = tc.period
			}
			a, ca := firstFileFixture(t, tc.partner, tc.mapped, "PRIOR", aPeriod, false)
			if !tc.pure {
				tc.pivot = "PRIOR" // b runs classify for the file's own reason
			}
			b, cb := firstFileFixture(t, tc.partner, tc.mapped, tc.pivot, tc.period, true)
			s, cs := firstFileFixture(t, tc.partner, tc.mapped, "PRIOR", aPeriod, true)
			var seq *int64
			if tc.seq != 0 {
				seq = &tc.seq
			}
			var outs [3]records.Envelope
			for i, h := range []*applytest.Harness{a, b, s} {
				if tc.before != nil {
					tc.before(t, h)
					[]*classifyCounter{ca, cb, cs}[i].reset() // the file's statements alone
				}
				outs[i] = h.SendCSV(t, tc.file, seq)
			}
			// a reads the file twice without staging exactly when it is a
			// pure first file whose result lines Go composes; else it
			// stages it, as s does.
			direct := tc.pure || tc.once
			if n := ca.stages.Load(); (n == 0) != direct {
				t.Errorf("database a staged the file %d time(s); want it read without staging %v", n, direct)
			}
			// a file whose result SQL composes is found out while copied
			if n := ca.records.Load(); (n == 1) != (tc.pure || tc.once || tc.copied) {
				t.Errorf("database a copied into records %d time(s)", n)
			}
			creates := tc.partner.UnknownEmployee == "" || tc.partner.UnknownEmployee == records.UnknownCreate
			if n := ca.lookups.Load(); tc.lookups != 0 && n != tc.lookups || creates && n != 0 {
				t.Errorf("database a ran %d employee lookup(s); want %d", n, tc.lookups)
			}
			if n := cs.stages.Load(); n != 1 {
				t.Errorf("database s staged the file %d time(s); want 1", n)
			}
			if n := cs.records.Load(); n != 0 {
				t.Errorf("database s copied into records %d time(s); want none", n)
			}
			if ra, rs := a.Result(t, outs[0]), s.Result(t, outs[2]); ra != rs {
				t.Errorf("result files differ:\nread twice:\n%s\nstaged:\n%s", ra, rs)
			}
			ea, es := firstFileEffects(t, a, outs[0].ID), firstFileEffects(t, s, outs[2].ID)
			for _, k := range []string{"envelope", "records", "employees", "exceptions", "history", "result chunks"} {
				if ea[k] != es[k] {
					t.Errorf("%s differ:\nread twice: %s\nstaged:     %s", k, ea[k], es[k])
				}
			}
			a, ca = s, cs // from here on, the staged pure first file against classify, as before
			if n := ca.n.Load(); (n == 0) != tc.pure {
				t.Errorf("database a ran classify %d time(s); want the pure first file path %v", n, tc.pure)
			}
			if n := cb.n.Load(); n == 0 {
				t.Errorf("database b did not run classify")
			}
			// stage is analysed for classify only.
			if n := ca.analyzes.Load(); (n == 0) != tc.pure {
				t.Errorf("database a analysed stage %d time(s); want none only on the pure first file path (%v)", n, tc.pure)
			}
			if n := cb.analyzes.Load(); n != 1 {
				t.Errorf("database b analysed stage %d time(s); want 1", n)
			}
			// Every result is composed in Go while staging (one COPY), by
			// classify's path too.
			for _, c := range []struct {
				name string
				c    *classifyCounter
			}{{"a", ca}, {"b", cb}} {
				if g, s := c.c.goResults.Load(), c.c.sqlResults.Load(); g != 1 || s != 0 {
					t.Errorf("database %s stored its result by %d COPY and %d statement(s); want one COPY", c.name, g, s)
				}
			}
			ra, rb := a.Result(t, outs[0]), b.Result(t, outs[1])
			if ra != rb {
				t.Errorf("result files differ:\npure first file:\n%s\nclassify:\n%s", ra, rb)
			}
			if !strings.Contains(ra, ",created,") && tc.pure {
				t.Errorf("no row created:\n%s", ra)
			}
			ea, eb := firstFileEffects(t, a, outs[0].ID), firstFileEffects(t, b, outs[1].ID)
			for _, k := range []string{"envelope", "records", "employees", "exceptions", "history", "result chunks"} {
				if ea[k] != eb[k] {
					t.Errorf("%s differ:\npure first file: %s\nclassify:        %s", k, ea[k], eb[k])
				}
			}
			t.Logf("%s; %d result bytes", ea["envelope"], len(ra))
		})
	}
}

// A first file of a partner that creates mappings is applied without
// staging (a): no employee is looked up one by one, its new employees are
// onboarded under their derived ids by one statement, and its records
// copied in once; whether the partner has mappings or not, the file leaves
// the same result, records and mappings as staged (s). An onboarding that
// silently stopped would fail here: the records' insert trigger refuses a
// record without a mapping, and the mappings are compared.
func TestFirstFileOnboardsWithoutStaging(t *testing.T) {
	generated := func(rows int) string { return generatedFile(t, rows) }
	for name, tc := range map[string]struct {
		mapped []string
		file   string
	}{
		"a small file":         {file: firstFileHeader + cleanRows("2026-11")},
		"non-ASCII references": {file: firstFileHeader + asciiEdgeRows("2026-11")},
		"60,000 rows":          {file: generated(60000)},
		"a partner with a mapping of no file row": {mapped: []string{"OTHER"}, file: firstFileHeader + cleanRows("2026-11")},
		"a partner with a mapping of a file row":  {mapped: []string{"E3"}, file: firstFileHeader + cleanRows("2026-11")},
	} {
		t.Run(name, func(t *testing.T) {
			ca, cs := &classifyCounter{}, &classifyCounter{}
			a := applytest.NewWith(t, applytest.Config{Employees: tc.mapped, Tracer: ca})
			s := applytest.NewWith(t, applytest.Config{Employees: tc.mapped, Tracer: cs, StageWholeFiles: true})
			outA := a.SendCSV(t, tc.file, nil)
			outS := s.SendCSV(t, tc.file, nil)
			if n := ca.stages.Load(); n != 0 {
				t.Errorf("database a staged the file %d time(s); want it read without staging", n)
			}
			if n, l, o := ca.records.Load(), ca.lookups.Load(), ca.onboards.Load(); n != 1 || l != 0 || o != 1 {
				t.Errorf("database a copied into records %d time(s) after %d employee lookup(s) and %d onboarding statement(s); want once after none and one", n, l, o)
			}
			if outA.Counts["created"] == 0 {
				t.Fatalf("nothing created: %v", outA.Counts)
			}
			var onboarded int
			if err := a.Store.Pool().QueryRow(context.Background(), `SELECT count(*) FROM employees
				WHERE partner_id = $1 AND source = 'derived' AND employee_id = derived_employee_id(partner_id, employee_ref)`, a.Partner).Scan(&onboarded); err != nil || onboarded == 0 {
				t.Errorf("database a onboarded %d employee(s) under their derived ids (%v)", onboarded, err)
			}
			// Onboarded in the same order as staged (the references in
			// byte order), as the heap holds them.
			var order [2]string
			for i, h := range []*applytest.Harness{a, s} {
				if err := h.Store.Pool().QueryRow(context.Background(), `SELECT coalesce(string_agg(employee_ref, ',' ORDER BY ctid), '') FROM employees
					WHERE partner_id = $1 AND source = 'derived'`, h.Partner).Scan(&order[i]); err != nil {
					t.Fatal(err)
				}
			}
			if order[0] != order[1] {
				t.Errorf("onboarding order differs:\nnot staged: %s\nstaged:     %s", order[0], order[1])
			}
			if ra, rs := a.Result(t, outA), s.Result(t, outS); ra != rs {
				t.Errorf("result files differ:\nnot staged:\n%s\nstaged:\n%s", ra, rs)
			}
			ea, es := firstFileEffects(t, a, outA.ID), firstFileEffects(t, s, outS.ID)
			for _, k := range []string{"envelope", "records", "employees", "exceptions", "history", "result chunks"} {
				if ea[k] != es[k] {
					t.Errorf("%s differ:\nnot staged: %s\nstaged:     %s", k, ea[k], es[k])
				}
			}
		})
	}
}

// generatedFile is a bench export of rows rows, of employees from
// E00000001 on.
func generatedFile(t *testing.T, rows int) string {
	t.Helper()
	var b bytes.Buffer
	if _, err := (bench.File{Rows: rows, Offset: 1}).WriteTo(&b); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// generatedRefs are the employee references E00000001 to n, as
// bench.File writes them (a generated file of r rows has ~r/5.5).
func generatedRefs(n int) []string {
	refs := make([]string, n)
	for i := range refs {
		refs[i] = fmt.Sprintf("E%08d", i+1)
	}
	return refs
}

// firstFileFixture is a database with partner acme (p), the employees
// mapped (and PRIOR), and one record of employee prior, component PRIOR,
// in period, from an earlier file; its classifyCounter counts from then
// on. A prior other than PRIOR, unless in mapped, is mapped first with the
// id and source onboarding gives it. Its engine stages every file whole
// when stageWhole says so (apply.Options.StageWholeFiles).
func firstFileFixture(t *testing.T, p records.Partner, mapped []string, prior, period string, stageWhole bool) (*applytest.Harness, *classifyCounter) {
	t.Helper()
	c := &classifyCounter{}
	h := applytest.NewWith(t, applytest.Config{Partner: p, Employees: append([]string{"PRIOR"}, mapped...), Tracer: c, StageWholeFiles: stageWhole})
	if prior != "PRIOR" && !slices.Contains(mapped, prior) {
		h.Exec(t, `INSERT INTO employees (partner_id, employee_ref, employee_id, source)
			VALUES ($1, $2, derived_employee_id($1, $2), 'derived')`, h.Partner, prior)
	}
	out := h.SendCSV(t, "employee_ref,pay_period,component,amount,currency\n"+prior+","+period+",PRIOR,1.00,USD\n", nil)
	if out.Counts["created"] != 1 {
		t.Fatalf("earlier file: %v", out.Counts)
	}
	c.reset()
	return h, c
}

// firstFileEffects reads back what envelope env did: the envelope's
// outcome, and every row of the tables it writes but the earlier file's
// record (ids and clock times left out, the rest in a fixed order).
func firstFileEffects(t *testing.T, h *applytest.Harness, env int64) map[string]string {
	t.Helper()
	out := map[string]string{}
	for k, q := range map[string]string{
		"envelope": `SELECT jsonb_build_object('status', status, 'counts', counts, 'seq', seq, 'result_size', result_size)
			FROM envelopes WHERE id = $1`,
		"records": `SELECT jsonb_agg(to_jsonb(r) - 'id' - 'created_at' - 'updated_at' - 'locked_at'
			ORDER BY pay_period, employee_ref, component) FROM records r WHERE component <> 'PRIOR'`,
		"employees":  `SELECT jsonb_agg(to_jsonb(e) - 'created_at' ORDER BY employee_ref) FROM employees e`,
		"exceptions": `SELECT jsonb_agg(to_jsonb(x) - 'id' - 'created_at' - 'record_id' ORDER BY row_no) FROM exceptions x`,
		"history":    `SELECT jsonb_agg(to_jsonb(h) - 'record_id' - 'written_at' - 'replaced_at') FROM record_history h`,
		// The result's chunks as stored (readers ask for chunks from a
		// row's n on, so the numbering must be the same too).
		"result chunks": `SELECT jsonb_agg(jsonb_build_array(n, md5(data)) ORDER BY n) FROM envelope_results WHERE envelope_id = $1`,
	} {
		var args []any
		if k == "envelope" || k == "result chunks" {
			args = append(args, env)
		}
		var v []byte
		if err := h.Store.Pool().QueryRow(context.Background(), q, args...).Scan(&v); err != nil {
			t.Fatalf("%s: %v", k, err)
		}
		out[k] = string(v)
	}
	return out
}
