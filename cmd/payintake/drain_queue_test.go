package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river/rivertype"

	outbound "github.com/payintake/payintake/dispatch"
	"github.com/payintake/payintake/intake"
	"github.com/payintake/payintake/intake/intaketest"
	"github.com/payintake/payintake/internal/eventually"
	"github.com/payintake/payintake/pgserver/pgtest"
	"github.com/payintake/payintake/records"
)

// SIGTERM of replica A while its queue work runs, with B on the same
// database: A takes no new work, the work it runs finishes within the drain
// or is released to B at its end, nothing is done twice, A exits 0.
//
// A runs one worker. At SIGTERM it is processing a resubmission of partner
// slow, blocked on the rows of slow's records that the test holds locked
// (as an operator's long transaction would), with two files of q1 and q2
// queued behind it, and two result notifications in flight to receivers
// the test holds open. Then B starts; n1's receiver answers during the
// drain, n2's and slow's are still held at its end.
func TestDrainReleasesQueueWork(t *testing.T) {
	// The work is cut 6 s after SIGTERM, well before the 10 s timeout of the
	// notifications claimed shortly before it.
	const drain = time.Second
	ctx := t.Context()
	url := pgtest.New(t)
	st := openTestStore(t, url)
	keys := addPartners(t, st, "slow", "q1", "q2", "n1", "n2")

	// The partners' notification receivers: the first request for each is
	// held until the test releases it (or the sender goes away); later
	// ones are answered at once.
	type request struct {
		partner, webhookID string
		answered           bool
	}
	var mu sync.Mutex
	var requests []request
	arrived := make(chan string, 16)
	release := map[string]chan struct{}{"n1": make(chan struct{}), "n2": make(chan struct{})}
	receiver := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p := strings.TrimPrefix(r.URL.Path, "/")
		mu.Lock()
		first := !slices.ContainsFunc(requests, func(q request) bool { return q.partner == p })
		i := len(requests)
		requests = append(requests, request{partner: p, webhookID: r.Header.Get("webhook-id")})
		mu.Unlock()
		arrived <- p
		if first {
			select {
			case <-release[p]:
			case <-r.Context().Done():
				return // cut by the sender: not answered
			}
		}
		w.WriteHeader(http.StatusNoContent)
		mu.Lock()
		requests[i].answered = true
		mu.Unlock()
	}))
	defer receiver.Close()
	defer func() { // before Close, which waits for the handlers
		for _, c := range release {
			select {
			case <-c:
			default:
				close(c)
			}
		}
	}()
	// The notifications are signed with webhook secrets sealed under the
	// servers' secret key.
	ks, err := records.ParseSecretKeys(testServersSecretKey)
	if err != nil {
		t.Fatal(err)
	}
	sealing, err := records.Open(ctx, url, records.Options{MaxConns: 1, SecretKeys: func() (*records.SecretKeys, error) { return ks, nil }})
	if err != nil {
		t.Fatal(err)
	}
	defer sealing.Close()
	for _, p := range []string{"n1", "n2"} {
		u := receiver.URL + "/" + p
		if err := st.UpdatePartner(ctx, p, records.PartnerUpdate{NotifyURL: &u}); err != nil {
			t.Fatal(err)
		}
		if _, err := sealing.AddWebhookSecret(ctx, p); err != nil {
			t.Fatal(err)
		}
	}
	held := func(p string) request {
		mu.Lock()
		defer mu.Unlock()
		for _, q := range requests {
			if q.partner == p {
				return q
			}
		}
		return request{}
	}

	// The harness's --orphan-after of 1 s would let B's sweep take slow's
	// envelope for orphaned in the moment between A's cut (its processing
	// rolled back, the envelope's row free) and River marking the job
	// available again, and give it a second job: harmless (the second finds
	// it processed) but not the hand-back this test checks, so the sweep
	// waits as long as by default here.
	orphanAfter := []string{"--orphan-after", intake.DefaultOrphanAfter.String()}
	a := startServer(t, url, filepath.Join(t.TempDir(), "a"), nil, append([]string{"--workers", "1", "--drain-timeout", drain.String()}, orphanAfter...)...)
	up := func(srv *server, partner, name string, data []byte) {
		t.Helper()
		if err := srv.login(partner, keys[partner]).upload(name, data); err != nil {
			t.Fatalf("upload %s of %s: %v", name, partner, err)
		}
	}

	// slow's first file, processed; its records are then held by the
	// test, so the resubmission changing every amount blocks A's worker.
	first := payrollFile("SL", 200)
	up(a, "slow", "v1.csv", first)
	a.login("slow", keys["slow"]).waitResult(t, "v1.csv", 30*time.Second)
	// Two notifications in flight, each held by its receiver.
	up(a, "n1", "n1.csv", payrollFile("NA", 10))
	up(a, "n2", "n2.csv", payrollFile("NB", 10))
	for range 2 {
		select {
		case <-arrived:
		case <-time.After(30 * time.Second):
			t.Fatal("the notifications did not reach their receivers within 30s")
		}
	}

	lock, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Close(context.Background())
	tx, err := lock.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(context.Background())
	var lockPID, locked int
	if err := tx.QueryRow(ctx, `SELECT pg_backend_pid(), (SELECT count(*) FROM (SELECT 1 FROM records WHERE partner_id = 'slow' FOR UPDATE) r)`).Scan(&lockPID, &locked); err != nil || locked != 200 {
		t.Fatalf("lock slow's records: %v (%d rows)", err, locked)
	}
	// blocked is how many sessions wait for the test's lock: a processing
	// job that has started.
	blocked := func() int {
		var n int
		if err := st.Pool().QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE $1 = ANY (pg_blocking_pids(pid))`, lockPID).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	up(a, "slow", "v2.csv", bytes.ReplaceAll(first, []byte(",BASE,1"), []byte(",BASE,2")))
	eventually.True(t, 30*time.Second, func() bool { return blocked() > 0 }, "A's worker blocked on slow's records")
	up(a, "q1", "q1.csv", payrollFile("QA", 50))
	up(a, "q2", "q2.csv", payrollFile("QB", 50))

	jobOf := func(partner, file string) *rivertype.JobRow {
		t.Helper()
		var id int64
		if err := st.Pool().QueryRow(ctx, `SELECT id FROM envelopes WHERE partner_id = $1 AND file_name = $2`, partner, file).Scan(&id); err != nil {
			t.Fatalf("envelope %s of %s: %v", file, partner, err)
		}
		var found *rivertype.JobRow
		for _, j := range intaketest.ProcessJobs(t, st.Pool(), partner) {
			if j.Args.EnvelopeID == id {
				if found != nil {
					t.Fatalf("envelope %s of %s has two processing jobs: %d and %d", file, partner, found.ID, j.ID)
				}
				found = j.JobRow
			}
		}
		if found == nil {
			t.Fatalf("envelope %s of %s has no processing job", file, partner)
		}
		return found
	}
	slowJob := jobOf("slow", "v2.csv")
	if slowJob.State != rivertype.JobStateRunning || len(slowJob.AttemptedBy) != 1 {
		t.Fatalf("slow's job %s, attempted by %v: want running on A", slowJob.State, slowJob.AttemptedBy)
	}
	clientA := slowJob.AttemptedBy[0]
	for _, p := range []string{"q1", "q2"} {
		if j := jobOf(p, p+".csv"); j.State != rivertype.JobStateAvailable {
			t.Fatalf("%s's job is %s before the drain, want available (A's one worker is busy)", p, j.State)
		}
	}

	sigterm := time.Now()
	a.drain(t)
	b := startServer(t, url, filepath.Join(t.TempDir(), "b"), nil, append([]string{"--workers", "2"}, orphanAfter...)...)

	// n1's receiver answers during the drain: A records the delivery.
	close(release["n1"])
	eventually.NoError(t, 10*time.Second, func() error {
		var state string
		var attempts int
		if err := st.Pool().QueryRow(ctx, `SELECT state, attempts FROM notify_events WHERE partner_id = 'n1'`).Scan(&state, &attempts); err != nil {
			t.Fatal(err)
		}
		if state != "delivered" {
			return fmt.Errorf("n1's notification is %s after %d attempt(s)", state, attempts)
		}
		if attempts != 1 || !held("n1").answered {
			t.Fatalf("n1's notification delivered after %d attempts (first request answered: %v): want its one request in flight at SIGTERM answered and recorded", attempts, held("n1").answered)
		}
		return nil
	})

	// The files queued on A are processed by B while A drains.
	for _, p := range []string{"q1", "q2"} {
		b.login(p, keys[p]).waitResult(t, p+".csv", 30*time.Second)
		if j := jobOf(p, p+".csv"); slices.Contains(j.AttemptedBy, clientA) {
			t.Fatalf("%s's file was taken by A during its drain (attempted by %v)", p, j.AttemptedBy)
		}
	}

	// At the drain's end A cuts what still runs and exits 0.
	a.waitExit(t, drain+workGrace+15*time.Second)
	exited := time.Now()
	t.Logf("A exited %v after SIGTERM (--drain-timeout %v)", exited.Sub(sigterm).Round(time.Millisecond), drain)

	// n2's notification, cut at A's exit, is sent by B at once with the
	// same webhook-id.
	eventually.NoError(t, 10*time.Second, func() error {
		var state string
		if err := st.Pool().QueryRow(ctx, `SELECT state FROM notify_events WHERE partner_id = 'n2'`).Scan(&state); err != nil {
			t.Fatal(err)
		}
		if state != "delivered" {
			return fmt.Errorf("n2's notification is %s %v after A exited", state, time.Since(exited).Round(time.Millisecond))
		}
		return nil
	})
	t.Logf("n2's notification delivered by B %v after A exited", time.Since(exited).Round(time.Millisecond))
	mu.Lock()
	var n2 []request
	for _, q := range requests {
		if q.partner == "n2" {
			n2 = append(n2, q)
		}
	}
	mu.Unlock()
	if len(n2) != 2 || n2[0].answered || !n2[1].answered || n2[0].webhookID != n2[1].webhookID || n2[0].webhookID == "" {
		t.Fatalf("n2's requests %+v: want the one cut by A's stop, then one answered, both with the same webhook-id", n2)
	}

	// slow's job, cut on A, is B's now; it waits for the lock too. Let go.
	eventually.True(t, 20*time.Second, func() bool { return blocked() > 0 }, "B's worker blocked on slow's records")
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	b.login("slow", keys["slow"]).waitResult(t, "v2.csv", 30*time.Second)
	// River marks the job completed just after the result commits.
	var j *rivertype.JobRow
	eventually.True(t, 10*time.Second, func() bool {
		j = jobOf("slow", "v2.csv")
		return j.State == rivertype.JobStateCompleted
	}, "slow's job completed")
	// A's stop put it back without counting A's attempt or an error.
	if !slices.Contains(j.AttemptedBy, clientA) || len(j.AttemptedBy) != 2 || j.Attempt != 1 || len(j.Errors) != 0 {
		t.Fatalf("slow's job: attempt %d, attempted by %v, errors %v: want completed by B on its first counted attempt after A's stop put it back",
			j.Attempt, j.AttemptedBy, j.Errors)
	}
	l := audit(t, st, "slow")
	var maxVersion int
	if err := st.Pool().QueryRow(ctx, `SELECT max(version) FROM records WHERE partner_id = 'slow'`).Scan(&maxVersion); err != nil {
		t.Fatal(err)
	}
	for key, n := range l.processed {
		if n != 1 {
			t.Fatalf("slow's submission %s processed %d times", key, n)
		}
	}
	if l.byStatus[records.StatusProcessed] != 2 || l.records != 200 || l.versions != 200 || maxVersion != 2 {
		t.Fatalf("slow's ledger %+v, highest version %d: want v1 and v2 processed once each, 200 records at version 2", l, maxVersion)
	}
	for _, p := range []string{"q1", "q2"} {
		if l := audit(t, st, p); l.byStatus[records.StatusProcessed] != 1 || l.records != 50 {
			t.Fatalf("%s's ledger %+v: want its file processed once, 50 records", p, l)
		}
	}
	b.stop()
}

// SIGTERM of replica A while an upload is open on it: the drain waits for
// the upload, and meanwhile A takes no new job, though its worker is free.
// A file received on A during the drain, and the one whose upload kept the
// drain open, are processed by replica B, started after the SIGTERM.
func TestDrainTakesNoNewJobs(t *testing.T) {
	url := pgtest.New(t)
	st := openTestStore(t, url)
	key := addPartners(t, st, "late")["late"]
	a := startServer(t, url, filepath.Join(t.TempDir(), "a"), nil, "--workers", "1", "--drain-timeout", "60s")
	c := a.login("late", key)
	hold := payrollFile("HO", 2000)
	f := c.halfUpload(t, "hold.csv", hold)

	a.drain(t)
	// Received on A during the drain: its job is left to the other replicas.
	if err := c.upload("late.csv", payrollFile("LA", 50)); err != nil {
		t.Fatalf("upload on the open connection during the drain: %v", err)
	}
	b := startServer(t, url, filepath.Join(t.TempDir(), "b"), nil, "--workers", "1")
	bc := b.login("late", key)
	bc.waitResult(t, "late.csv", 30*time.Second)
	finishUpload(t, f, hold)
	a.waitExit(t, 30*time.Second)
	bc.waitResult(t, "hold.csv", 30*time.Second)
	for _, name := range []string{"late.csv", "hold.csv"} {
		done := `msg="envelope processed" envelope=\d+ door=sftp partner=late file=` + name
		if match(a.logs.String(), "("+done+")") != "" {
			t.Errorf("%s was processed by A during its drain", name)
		}
		if match(b.logs.String(), "("+done+")") == "" {
			t.Errorf("%s was not processed by B", name)
		}
	}
	if l := audit(t, st, "late"); l.byStatus[records.StatusProcessed] != 2 || l.records != 2050 {
		t.Fatalf("ledger %+v: want 2 files processed once, 2050 records", l)
	}
	b.stop()
}

// SIGTERM of replica A while it dispatches a period, its first chunk paid
// by the vendor but the answer held back: at the drain's end A cuts the
// run and puts its job back; replica B resumes the period and sends that
// chunk again, the same bytes under the same Idempotency-Key, so the vendor
// pays every line once. A's stop is no failure: nothing logged at ERROR.
func TestDrainReleasesDispatch(t *testing.T) {
	const drain = 2 * time.Second
	ctx := t.Context()
	url := pgtest.New(t)
	st := openTestStore(t, url)
	type request struct {
		key  string
		body []byte
	}
	var (
		v        outbound.Vendor
		mu       sync.Mutex
		requests []request
	)
	arrived := make(chan struct{}, 1)
	vendor := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			return
		}
		mu.Lock()
		first := len(requests) == 0
		requests = append(requests, request{r.Header.Get("Idempotency-Key"), body})
		mu.Unlock()
		r.Body = io.NopCloser(bytes.NewReader(body))
		if !first {
			v.ServeHTTP(w, r)
			return
		}
		// Paid, but the answer never goes out until the sender gives up.
		v.ServeHTTP(httptest.NewRecorder(), r)
		arrived <- struct{}{}
		<-r.Context().Done()
	}))
	defer vendor.Close()
	if err := outbound.NewStore(st.Pool()).AddTarget(ctx, outbound.Target{Name: "vendor", URL: vendor.URL,
		ChunkSize: 20, MaxAttempts: 5, RetryBase: 10 * time.Millisecond, Timeout: time.Minute, LineStatus: true}); err != nil {
		t.Fatal(err)
	}
	dispatchFixture(t, st, "disp", 100)
	a := startServer(t, url, filepath.Join(t.TempDir(), "a"), nil, "--workers", "1", "--drain-timeout", drain.String())
	if _, err := st.LockPeriod(ctx, "disp", "2026-11", records.LockApproved, "test"); err != nil {
		t.Fatal(err)
	}
	select {
	case <-arrived:
	case <-time.After(30 * time.Second):
		t.Fatal("A sent no chunk within 30s")
	}

	sigterm := time.Now()
	a.drain(t)
	b := startServer(t, url, filepath.Join(t.TempDir(), "b"), nil, "--workers", "1")
	a.waitExit(t, drain+workGrace+15*time.Second)
	exited := time.Now()
	waitDispatched(t, st, "disp", time.Minute)
	t.Logf("A exited %v after SIGTERM; B finished the period %v later",
		exited.Sub(sigterm).Round(time.Millisecond), time.Since(exited).Round(time.Millisecond))

	want := dueKeys(t, st, "disp")
	mu.Lock()
	cut := requests[0]
	again := 0
	for _, q := range requests[1:] {
		if q.key == cut.key {
			again++
			if !bytes.Equal(q.body, cut.body) {
				t.Errorf("chunk %s sent again with other bytes", q.key)
			}
		}
	}
	n := len(requests)
	mu.Unlock()
	if again != 1 || n != 6 {
		t.Fatalf("%d requests, the cut chunk %s sent again %d times: want 5 chunks and the cut one once more", n, cut.key, again)
	}
	var cutLines struct {
		Lines []struct {
			Key string `json:"key"`
		} `json:"lines"`
	}
	if err := json.Unmarshal(cut.body, &cutLines); err != nil {
		t.Fatal(err)
	}
	resent := map[string]bool{}
	for _, l := range cutLines.Lines {
		resent[l.Key] = true
	}
	paid := v.Paid()
	for k := range want {
		if d := paid[k]; d != 1 && !(resent[k] && d == 2) {
			t.Errorf("line %s delivered %d times (in the cut chunk: %v)", k, d, resent[k])
		}
	}
	if len(paid) != len(want) {
		t.Errorf("%d keys delivered, want the %d due", len(paid), len(want))
	}
	if strings.Contains(a.logs.String(), "level=ERROR") {
		t.Errorf("A logged an error for its stop:\n%s", tail(a.logs.String(), 3000))
	}
	b.stop()
}
