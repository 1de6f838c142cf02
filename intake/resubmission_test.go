package intake_test

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/payintake/payintake/bench"
	"github.com/payintake/payintake/records"
)

// unchangedSkipCounter counts the result files built for a classified
// left without the unchanged rows: n by the statement that joins stage
// with it (resultWithUnchangedSQL), merged by staging's lines merged with
// classified's (storeMerged).
type unchangedSkipCounter struct{ n, merged atomic.Int64 }

func (c *unchangedSkipCounter) TraceQueryStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceQueryStartData) context.Context {
	if strings.Contains(d.SQL, "INSERT INTO envelope_results") && strings.Contains(d.SQL, "classified_row") {
		c.n.Add(1)
	}
	if strings.Contains(d.SQL, "SELECT row_no, result_line FROM classified ORDER BY row_no") {
		c.merged.Add(1)
	}
	return ctx
}

func (c *unchangedSkipCounter) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

// A file without a sequence number is classified without its unchanged
// rows (they are not written into classified; their lines come from
// stage), a file with one keeps them (their records' last_seq moves on).
// Each series of files here goes to two databases that differ only in
// that: partner acme of database a has no file pattern, b's takes a
// sequence number from the same names, which no file here has out of
// order. Every file's result file must be the same bytes, its counts the
// same, and the records (but last_seq), exceptions and history the same
// row for row; and database a must have taken the path without the
// unchanged rows whenever a file had one: by merging staging's result
// lines with classified's, unless a cell's quoting was left to the
// database (a non-ASCII first or last character), which then joins stage
// with classified.
func TestResubmissionWithoutUnchangedRowsMatchesClassify(t *testing.T) {
	generated := func(rows, changeEvery int) string {
		var b bytes.Buffer
		if _, err := (bench.File{Rows: rows, Offset: 1, ChangeEvery: changeEvery}).WriteTo(&b); err != nil {
			t.Fatal(err)
		}
		return b.String()
	}
	first := firstFileHeader + cleanRows("2026-10") + cleanRows("2026-11")
	for name, tc := range map[string]struct {
		policy string
		files  []string
		// merged is how many files' results a builds from staging's
		// lines merged with classified's; the other files with unchanged
		// rows are built by the database.
		merged int
		// after runs on both databases after the file of that index.
		after map[int]func(f *fixture)
	}{
		"mixed outcomes": {
			policy: records.UnknownHold,
			files: []string{
				first,
				firstFileHeader + strings.Join([]string{
					"E1,2026-11,BASE,1001.50,USD,,,", // unchanged
					"E2,2026-11,BASE,2222.00,USD,,,", // updated
					"E3,2026-11,BONUS,30,usd,,,",     // a key twice: both rejected
					"E3,2026-11,BONUS,31,usd,,,",
					"E4,2026-11,BASE,abc,USD,,,",             // invalid: rejected
					"E5,2026-11,BASE, 1005.50 ,usd,,,",       // unchanged, echoed as sent
					"E77,2026-11,BASE,1.00,USD,,,",           // unknown employee: held
					"E6,2026-11,OVERTIME,10.00,USD,,,",       // new key: created
					"E1,2026-10,BASE,1001.50,USD,,,",         // locked and identical: unchanged
					"E2,2026-10,BASE,9.00,USD,,,",            // locked record: held
					"E6,2026-10,OVERTIME,10.00,USD,,,",       // new key in a closed period: held
					`"E,6",2026-11,BASE,"=1+1",USD,,,`,       // invalid, quoted cells echoed
					"\u00a0E6\u00a0,2026-11,BONUS,60,USD,,,", // unchanged, invisible spaces
					"Zoé,2026-11,BASE,1.00,USD,,,",           // unknown employee, a non-ASCII edge: held
				}, "\r\n") + "\r\n",
				// Every row unchanged: classified is left empty.
				strings.Replace(first, "E2,2026-11,BASE,1002.50,USD,,,\r\n", "", 1),
				// The same again, with the exception still open.
				firstFileHeader + "E2,2026-10,BASE,9.00,USD,,,\r\nE1,2026-10,BASE,1001.50,USD,,,\r\n",
			},
			merged: 2, // not the second file: Zoé's quoting is left to the database
			after: map[int]func(f *fixture){0: func(f *fixture) {
				if _, err := f.store.LockPeriod(f.ctx, f.partner, "2026-10", records.LockApproved, "ops"); err != nil {
					f.t.Fatal(err)
				}
			}},
		},
		"a generated export, 1% changed": {
			policy: records.UnknownCreate, merged: 3,
			files: []string{generated(20000, 0), generated(20000, 100), generated(20000, 100), generated(20000, 7)},
		},
	} {
		t.Run(name, func(t *testing.T) {
			a, ca := resubmissionFixture(t, records.Partner{UnknownEmployee: tc.policy})
			b, cb := resubmissionFixture(t, records.Partner{UnknownEmployee: tc.policy, FilePattern: `^pay-(?P<seq>[0-9]+)\.csv$`})
			skipped := 0
			for i, file := range tc.files {
				seq := i + 7
				fileName := fmt.Sprintf("pay-%d.csv", seq)
				var outs [2]records.Envelope
				for j, f := range []*fixture{a, b} {
					_, outs[j] = f.ingest(fileName, file)
					if tc.after[i] != nil {
						tc.after[i](f)
					}
				}
				if outs[1].Seq == nil || outs[0].Seq != nil {
					t.Fatalf("file %d: sequence numbers %v and %v, want none in a and one in b", i, outs[0].Seq, outs[1].Seq)
				}
				ra, rb := a.result(outs[0]), b.result(outs[1])
				if ra != rb {
					t.Errorf("file %d: result files differ:\nwithout unchanged rows:\n%s\nclassify:\n%s", i, ra, rb)
				}
				if len(outs[0].Counts) == 0 || !equalCounts(outs[0].Counts, outs[1].Counts) {
					t.Errorf("file %d: counts %v, classify %v", i, outs[0].Counts, outs[1].Counts)
				}
				ea, eb := resubmissionEffects(a), resubmissionEffects(b)
				for _, k := range []string{"records", "exceptions", "history"} {
					if ea[k] != eb[k] {
						t.Errorf("file %d: %s differ:\nwithout unchanged rows: %s\nclassify:               %s", i, k, ea[k], eb[k])
					}
				}
				if n := outs[0].Counts["unchanged"]; n > 0 {
					skipped++
				}
				// In b, the file's sequence number is on every record it
				// created, updated or found unchanged, and on no other.
				c := outs[1].Counts
				if n := b.count(`SELECT count(*) FROM records WHERE last_seq = $1`, seq); n != c["created"]+c["updated"]+c["unchanged"] {
					t.Errorf("file %d: %d record(s) of b have its sequence number, want %d", i, n, c["created"]+c["updated"]+c["unchanged"])
				}
				if got := int(ca.n.Load() + ca.merged.Load()); got != skipped {
					t.Errorf("file %d: database a left the unchanged rows out %d time(s), want %d", i, got, skipped)
				}
				if n := cb.n.Load() + cb.merged.Load(); n != 0 {
					t.Errorf("file %d: database b (sequence numbers) left the unchanged rows out %d time(s)", i, n)
				}
				t.Logf("file %d: %v", i, outs[0].Counts)
			}
			if skipped < 2 {
				t.Fatalf("only %d file(s) had unchanged rows", skipped)
			}
			if got := int(ca.merged.Load()); got != tc.merged {
				t.Errorf("database a merged staging's result lines for %d file(s), want %d", got, tc.merged)
			}
		})
	}
}

func equalCounts(a, b map[string]int) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

// resubmissionFixture is a database with partner acme (p) and employees
// E1..E6 mapped; its counter counts from then on.
func resubmissionFixture(t *testing.T, p records.Partner) (*fixture, *unchangedSkipCounter) {
	t.Helper()
	c := &unchangedSkipCounter{}
	return tracedFixture(t, p, records.Options{QueryTracer: c}, "E1", "E2", "E3", "E4", "E5", "E6"), c
}

// resubmissionEffects reads back the records (but their last_seq),
// exceptions and history of the database (ids and clock times left out,
// the rest in a fixed order).
func resubmissionEffects(f *fixture) map[string]string {
	f.t.Helper()
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
		if err := f.store.Pool().QueryRow(f.ctx, q).Scan(&v); err != nil {
			f.t.Fatalf("%s: %v", k, err)
		}
		out[k] = string(v)
	}
	return out
}
