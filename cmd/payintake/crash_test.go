package main

import (
	"bytes"
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/payintake/payintake/internal/fault"
	"github.com/payintake/payintake/pgserver/pgtest"
	"github.com/payintake/payintake/records"
)

// crashRuns is how many times each stage is crashed.
const crashRuns = 5

// TestCrashAnywhere SIGKILLs serve at each stage of a file's life, restarts
// it, and checks that every upload the server durably received reaches
// exactly one outcome: rows applied once, one complete result file
// (byte-identical to an uncrashed run), nothing half-applied; an upload cut
// off by the crash is never processed.
func TestCrashAnywhere(t *testing.T) {
	url := pgtest.New(t)
	st, err := records.Open(context.Background(), url, records.Options{MaxConns: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	dataDir := t.TempDir()
	const small, large = 500, 20000
	smallFile, largeFile := payrollFile("S", small), payrollFile("L", large)

	// The reference: the same files, never crashed.
	keys := addPartners(t, st, "reference")
	since := dbNow(t, st)
	srv := startServer(t, url, dataDir, nil, "--workers", "2")
	c := srv.login("reference", keys["reference"])
	for _, f := range []struct {
		name string
		data []byte
	}{{"small.csv", smallFile}, {"large.csv", largeFile}} {
		if err := c.upload(f.name, f.data); err != nil {
			t.Fatal(err)
		}
	}
	want := map[string][]byte{"small.csv": c.waitResult(t, "small.csv", time.Minute), "large.csv": c.waitResult(t, "large.csv", time.Minute)}
	checkResult(t, "reference small.csv", want["small.csv"], small, "created")
	checkResult(t, "reference large.csv", want["large.csv"], large, "created")
	srv.stopIdle(st, since, time.Minute)

	stages := []string{"mid-upload", fault.AfterReceive, fault.MidApply, fault.BeforeCommit, fault.AfterCommit}
	var lost, doubled, halfApplied, cutProcessed, retried, runs int
	start := time.Now()
	for _, stage := range stages {
		for run := range crashRuns {
			partner := fmt.Sprintf("p-%s-%d", stage, run)
			keys := addPartners(t, st, partner)
			name, data, rows := "small.csv", smallFile, small
			if stage == fault.MidApply {
				name, data, rows = "large.csv", largeFile, large
			}
			runs++
			if stage == "mid-upload" {
				// The server dies while the client is half-way through.
				srv := startServer(t, url, dataDir, nil, "--workers", "2")
				c := srv.login(partner, keys[partner])
				f, err := c.Create("/inbox/" + name)
				if err != nil {
					t.Fatal(err)
				}
				if _, err := f.Write(data[:len(data)/2]); err != nil {
					t.Fatal(err)
				}
				srv.kill()
				c.Close()
				since := dbNow(t, st)
				srv = startServer(t, url, dataDir, nil, "--workers", "2")
				// No waiting for an orphan sweep: the only thing a sweep takes
				// up is an envelope left "received" (intake/recover.go), and
				// the dead server's last transaction is over, so any such
				// envelope already shows here.
				l := audit(t, st, partner)
				if l.byStatus[records.StatusProcessed]+l.byStatus[records.StatusReceived] > 0 || l.records > 0 || l.results > 0 {
					cutProcessed++
					t.Errorf("%s run %d: a cut-off upload was taken as a file: %+v", stage, run, l)
				}
				// The partner sends it again, whole.
				c = srv.login(partner, keys[partner])
				if err := c.upload(name, data); err != nil {
					t.Fatal(err)
				}
				got := c.waitResult(t, name, time.Minute)
				l = audit(t, st, partner)
				lost, doubled, halfApplied = account(t, stage, run, l, got, want[name], rows, lost, doubled, halfApplied)
				srv.stopIdle(st, since, time.Minute)
				continue
			}
			srv := startServer(t, url, dataDir, []string{"PAYINTAKE_FAULT=" + stage}, "--workers", "2")
			c := srv.login(partner, keys[partner])
			acked := c.upload(name, data) == nil
			srv.waitKilled(time.Minute)
			c.Close()
			since := dbNow(t, st)
			srv = startServer(t, url, dataDir, nil, "--workers", "2")
			c = srv.login(partner, keys[partner])
			if !acked {
				// The client saw no answer to its close: like any client,
				// it sends the file again. A repeat if it was received.
				retried++
				if err := c.upload(name, data); err != nil {
					t.Fatal(err)
				}
			}
			got := c.waitResult(t, name, time.Minute)
			waitSettled(t, st, partner, time.Minute)
			l := audit(t, st, partner)
			lost, doubled, halfApplied = account(t, stage, run, l, got, want[name], rows, lost, doubled, halfApplied)
			srv.stopIdle(st, since, time.Minute)
		}
	}
	t.Logf("SUMMARY crash: SIGKILL at %d stages x %d runs = %d crashes in %v: %d lost, %d doubled, %d half-applied, %d cut-off uploads processed, %d uploads resent by the client (no answer to close)",
		len(stages), crashRuns, runs, time.Since(start).Round(time.Second), lost, doubled, halfApplied, cutProcessed, retried)
}

// account checks one crashed partner's ledger and result, and counts.
func account(t *testing.T, stage string, run int, l ledger, got, want []byte, rows int, lost, doubled, half int) (int, int, int) {
	t.Helper()
	switch {
	case l.byStatus[records.StatusReceived] > 0 || l.byStatus[records.StatusProcessed] == 0:
		lost++
		t.Errorf("%s run %d: lost: %+v", stage, run, l)
	case l.byStatus[records.StatusProcessed] > 1 || l.versions > 0 || l.history > 0 || l.records > rows:
		doubled++
		t.Errorf("%s run %d: applied twice: %+v", stage, run, l)
	case l.records != rows || l.results != 1:
		half++
		t.Errorf("%s run %d: half applied: %d records of %d, %d results: %+v", stage, run, l.records, rows, l.results, l)
	case !bytes.Equal(got, want):
		half++
		t.Errorf("%s run %d: result differs from the uncrashed one (%d bytes, want %d)", stage, run, len(got), len(want))
	}
	return lost, doubled, half
}
