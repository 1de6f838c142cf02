package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/csv"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pkg/sftp"

	"github.com/payintake/payintake/internal/eventually"
	"github.com/payintake/payintake/pgserver"
	"github.com/payintake/payintake/pgserver/pgtest"
	"github.com/payintake/payintake/records"
)

// openTestStore opens the test's own small pool, named so that the load
// test can tell its connections from serve's.
func openTestStore(t testing.TB, url string) *records.Store {
	t.Helper()
	st, err := records.Open(context.Background(), url+" application_name=reliability-test", records.Options{MaxConns: 2})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(st.Close)
	return st
}

// TestRepeatsAppliedOnce sends the same file 2, 10 and 50 times, in sequence
// and at the same moment, over one and over several connections, to two serve
// processes on one database: each is applied once, every result identical.
func TestRepeatsAppliedOnce(t *testing.T) {
	url := pgtest.New(t)
	st := openTestStore(t, url)
	keys := addPartners(t, st, "rep")
	key := keys["rep"]
	a := startServer(t, url, t.TempDir(), nil, "--workers", "2")
	b := startServer(t, url, t.TempDir(), nil, "--workers", "2")
	servers := []*server{a, b}
	const rows = 200
	type scenario struct {
		name       string
		times      int
		concurrent bool
		conns      int // connections, spread over both servers (1: server a only)
	}
	scenarios := []scenario{
		{"seq2.csv", 2, false, 1},
		{"seq10.csv", 10, false, 10},
		{"conc2.csv", 2, true, 2},
		{"conc10-one-conn.csv", 10, true, 1},
		{"conc50.csv", 50, true, 10},
		{"seq50.csv", 50, false, 5},
	}
	var failures atomic.Int64
	sent := 0
	start := time.Now()
	for i, sc := range scenarios {
		data := payrollFile(fmt.Sprintf("R%d-", i), rows)
		clients := make([]*client, sc.conns)
		for j := range clients {
			clients[j] = servers[j%2].login("rep", key)
			if sc.conns == 1 {
				clients[j] = a.login("rep", key)
			}
		}
		var wg sync.WaitGroup
		for k := range sc.times {
			c := clients[k%sc.conns]
			send := func() {
				if err := c.upload(sc.name, data); err != nil {
					failures.Add(1)
					t.Errorf("%s: upload %d: %v", sc.name, k, err)
				}
			}
			if sc.concurrent {
				wg.Go(send)
			} else {
				send()
			}
			sent++
		}
		wg.Wait()
		var first []byte
		for j, c := range clients {
			got := c.waitResult(t, sc.name, time.Minute)
			if first == nil {
				first = got
				checkResult(t, sc.name, got, rows, "created")
			} else if !bytes.Equal(got, first) {
				t.Errorf("%s: connection %d reads a different result", sc.name, j)
			}
		}
	}
	waitSettled(t, st, "rep", time.Minute)
	l := audit(t, st, "rep")
	applied := 0
	for _, sc := range scenarios {
		key := records.SubmissionKey(sc.name)
		applied += l.processed[key]
		if l.processed[key] != 1 {
			t.Errorf("%s: processed %d times", sc.name, l.processed[key])
		}
	}
	if want := len(scenarios) * rows; l.records != want || l.versions != 0 || l.history != 0 {
		t.Errorf("records %d (want %d), updated %d, history %d", l.records, want, l.versions, l.history)
	}
	if l.byStatus[records.StatusRepeat] != sent-len(scenarios) {
		t.Errorf("repeats %d, want %d", l.byStatus[records.StatusRepeat], sent-len(scenarios))
	}
	t.Logf("SUMMARY repeats: %d uploads of %d files (2/10/50 times, sequential and simultaneous, 1-10 connections, 2 serve processes) in %v: %d applied, %d replays, %d upload errors, %d records (want %d), %d rows applied twice",
		sent, len(scenarios), time.Since(start).Round(time.Millisecond), applied, l.byStatus[records.StatusRepeat], failures.Load(),
		l.records, len(scenarios)*rows, l.history+l.versions)
}

