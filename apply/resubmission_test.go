package apply_test

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/payintake/payintake/apply/applytest"
	"github.com/payintake/payintake/bench"
	"github.com/payintake/payintake/pgserver/pgtest"
	"github.com/payintake/payintake/records"
)

// A resubmission is applied three ways, which must agree: compared on its
// keys first (applyCompared: only the rows whose key has no
// record or whose content changed are staged whole), staged whole and
// classified without its unchanged rows (they are not written into
// classified; their lines come from staging's), and staged whole and
// classified with every row (a file with a sequence number, whose
// unchanged records' last_seq moves on). Each series of files here goes
// to four databases that differ only in that: database a's files have
// no sequence number; c is a staging every file whole
// (apply.Options.StageWholeFiles); b's files have sequence numbers, none
// out of order, and b stages every file whole; d is b comparing keys first (its unchanged records'
// last_seq moved on by one statement over the compared keys). b is the
// reference. Every file's result file must be the same bytes, its counts
// the same, the records (but last_seq), exceptions and history the same
// row for row, and d's last_seq b's. Databases a and d must have compared
// tc.compared files on their keys (and staged the others whole: a
// repeated key, a rejected row or employee of an all-or-nothing file); c
// must have left the unchanged rows out of classified whenever a file had
// one (its result file is staging's lines merged with classify's
// decisions).
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
		partner records.Partner
		files   []string
		// compared is how many files a applies compared on their keys.
		compared int
		// after runs on every database after the file of that index.
		after map[int]func(t *testing.T, h *applytest.Harness)
	}{
		"mixed outcomes": {
			partner: records.Partner{UnknownEmployee: records.UnknownHold},
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
				// The first file's rows mixed with every outcome but a
				// repeated key, compared.
				firstFileHeader + strings.Join([]string{
					"E77,2026-11,BASE,1.00,USD,,,",     // unknown employee: held again
					"E1,2026-11,BASE,1001.50,USD,,,",   // unchanged
					"E4,2026-11,BASE,abc,USD,,,",       // invalid: rejected
					"E2,2026-10,BASE,9.00,USD,,,",      // locked record: held, exception kept
					"É4,2026-11,BASE,abc,USD,,,",       // invalid, a non-ASCII edge
					"E2,2026-11,BASE,2223.00,USD,,,",   // updated again
					"E6,2026-11,OVERTIME,11.00,USD,,,", // updated
					"E6,2026-12,OVERTIME,11.00,USD,,,", // new period: created
				}, "\r\n") + "\r\n",
			},
			compared: 3, // not the second file (a repeated key)
			after: map[int]func(t *testing.T, h *applytest.Harness){0: func(t *testing.T, h *applytest.Harness) {
				if _, err := h.Store.LockPeriod(context.Background(), h.Partner, "2026-10", records.LockApproved, "ops"); err != nil {
					t.Fatal(err)
				}
			}},
		},
		"cells quoted by the database": {
			partner: records.Partner{UnknownEmployee: records.UnknownCreate},
			files: []string{
				first + "Zoé,2026-11,BASE,1.00,USD,,,\r\n",
				// Zoé unchanged, an invalid row and a changed one whose
				// cells Go leaves to the database.
				first + "Zoé,2026-11,BASE,1.00,USD,,,\r\nÉ4,2026-11,BASE,abc,USD,,,\r\nE1,2026-12,BASE,é,USD,,,\r\n" +
					"Åsa,2026-11,BASE,2.00,USD,,,\r\n",
				strings.Replace(first, "E1,2026-11,BASE,1001.50", "E1,2026-11,BASE,1.50", 1) + "Zoé,2026-11,BASE,1.50,USD,,,\r\n",
			},
			compared: 2,
		},
		"all or nothing": {
			partner: records.Partner{UnknownEmployee: records.UnknownReject, Mode: records.ModeAllOrNothing},
			files: []string{
				first,
				strings.Replace(first, "E2,2026-11,BASE,1002.50", "E2,2026-11,BASE,1002.75", 1), // compared
				first + "E77,2026-11,BASE,1.00,USD,,,\r\n",                                      // an unknown employee: rejected whole
				first + "E4,2026-11,BASE,abc,USD,,,\r\n",                                        // an invalid row: rejected whole
				first + "E1,2026-11,BASE,1.00,USD,,,\r\n",                                       // a repeated key: rejected whole
				first,
			},
			compared: 2,
		},
		"a generated export, 1% changed": {
			partner: records.Partner{UnknownEmployee: records.UnknownCreate}, compared: 3,
			files: []string{generated(20000, 0), generated(20000, 100), generated(20000, 100), generated(20000, 7)},
		},
		// A file of more than 1 MiB whose first rows changed is staged
		// whole (the sample), then the same again is compared, twice.
		"a generated export, every row changed": {
			partner: records.Partner{UnknownEmployee: records.UnknownCreate}, compared: 2,
			files: []string{generated(20000, 0), generated(20000, 1), generated(20000, 1), generated(20000, 1)},
		},
	} {
		t.Run(name, func(t *testing.T) {
			a, ca := resubmissionFixture(t, tc.partner, false)
			c, cc := resubmissionFixture(t, tc.partner, true)
			b, cb := resubmissionFixture(t, tc.partner, true)
			d, cd := resubmissionFixture(t, tc.partner, false)
			skipped := 0
			for i, file := range tc.files {
				seq := int64(i + 7)
				var outs [4]records.Envelope
				skipsBefore := cc.SkipUnchanged.Load()
				for j, h := range []*applytest.Harness{a, b, c, d} {
					var s *int64 // b and d number their files
					if j == 1 || j == 3 {
						s = &seq
					}
					outs[j] = h.SendCSV(t, file, s)
					if tc.after[i] != nil {
						tc.after[i](t, h)
					}
				}
				if outs[1].Seq == nil || outs[3].Seq == nil || outs[0].Seq != nil || outs[2].Seq != nil {
					t.Fatalf("file %d: sequence numbers %v, %v, %v and %v, want none in a and c and one in b and d", i, outs[0].Seq, outs[1].Seq, outs[2].Seq, outs[3].Seq)
				}
				rb, eb := b.Result(t, outs[1]), applytest.Effects(t, b.Store)
				for j, way := range map[int]string{0: "compared", 2: "without unchanged rows", 3: "compared with sequence numbers"} {
					h := []*applytest.Harness{a, b, c, d}[j]
					if r := h.Result(t, outs[j]); r != rb {
						t.Errorf("file %d: result files differ:\n%s:\n%s\nclassify:\n%s", i, way, r, rb)
					}
					if len(outs[j].Counts) == 0 || !equalCounts(outs[j].Counts, outs[1].Counts) {
						t.Errorf("file %d: counts %s %v, classify %v", i, way, outs[j].Counts, outs[1].Counts)
					}
					e := applytest.Effects(t, h.Store)
					for _, k := range []string{"records", "exceptions", "history"} {
						if e[k] != eb[k] {
							t.Errorf("file %d: %s differ:\n%s: %s\nclassify: %s", i, k, way, e[k], eb[k])
						}
					}
				}
				if n := outs[2].Counts["unchanged"]; n > 0 {
					skipped++
					if got := cc.SkipUnchanged.Load() - skipsBefore; got != 1 {
						t.Errorf("file %d: database c left the unchanged rows out %d time(s), want 1", i, got)
					}
				}
				// In b, the file's sequence number is on every record it
				// created, updated or found unchanged, and on no other.
				cnt := outs[1].Counts
				for name, h := range map[string]*applytest.Harness{"b": b, "d": d} {
					if n := pgtest.Count(context.Background(), t, h.Store, `SELECT count(*) FROM records WHERE last_seq = $1`, seq); n != cnt["created"]+cnt["updated"]+cnt["unchanged"] {
						t.Errorf("file %d: %d record(s) of %s have its sequence number, want %d", i, n, name, cnt["created"]+cnt["updated"]+cnt["unchanged"])
					}
				}
				if lb, ld := lastSeqs(t, b), lastSeqs(t, d); lb != ld {
					t.Errorf("file %d: the records' last_seq differ:\ncompared: %s\nclassify: %s", i, ld, lb)
				}
				if n := cb.SkipUnchanged.Load() + cb.Keys.Load(); n != 0 {
					t.Errorf("file %d: database b (sequence numbers, staged whole) left the unchanged rows out or compared keys %d time(s)", i, n)
				}
				if n := cc.Keys.Load(); n != 0 {
					t.Errorf("file %d: database c (every file staged whole) compared keys %d time(s)", i, n)
				}
				t.Logf("file %d: %v", i, outs[0].Counts)
			}
			if skipped < 2 {
				t.Fatalf("only %d file(s) had unchanged rows", skipped)
			}
			for name, cx := range map[string]*applytest.ResubmissionCounter{"a": ca, "d": cd} {
				if got := int(cx.Keys.Load() - cx.KeysUndone.Load()); got != tc.compared {
					t.Errorf("database %s compared %d file(s) on their keys (%d tried), want %d", name, got, cx.Keys.Load(), tc.compared)
				}
			}
		})
	}
}

// lastSeqs reads back every record's last_seq, in the order of the key.
func lastSeqs(t *testing.T, h *applytest.Harness) string {
	t.Helper()
	var v []byte
	if err := h.Store.Pool().QueryRow(context.Background(), `SELECT jsonb_agg(jsonb_build_array(employee_ref, pay_period, component, last_seq)
		ORDER BY pay_period, employee_ref, component) FROM records`).Scan(&v); err != nil {
		t.Fatal(err)
	}
	return string(v)
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
// E1..E6 mapped, whose engine stages every file whole when stageWhole says
// so; its counter counts from then on.
func resubmissionFixture(t *testing.T, p records.Partner, stageWhole bool) (*applytest.Harness, *applytest.ResubmissionCounter) {
	t.Helper()
	c := &applytest.ResubmissionCounter{}
	return applytest.NewWith(t, applytest.Config{Partner: p, Employees: []string{"E1", "E2", "E3", "E4", "E5", "E6"},
		Tracer: c, StageWholeFiles: stageWhole}), c
}
