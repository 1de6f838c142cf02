package intake_test

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/payintake/payintake/normalize"
	"github.com/payintake/payintake/records"
)

// derivedID computes SPEC's derived id independently of the database:
// "emp_" + the first 20 hex digits of SHA-256 of "{partner}:{employee_ref}".
func derivedID(partner, ref string) string {
	sum := sha256.Sum256([]byte(partner + ":" + ref))
	return "emp_" + hex.EncodeToString(sum[:])[:20]
}

// TestDerivedEmployeeID checks the database's derived_employee_id against
// vectors computed by hand with sha256sum and Python (hard-coded below) and
// against Go's crypto/sha256 on more inputs, non-ASCII ones included.
func TestDerivedEmployeeID(t *testing.T) {
	f := newFixture(t, records.Partner{})
	db := func(partner, ref string) string {
		t.Helper()
		var id string
		if err := f.store.Pool().QueryRow(f.ctx, `SELECT derived_employee_id($1, $2)`, partner, ref).Scan(&id); err != nil {
			t.Fatal(err)
		}
		return id
	}
	// printf 'acme:E00101' | sha256sum; python3 -c "import hashlib; print(hashlib.sha256('acme:Zoë-7'.encode()).hexdigest()[:20])"
	for _, v := range []struct{ partner, ref, want string }{
		{"acme", "E00101", "emp_428610414c68097363af"},
		{"acme", "Zoë-7", "emp_0fd48a0f9349ab51b059"},
	} {
		if got := db(v.partner, v.ref); got != v.want {
			t.Errorf("derived_employee_id(%q, %q) = %s, want %s", v.partner, v.ref, got, v.want)
		}
	}
	for _, ref := range []string{"E1", "007", " x ", "李四", "Ünï-3", "a:b", `q"<&>`, strings.Repeat("z", 128)} {
		if got, want := db("globex.eu", ref), derivedID("globex.eu", ref); got != want {
			t.Errorf("derived_employee_id(globex.eu, %q) = %s, want %s", ref, got, want)
		}
	}
}

const empHeader = "employee_ref,pay_period,component,amount,currency\n"

// The rows every mode test sends: E1 is onboarded, E2 (twice) and Zoë-7 are not.
const unknownFile = empHeader +
	"E1,2026-11,BASE,100.00,USD\n" +
	"E2,2026-11,BASE,200.00,USD\n" +
	"E2,2026-11,BONUS,20.00,USD\n" +
	"Zoë-7,2026-11,BASE,300.00,USD\n"