// TestLoadManyPartners has 20 partners upload 20 files each at once (mixed
// sizes) to one serve with 2 workers and at most 8 database connections.
func TestLoadManyPartners(t *testing.T) {
	if testing.Short() {
		t.Skip("a load test: skipped by go test -short (.ci/run runs it)")
	}
	url := pgtest.New(t)
	st := openTestStore(t, url)
	const partners, files, workers, maxConns = 20, 20, 2, 8
	sizes := []int{5, 50, 500, 2000}
	ids := make([]string, partners)
	for i := range ids {
		ids[i] = fmt.Sprintf("load%02d", i)
	}
	keys := addPartners(t, st, ids...)
	srv := startServer(t, url, t.TempDir(), nil, "--workers", fmt.Sprint(workers), "--db-max-conns", fmt.Sprint(maxConns))

	// Watch the database while the load runs: serve's connections and the
	// jobs running at once.
	stopWatch := make(chan struct{})
	var peakConns, peakRunning int
	var watch sync.WaitGroup
	watch.Go(func() {
		for {
			var conns, running int
			// Files being applied hold their partner's lock (records.PartnerLock);
			// advisory locks are cluster-wide, other tests' databases share it.
			_ = st.Pool().QueryRow(context.Background(), `SELECT
				(SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()
					AND backend_type = 'client backend' AND application_name <> 'reliability-test'),
				(SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND classid = 7310 AND granted
					AND database = (SELECT oid FROM pg_database WHERE datname = current_database()))`).Scan(&conns, &running)
			peakConns, peakRunning = max(peakConns, conns), max(peakRunning, running)
			select {
			case <-stopWatch:
				return
			case <-time.After(100 * time.Millisecond):
			}
		}
	})

	start := time.Now()
	var errs, refused atomic.Int64
	var totalRows, totalBytes atomic.Int64
	var wg sync.WaitGroup
	for p, id := range ids {
		for half := range 2 { // two connections per partner
			wg.Go(func() {
				// At most 10 logins at once per address: the others wait
				// for a slot. A login that still fails is retried, as a
				// partner's client would, and counted.
				var c *client
				var err error
				for try := 0; ; try++ {
					if c, err = srv.dial(id, keys[id]); err == nil {
						break
					}
					refused.Add(1)
					if try == 50 {
						errs.Add(1)
						t.Errorf("%s: login: %v", id, err)
						return
					}
					// A partner's client backs off before it tries
					// again: the retry is what is tested, not a wait.
					time.Sleep(time.Duration(50+try*20) * time.Millisecond)
				}
				defer c.Close()
				for f := half; f < files; f += 2 {
					n := sizes[(p+f)%len(sizes)]
					data := payrollFile(fmt.Sprintf("F%02d-", f), n)
					if err := c.upload(fmt.Sprintf("run-%02d.csv", f), data); err != nil {
						errs.Add(1)
						t.Errorf("%s: upload %d: %v", id, f, err)
						continue
					}
					totalRows.Add(int64(n))
					totalBytes.Add(int64(len(data)))
				}
			})
		}
	}
	wg.Wait()
	uploaded := time.Since(start)
	for _, id := range ids {
		waitSettled(t, st, id, 3*time.Minute)
	}
	elapsed := time.Since(start)
	close(stopWatch)
	watch.Wait()
	var records, processed, wrong int
	for p, id := range ids {
		l := audit(t, st, id)
		records += l.records
		processed += l.byStatus["processed"]
		want := 0
		for f := range files {
			want += sizes[(p+f)%len(sizes)]
		}
		if l.records != want || l.byStatus["processed"] != files || len(l.byStatus) != 1 {
			wrong++
			t.Errorf("%s: %d records (want %d), envelopes %v", id, l.records, want, l.byStatus)
		}
	}
	// Every partner reads its results.
	for _, id := range ids[:3] {
		c := srv.login(id, keys[id])
		ents, err := c.ReadDir("/results")
		if err != nil || len(ents) != files {
			t.Errorf("%s: %d results, %v", id, len(ents), err)
		}
	}
	hwm := srv.vmHWM()
	if peakConns > maxConns {
		t.Errorf("serve used %d database connections, more than --db-max-conns %d", peakConns, maxConns)
	}
	if peakRunning > workers {
		t.Errorf("%d files processed at once, more than --workers %d", peakRunning, workers)
	}
	if hwm > 400<<20 {
		t.Errorf("serve peak RSS %d MiB", hwm>>20)
	}
	if !srv.healthy() {
		t.Error("serve unhealthy after the load")
	}
	if n := refused.Load(); n != 0 {
		t.Errorf("%d logins turned away: a burst from one address should wait for a login slot, not be reset", n)
	}
	t.Logf("SUMMARY load: %d partners x %d files (%d rows, %.1f MiB) at once on %d connections: all received in %v, all processed in %v; %d processed, %d records, %d errors, %d partners wrong; %d logins turned away (over 10 at once from one address wait for a slot); peak %d DB connections (limit %d), peak %d files processed at once (limit %d), serve peak RSS %d MiB",
		partners, files, totalRows.Load(), float64(totalBytes.Load())/(1<<20), partners*2, uploaded.Round(time.Millisecond), elapsed.Round(time.Millisecond),
		processed, records, errs.Load(), wrong, refused.Load(), peakConns, maxConns, peakRunning, workers, hwm>>20)
}