// TestUnknownEmployee: a row whose employee_ref has no mapping, under each
// --unknown-employee policy and mode.
func TestUnknownEmployee(t *testing.T) {
	type want struct{ outcome, code, field string }
	created, unknownRejected := want{"created", "", ""}, want{"rejected", "unknown_employee", "employee_ref"}
	unknownHeld, fileRejected := want{"held", "unknown_employee", "employee_ref"}, want{"rejected", "file_rejected", ""}
	cases := map[string]struct {
		policy, mode string
		rows         [4]want
		mapped       []string // employee_refs mapped after the file (E1 was imported)
		records      int
	}{
		"create": {policy: records.UnknownCreate, mode: records.ModeRow,
			rows: [4]want{created, created, created, created}, mapped: []string{"E1", "E2", "Zoë-7"}, records: 4},
		"create all-or-nothing": {policy: records.UnknownCreate, mode: records.ModeAllOrNothing,
			rows: [4]want{created, created, created, created}, mapped: []string{"E1", "E2", "Zoë-7"}, records: 4},
		"reject": {policy: records.UnknownReject, mode: records.ModeRow,
			rows: [4]want{created, unknownRejected, unknownRejected, unknownRejected}, mapped: []string{"E1"}, records: 1},
		"reject all-or-nothing": {policy: records.UnknownReject, mode: records.ModeAllOrNothing,
			rows: [4]want{fileRejected, unknownRejected, unknownRejected, unknownRejected}, mapped: []string{"E1"}, records: 0},
		"hold": {policy: records.UnknownHold, mode: records.ModeRow,
			rows: [4]want{created, unknownHeld, unknownHeld, unknownHeld}, mapped: []string{"E1"}, records: 1},
		"hold all-or-nothing": {policy: records.UnknownHold, mode: records.ModeAllOrNothing,
			rows: [4]want{created, unknownHeld, unknownHeld, unknownHeld}, mapped: []string{"E1"}, records: 1},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			f := newFixture(t, records.Partner{Mode: tc.mode, UnknownEmployee: tc.policy})
			if _, err := f.store.ImportEmployees(f.ctx, f.partner, []records.EmployeeMapping{{Line: 2, EmployeeRef: "E1", EmployeeID: "W-1"}}); err != nil {
				t.Fatal(err)
			}
			_, out := f.ingest("pay-1.csv", unknownFile)
			for i, r := range f.resultRows(out) {
				w := tc.rows[i]
				if r["outcome"] != w.outcome || r["code"] != w.code || r["field"] != w.field {
					t.Errorf("row %d (%s): %s/%s/%s, want %s/%s/%s", i+1, r["employee_ref"], r["outcome"], r["code"], r["field"], w.outcome, w.code, w.field)
				}
				if w.code == "unknown_employee" && !strings.Contains(r["message"], "not onboarded") {
					t.Errorf("row %d: message %q does not say what is wrong", i+1, r["message"])
				}
				if w == unknownRejected && !strings.Contains(r["message"], "employees import") {
					t.Errorf("row %d: message %q does not say what to do", i+1, r["message"])
				}
			}
			emps, err := f.store.Employees(f.ctx, f.partner)
			if err != nil {
				t.Fatal(err)
			}
			var refs []string
			for _, e := range emps {
				refs = append(refs, e.EmployeeRef)
				want := derivedID(f.partner, e.EmployeeRef)
				if e.EmployeeRef == "E1" {
					want = "W-1"
				}
				if e.EmployeeID != want {
					t.Errorf("employee %s mapped to %s, want %s", e.EmployeeRef, e.EmployeeID, want)
				}
			}
			if fmt.Sprint(refs) != fmt.Sprint(tc.mapped) {
				t.Errorf("mapped references %v, want %v", refs, tc.mapped)
			}
			if n := f.count(`SELECT count(*) FROM records`); n != tc.records {
				t.Errorf("%d records, want %d", n, tc.records)
			}
			// Every record can be joined to its employee (the dispatcher's read).
			if n := f.count(`SELECT count(*) FROM records r JOIN employees e USING (partner_id, employee_ref)`); n != tc.records {
				t.Errorf("%d records joined to employees, want %d", n, tc.records)
			}
		})
	}
}

// TestUnknownEmployeeHoldDecisions: approving an unknown_employee exception
// onboards the employee with the derived id and applies the row; rejecting
// it keeps nothing.
func TestUnknownEmployeeHoldDecisions(t *testing.T) {
	f := newFixture(t, records.Partner{UnknownEmployee: records.UnknownHold})
	f.ingest("pay-1.csv", unknownFile)
	xs, err := f.store.Exceptions(f.ctx, records.ExceptionFilter{Partner: f.partner, Status: records.ExceptionOpen})
	if err != nil {
		t.Fatal(err)
	}
	if len(xs) != 4 { // E1 is not onboarded here either
		t.Fatalf("%d open exceptions, want 4", len(xs))
	}
	byRef := map[string]records.Exception{}
	for _, x := range xs {
		if x.Code != normalize.CodeUnknownEmployee || x.EmployeeID != derivedID(f.partner, x.EmployeeRef) {
			t.Errorf("exception %d: code %s, employee_id %s; want unknown_employee, %s", x.ID, x.Code, x.EmployeeID, derivedID(f.partner, x.EmployeeRef))
		}
		byRef[x.EmployeeRef+"/"+x.Component] = x
	}
	// A mapping imported while the exception waits is the one approval keeps.
	if _, err := f.store.ImportEmployees(f.ctx, f.partner, []records.EmployeeMapping{{Line: 2, EmployeeRef: "E1", EmployeeID: "W-1"}}); err != nil {
		t.Fatal(err)
	}
	decide := func(key string, approve bool) {
		t.Helper()
		if _, err := f.store.Decide(f.ctx, records.Decision{ExceptionID: byRef[key].ID, Approve: approve, Reviewer: "rita"}); err != nil {
			t.Fatalf("decide %s: %v", key, err)
		}
	}
	if x, err := f.store.Exception(f.ctx, byRef["E1/BASE"].ID); err != nil || x.EmployeeID != "W-1" {
		t.Errorf("exception of E1 after import shows employee_id %q (%v), want W-1", x.EmployeeID, err)
	}
	decide("E1/BASE", true)
	decide("E2/BASE", true)
	decide("E2/BONUS", true) // the mapping exists by now: approving again keeps it
	decide("Zoë-7/BASE", false)
	mapped := map[string]string{}
	emps, err := f.store.Employees(f.ctx, f.partner)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range emps {
		mapped[e.EmployeeRef] = e.EmployeeID
	}
	want := map[string]string{"E1": "W-1", "E2": derivedID(f.partner, "E2")}
	if fmt.Sprint(mapped) != fmt.Sprint(want) {
		t.Errorf("mappings %v, want %v", mapped, want)
	}
	for key, amount := range map[string]string{"E1/BASE": "100.00", "E2/BASE": "200.00", "E2/BONUS": "20.00"} {
		ref, comp, _ := strings.Cut(key, "/")
		r, err := f.store.FindRecord(f.ctx, f.partner, ref, "2026-11", comp)
		if err != nil || r.Amount != amount || r.EmployeeID != want[ref] {
			t.Errorf("%s: record %+v (%v), want amount %s, employee_id %s", key, r, err, amount, want[ref])
		}
	}
	if _, err := f.store.FindRecord(f.ctx, f.partner, "Zoë-7", "2026-11", "BASE"); !errors.Is(err, records.ErrNotFound) {
		t.Errorf("rejected unknown employee left a record: %v", err)
	}
	// Once onboarded, E2's next row is applied without a reviewer.
	_, out := f.ingest("pay-2.csv", empHeader+"E2,2026-11,BASE,250.00,USD\n")
	if r := f.resultRows(out)[0]; r["outcome"] != "updated" {
		t.Errorf("onboarded employee's change: %s/%s, want updated", r["outcome"], r["code"])
	}
}

// TestDerivedIDTakenIsRejected: a reference whose derived id already
// belongs to another employee is rejected, never merged into that one.
func TestDerivedIDTakenIsRejected(t *testing.T) {
	f := newFixture(t, records.Partner{})
	// Only the database could hand out this id for another reference: an
	// import refuses it (see TestImportEmployeesConflicts).
	if _, err := f.store.Pool().Exec(f.ctx, `INSERT INTO employees (partner_id, employee_ref, employee_id, source)
		VALUES ('acme', 'OTHER', $1, 'import')`, derivedID("acme", "E2")); err != nil {
		t.Fatal(err)
	}
	_, out := f.ingest("pay-1.csv", empHeader+"E2,2026-11,BASE,200.00,USD\n")
	r := f.resultRows(out)[0]
	if r["outcome"] != "rejected" || r["code"] != "unknown_employee" || !strings.Contains(r["message"], "already belongs to another employee") {
		t.Errorf("row: %v", r)
	}
	if n := f.count(`SELECT count(*) FROM records`); n != 0 {
		t.Errorf("%d records, want 0", n)
	}
}

func mappings(rows ...string) []records.EmployeeMapping {
	var ms []records.EmployeeMapping
	for i, r := range rows {
		p := strings.Split(r, ",")
		m := records.EmployeeMapping{Line: i + 2, EmployeeRef: p[0], EmployeeID: p[1]}
		if len(p) > 2 {
			m.Name = p[2]
		}
		ms = append(ms, m)
	}
	return ms
}