// resultCodes parses a result file and counts (outcome, code) pairs.
func resultCodes(t testing.TB, res []byte) (rows [][]string, codes map[string]int) {
	t.Helper()
	r := csv.NewReader(bytes.NewReader(res))
	r.FieldsPerRecord = 11
	all, err := r.ReadAll()
	if err != nil {
		t.Fatalf("result is not valid CSV: %v", err)
	}
	codes = map[string]int{}
	for _, row := range all[1:] {
		codes[row[2]+"/"+row[8]]++
	}
	return all[1:], codes
}

// TestHostileInput sends files built to hurt through SFTP: each gets a clear
// result, the server stays healthy and its memory bounded.
func TestHostileInput(t *testing.T) {
	url := pgtest.New(t)
	st := openTestStore(t, url)
	keys := addPartners(t, st, "hostile")
	srv := startServer(t, url, t.TempDir(), nil, "--workers", "2", "--max-file-size", "128MiB")
	c := srv.login("hostile", keys["hostile"], sftp.UseConcurrentWrites(true))
	const hdr = "employee_ref,pay_period,component,amount,currency\n"
	repeat := func(s string, n int) string { return strings.Repeat(s, n) }
	const bombRows = 200_000
	kb := make([]byte, 5000)
	_, _ = rand.Read(kb)
	longKey := hex.EncodeToString(kb)
	cases := []struct {
		name string
		data string
		want string // outcome/code the result must hold (every row, for file-level codes)
		rows int    // result rows expected (0: one file-level row)
	}{
		{"invalid-utf8.csv", hdr + "E1,2026-11,BASE,\xff\xfe12,USD\n", "rejected/invalid_encoding", 0},
		{"line-100mb.csv", hdr + "E1,2026-11,BASE," + repeat("1", 100<<20) + ",USD\n", "rejected/line_too_long", 0},
		{"million-columns.csv", strings.TrimSuffix(hdr, "\n") + repeat(",x", 1_000_000) + "\n", "rejected/", 0},
		{"nul.csv", hdr + "E1\x00,2026-11,BASE,1,USD\n", "rejected/nul_byte", 0},
		{"header-only.csv", hdr, "rejected/no_rows", 0},
		{"empty.csv", "", "rejected/empty_file", 0},
		{"deep-quotes.csv", hdr + `"` + repeat(`""`, 200_000) + `",2026-11,BASE,1,USD` + "\n", "rejected/invalid_identifier", 1},
		{"quoted-newlines.csv", hdr + `"E` + repeat("\n", 100_000) + `1",2026-11,BASE,1,USD` + "\n", "rejected/invalid_identifier", 1},
		// A key longer than PostgreSQL can index once made the whole file fail on every retry.
		{"long-key.csv", hdr + longKey + ",2026-11,BASE,1,USD\n", "rejected/invalid_identifier", 1},
		// Echoed values that a spreadsheet would run are escaped; the valid
		// row with a formula-looking pay period (E2) is created.
		{"formula.csv", hdr + "=cmd|' /C calc'!A0,2026-11,BASE,x,USD\n" + "E2,@SUM(A1),BASE,1,USD\n" +
			"E3,2026-11,+HYPERLINK(\"x\"),1,USD\n" + "E4,2026-11,BASE,=1+1,USD\n" + "E5,2026-11,BASE,-2+3,\tUSD\n", "", 5},
		{"bomb.csv", hdr + repeat("x\n", bombRows), "rejected/missing_value", bombRows},
	}
	start := time.Now()
	clear := 0
	for _, tc := range cases {
		if err := c.upload(tc.name, []byte(tc.data)); err != nil {
			t.Fatalf("%s: upload: %v", tc.name, err)
		}
		res := c.waitResult(t, tc.name, 2*time.Minute)
		rows, codes := resultCodes(t, res)
		want := max(tc.rows, 1)
		ok := len(rows) == want
		if tc.want != "" {
			n := 0
			for k, v := range codes {
				if strings.HasPrefix(k, tc.want) {
					n += v
				}
			}
			ok = ok && n == want
		}
		for _, r := range rows {
			for _, cell := range r[3:8] {
				if cell != "" && strings.ContainsRune("=+@\t\r", rune(cell[0])) {
					ok = false
					t.Errorf("%s: result echoes a formula: %q", tc.name, cell)
				}
			}
			if r[10] == "" && r[2] == "rejected" {
				ok = false
				t.Errorf("%s: rejected without a message: %q", tc.name, r)
			}
		}
		if ok {
			clear++
		} else {
			t.Errorf("%s: %d result rows (want %d), codes %v", tc.name, len(rows), want, codes)
		}
		t.Logf("%s (%d bytes): %v", tc.name, len(tc.data), codes)
	}
	if l := audit(t, st, "hostile"); l.records != 1 {
		t.Errorf("hostile files wrote %d records, want 1 (formula.csv's E2)", l.records)
	}
	// Still healthy: a normal file goes through.
	if err := c.upload("normal.csv", payrollFile("N", 10)); err != nil {
		t.Fatal(err)
	}
	checkResult(t, "normal.csv", c.waitResult(t, "normal.csv", time.Minute), 10, "created")
	hwm := srv.vmHWM()
	if hwm > 400<<20 {
		t.Errorf("serve peak RSS %d MiB after hostile files", hwm>>20)
	}
	healthy := srv.healthy() && srv.alive()

	// Over the size limit: refused while it is sent, never buffered.
	lim := startServer(t, url, t.TempDir(), nil, "--workers", "1", "--max-file-size", "1MiB")
	lc := lim.login("hostile", keys["hostile"])
	big := []byte(repeat("E9,2026-11,BASE,1,USD\n", 150_000)) // 3.3 MB
	err := lc.upload("too-big.csv", big)
	refused := err != nil && strings.Contains(err.Error(), "larger than the limit of 1 MiB")
	if !refused {
		t.Errorf("over-limit upload: %v", err)
	}
	if _, err := lc.result("too-big.csv"); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("an over-limit upload has a result: %v", err)
	}
	left, _ := os.ReadDir(filepath.Join(lim.dataDir, "spool"))
	if len(left) != 0 {
		t.Errorf("spool keeps %d files after a refused upload", len(left))
	}
	t.Logf("SUMMARY hostile: %d/%d hostile files got a clear result (file-level code or one row per data row, no formula echoed, only the one valid row applied) in %v; over-limit upload refused: %v; server healthy: %v; serve peak RSS %d MiB (with a 100 MiB single-line file)",
		clear, len(cases), time.Since(start).Round(time.Millisecond), refused, healthy, hwm>>20)
}

// TestDatabaseOutage stops the database under a running serve and starts it
// again: uploads during the outage are refused with a clear error (or
// accepted durably), nothing accepted is lost, and serve recovers by itself.
func TestDatabaseOutage(t *testing.T) {
	ctx := context.Background()
	pgDir := t.TempDir()
	for _, d := range []string{filepath.Dir(pgDir), pgDir} { // the cluster may run as user postgres
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	pg, err := pgserver.Start(ctx, pgserver.Options{DataDir: pgDir})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = pg.Stop(context.Background()) })
	url := pg.URL()
	srv := startServer(t, url, t.TempDir(), nil, "--workers", "2")
	st := openTestStore(t, url)
	keys := addPartners(t, st, "out")
	key := keys["out"]
	c := srv.login("out", key)
	if err := c.upload("before.csv", payrollFile("B", 100)); err != nil {
		t.Fatal(err)
	}
	c.waitResult(t, "before.csv", time.Minute)
	// A file accepted an instant before the database goes away.
	if err := c.upload("racing.csv", payrollFile("R", 5000)); err != nil {
		t.Fatal(err)
	}
	if err := pg.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	outage := time.Now()
	// During the outage: an open session gets a clear error; a new login
	// is refused; readiness says so; the process stays up.
	duringErr := c.upload("during.csv", payrollFile("D", 100))
	accepted := duringErr == nil
	if !accepted && !strings.Contains(duringErr.Error(), "send it again") {
		t.Errorf("upload during the outage: unclear error %v", duringErr)
	}
	_, listErr := c.ReadDir("/results")
	if listErr == nil || !strings.Contains(listErr.Error(), "try again later") {
		t.Errorf("listing results during the outage: %v", listErr)
	}
	_, loginErr := srv.dial("out", key)
	if loginErr == nil {
		t.Error("login succeeded without a database")
	}
	if code, _ := srv.get("/readyz"); code != 503 {
		t.Errorf("/readyz during the outage: %d", code)
	}
	// The process stays up while its background work keeps meeting the
	// dead database: waited for by counting the orphan sweep's failures
	// (one every --orphan-after/4), not by sleeping.
	const sweepFailed = "sweep for orphaned envelopes failed"
	seen := strings.Count(srv.logs.String(), sweepFailed)
	eventually.NoError(t, 30*time.Second, func() error {
		if !srv.alive() {
			t.Fatalf("serve died during the outage:\n%s", srv.logs.String())
		}
		if strings.Count(srv.logs.String(), sweepFailed) < seen+8 {
			return fmt.Errorf("the orphan sweep did not fail 8 times during the outage:\n%s", srv.logs.String())
		}
		return nil
	})
	if !srv.alive() || !srv.healthy() {
		t.Fatal("serve died with the database")
	}
	if pg, err = pgserver.Start(ctx, pgserver.Options{DataDir: pgDir}); err != nil {
		t.Fatal(err)
	}
	down := time.Since(outage)
	// Recovery without a restart.
	eventually.True(t, 30*time.Second, func() bool {
		code, _ := srv.get("/readyz")
		return code == 200
	}, "serve ready after the database came back")
	ready := time.Since(outage) - down
	// A login refused because keys could not be checked is not the
	// partner's failure: it is counted apart, not as a failed login (which
	// would slow the address down).
	_, metrics := srv.get("/metrics")
	if !strings.Contains(metrics, `payintake_sftp_logins_total{result="unavailable"} 1`) ||
		strings.Contains(metrics, `payintake_sftp_logins_total{result="failed"}`) {
		t.Errorf("the refused login during the outage was not counted as unavailable:\n%s", grepLines(metrics, "payintake_sftp_logins_total"))
	}
	c2, err := srv.dial("out", key)
	if err != nil {
		t.Fatalf("first login after the outage: %v", err)
	}
	defer c2.Close()
	if !accepted {
		if err := c2.upload("during.csv", payrollFile("D", 100)); err != nil { // the partner resends
			t.Fatal(err)
		}
	}
	for _, f := range []struct {
		name string
		rows int
	}{{"before.csv", 100}, {"racing.csv", 5000}, {"during.csv", 100}} {
		checkResult(t, f.name, c2.waitResult(t, f.name, 2*time.Minute), f.rows, "created")
	}
	recovered := time.Since(outage) - down
	waitSettled(t, st, "out", time.Minute)
	l := audit(t, st, "out")
	lost := 3 - len(l.processed)
	if l.records != 5200 || lost != 0 || l.history != 0 {
		t.Errorf("after the outage: %+v", l)
	}
	t.Logf("SUMMARY outage: database down %v under load; upload during it: accepted=%v, error %q; login refused: %v; ready %v after the database came back, all 3 files' results %v after; %d lost, %d records (want 5200), serve restarted: no",
		down.Round(100*time.Millisecond), accepted, errText(duringErr), loginErr != nil, ready.Round(100*time.Millisecond), recovered.Round(100*time.Millisecond), lost, l.records)
}

func errText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// grepLines returns the lines of s that contain sub.
func grepLines(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