// TestImportEmployeesConflicts: an import that would change a mapping or
// give one employee_id to two references is refused whole, one conflict per
// line; the same import again is a no-op.
func TestImportEmployeesConflicts(t *testing.T) {
	f := newFixture(t, records.Partner{})
	if err := f.store.AddPartner(f.ctx, records.Partner{ID: "globex"}); err != nil {
		t.Fatal(err)
	}
	first := mappings("E1,W-1,Ann", "E2,W-2", "007,W-7")
	res, err := f.store.ImportEmployees(f.ctx, f.partner, first)
	if err != nil || res.Added != 3 {
		t.Fatalf("first import: %+v, %v", res, err)
	}
	if _, err := f.store.ImportEmployees(f.ctx, "globex", mappings("G1,G-1")); err != nil {
		t.Fatal(err)
	}
	f.ingest("pay-1.csv", empHeader+"E9,2026-11,BASE,1.00,USD\n") // E9 gets the derived id
	cases := map[string]struct {
		partner string
		rows    []records.EmployeeMapping
		lines   []int    // the lines reported, in order
		says    []string // what each message mentions
	}{
		"change of a mapping":               {"acme", mappings("E1,W-1", "E2,W-22"), []int{3}, []string{"already mapped to employee_id W-2"}},
		"change of a derived mapping":       {"acme", mappings("E9,W-9"), []int{2}, []string{"already mapped to employee_id " + derivedID("acme", "E9")}},
		"one id, two refs in the file":      {"acme", mappings("N1,W-50", "N2,W-50"), []int{3}, []string{"given to employee_ref N2 here and to N1 on line 2"}},
		"one ref, two ids in the file":      {"acme", mappings("N1,W-50", "N1,W-51"), []int{3}, []string{"employee_ref N1 is given employee_id W-51 here but W-50 on line 2"}},
		"id taken in the DB":                {"acme", mappings("N1,W-1"), []int{2}, []string{"already belongs to employee_ref E1 of partner acme"}},
		"id taken by another partner":       {"acme", mappings("N1,G-1"), []int{2}, []string{"already belongs to employee_ref G1 of partner globex"}},
		"ref of another partner is its own": {"globex", mappings("E1,W-1"), []int{2}, []string{"of partner acme"}},
		"a derived-looking id":              {"acme", mappings("N1," + derivedID("acme", "N2")), []int{2}, []string{"form of the ids payintake derives"}},
		"every conflict listed": {"acme", mappings("E1,W-100", "N1,W-2", "N2,W-60", "N3,W-60"),
			[]int{2, 3, 5}, []string{"already mapped", "already belongs", "to N2 on line 4"}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			before := f.count(`SELECT count(*) FROM employees`)
			_, err := f.store.ImportEmployees(f.ctx, tc.partner, tc.rows)
			var refused *records.ImportRefusedError
			if !errors.As(err, &refused) {
				t.Fatalf("import not refused: %v", err)
			}
			if len(refused.Conflicts) != len(tc.lines) {
				t.Fatalf("%d conflicts, want %d: %+v", len(refused.Conflicts), len(tc.lines), refused.Conflicts)
			}
			for i, c := range refused.Conflicts {
				if c.Line != tc.lines[i] || !strings.Contains(c.Message, tc.says[i]) || !strings.HasPrefix(c.Message, fmt.Sprintf("line %d: ", c.Line)) {
					t.Errorf("conflict %d: line %d %q; want line %d mentioning %q", i, c.Line, c.Message, tc.lines[i], tc.says[i])
				}
			}
			if n := f.count(`SELECT count(*) FROM employees`); n != before {
				t.Errorf("a refused import stored %d mapping(s)", n-before)
			}
		})
	}
	// Re-importing the same mappings (a derived one included, as it is) is a no-op.
	again := append(mappings("E1,W-1,Ann", "E2,W-2", "007,W-7", "E1,W-1,Ann"), records.EmployeeMapping{Line: 6, EmployeeRef: "E9", EmployeeID: derivedID("acme", "E9")})
	res, err = f.store.ImportEmployees(f.ctx, f.partner, again)
	if err != nil || res != (records.ImportResult{Unchanged: 4}) {
		t.Errorf("re-import: %+v, %v; want 4 unchanged", res, err)
	}
	if n := f.count(`SELECT count(*) FROM employees WHERE partner_id = 'acme'`); n != 4 {
		t.Errorf("%d mappings of acme, want 4", n)
	}
}

// TestConcurrentImports: imports racing for the same employee_id, for one
// partner and across partners, end with exactly one owner and the others
// refused, never an error and never two owners.
func TestConcurrentImports(t *testing.T) {
	f := newFixture(t, records.Partner{})
	partners := []string{"acme", "p1", "p2", "p3"}
	for _, p := range partners[1:] {
		if err := f.store.AddPartner(f.ctx, records.Partner{ID: p}); err != nil {
			t.Fatal(err)
		}
	}
	for round := 0; round < 5; round++ {
		id := fmt.Sprintf("W-race-%d", round)
		var wg sync.WaitGroup
		errs := make([]error, 2*len(partners))
		for i := range errs {
			wg.Add(1)
			go func() {
				defer wg.Done()
				// Two imports per partner: the same one twice (idempotent) for
				// different references per partner.
				p := partners[i/2]
				_, errs[i] = f.store.ImportEmployees(f.ctx, p, mappings(fmt.Sprintf("R%d-%s,%s", round, p, id)))
			}()
		}
		wg.Wait()
		ok, refused := 0, 0
		for _, err := range errs {
			var r *records.ImportRefusedError
			switch {
			case err == nil:
				ok++
			case errors.As(err, &r):
				refused++
			default:
				t.Errorf("round %d: import failed: %v", round, err)
			}
		}
		if n := f.count(`SELECT count(*) FROM employees WHERE employee_id = $1`, id); n != 1 {
			t.Errorf("round %d: %d owners of %s, want 1", round, n, id)
		}
		if ok != 2 || refused != len(errs)-2 {
			t.Errorf("round %d: %d imports succeeded and %d refused, want 2 and %d", round, ok, refused, len(errs)-2)
		}
	}
}

// TestRecordsAlwaysHaveEmployees: the database refuses a record whose
// employee_ref has no mapping, and the deletion of a mapping.
func TestRecordsAlwaysHaveEmployees(t *testing.T) {
	f := newFixture(t, records.Partner{})
	_, err := f.store.Pool().Exec(f.ctx, `INSERT INTO records (partner_id, employee_ref, pay_period, component, amount, currency, content_hash)
		VALUES ('acme', 'NOBODY', '2026-11', 'BASE', 1, 'USD', '\x00')`)
	if err == nil || !strings.Contains(err.Error(), "has no employee mapping") {
		t.Errorf("record without a mapping: %v", err)
	}
	f.ingest("pay-1.csv", empHeader+"E1,2026-11,BASE,1.00,USD\n")
	if _, err := f.store.Pool().Exec(f.ctx, `DELETE FROM employees WHERE employee_ref = 'E1'`); err == nil || !strings.Contains(err.Error(), "cannot be deleted") {
		t.Errorf("deleting a mapping: %v", err)
	}
	if _, err := f.store.Pool().Exec(f.ctx, `UPDATE employees SET employee_id = 'W-X' WHERE employee_ref = 'E1'`); err == nil || !strings.Contains(err.Error(), "cannot be changed") {
		t.Errorf("changing a mapping: %v", err)
	}
}

// TestEmployeeIDCheck: the database keeps employee_id to 1..128 characters
// with no control character, whoever writes it.
func TestEmployeeIDCheck(t *testing.T) {
	f := newFixture(t, records.Partner{})
	for id, ok := range map[string]bool{"W-1": true, "李四-1": true, strings.Repeat("é", 128): true,
		"": false, strings.Repeat("é", 129): false, "W\t1": false, "W\x001": false, "W\u00851": false} {
		_, err := f.store.Pool().Exec(f.ctx, `INSERT INTO employees (partner_id, employee_ref, employee_id, source) VALUES ('acme', $1, $1, 'import')`, id)
		if id == "W\x001" { // PostgreSQL text cannot hold NUL at all
			if err == nil {
				t.Errorf("employee_id with NUL stored")
			}
			continue
		}
		if (err == nil) != ok {
			t.Errorf("employee_id %q: stored = %v, want %v (%v)", id, err == nil, ok, err)
		}
	}
}
