package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/payintake/payintake/intake"
	"github.com/payintake/payintake/internal/eventually"
	"github.com/payintake/payintake/internal/syncbuf"
	"github.com/payintake/payintake/partnerauth"
	"github.com/payintake/payintake/pgserver/pgtest"
	"github.com/payintake/payintake/records"
)

var firstRun = csvRows("E001,2026-03,BASE,1000.00,USD", "E002,2026-03,BASE,2000.00,USD", "E003,2026-03,BASE,abc,USD")

func TestSubmitCreatedAndRead(t *testing.T) {
	e := newEnv(t, Config{})
	r := e.submit("acme", "run-1", "march.csv", firstRun)
	wantStatus(t, r, http.StatusCreated)
	if r.replayed() {
		t.Fatal("first response marked as a replay")
	}
	m := r.json(t)
	id := int64(m["id"].(float64))
	counts := m["counts"].(map[string]any)
	if m["status"] != "processed" || counts["created"] != 2.0 || counts["rejected"] != 1.0 || counts["updated"] != 0.0 {
		t.Fatalf("body %s", r.body)
	}
	if m["result_url"] != fmt.Sprintf("/v1/submissions/%d/result.csv", id) || r.header.Get("Location") != fmt.Sprintf("/v1/submissions/%d", id) {
		t.Fatalf("body %s, Location %q", r.body, r.header.Get("Location"))
	}
	env, err := e.st.Envelope(e.ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if env.Key != "run-1" || env.FileName != "march.csv" || env.Source != "http" {
		t.Fatalf("envelope %+v: the Idempotency-Key must be the submission key", env)
	}
	if got := e.record("acme", "E002", "2026-03", "BASE"); got.Amount != "2000.00" {
		t.Fatalf("record %+v", got)
	}

	g := e.get("acme", fmt.Sprintf("/v1/submissions/%d", id))
	wantStatus(t, g, http.StatusOK)
	gm := g.json(t)
	if gm["status"] != "processed" || gm["source"] != "http" || gm["counts"].(map[string]any)["created"] != 2.0 || gm["name"] != "march.csv" {
		t.Fatalf("GET submission %s", g.body)
	}

	res := e.get("acme", m["result_url"].(string))
	wantStatus(t, res, http.StatusOK)
	var want bytes.Buffer
	if err := e.st.WriteResult(e.ctx, id, &want); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(res.body, want.Bytes()) || !strings.HasPrefix(string(res.body), "line,row,outcome,") {
		t.Fatalf("result.csv %q, want %q", res.body, want.Bytes())
	}
	if ct := res.header.Get("Content-Type"); !strings.HasPrefix(ct, "text/csv") {
		t.Fatalf("Content-Type %q", ct)
	}
	if cd := res.header.Get("Content-Disposition"); !strings.Contains(cd, "march.result.csv") {
		t.Fatalf("Content-Disposition %q", cd)
	}

	wantProblem(t, e.get("acme", "/v1/submissions/999999"), http.StatusNotFound, "not_found")
	wantProblem(t, e.get("acme", "/v1/submissions/abc"), http.StatusNotFound, "not_found")
}

// A partner whose profile says results: xlsx is served its result as a
// workbook: its content type and file name say so (and openapi.json
// declares it), the bytes are the store's, Content-Length its size.
func TestResultAsWorkbook(t *testing.T) {
	e := newEnv(t, Config{})
	if _, err := e.st.SetPartnerProfile(e.ctx, "acme", "results: xlsx\n", records.PartnerProfile{Results: "xlsx"},
		records.PartnerUpdate{}, "tester", records.ViaCLI); err != nil {
		t.Fatal(err)
	}
	r := e.submit("acme", "run-1", "march.csv", firstRun)
	wantStatus(t, r, http.StatusCreated)
	id := int64(r.json(t)["id"].(float64))
	res := e.get("acme", fmt.Sprintf("/v1/submissions/%d/result.csv", id))
	wantStatus(t, res, http.StatusOK)
	var want bytes.Buffer
	if err := e.st.WriteResult(e.ctx, id, &want); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(res.body, want.Bytes()) || !bytes.HasPrefix(res.body, []byte("PK\x03\x04")) || res.header.Get("Content-Length") != fmt.Sprint(want.Len()) {
		t.Fatalf("result: %d bytes (Content-Length %s), want the store's workbook of %d bytes", len(res.body), res.header.Get("Content-Length"), want.Len())
	}
	if ct := res.header.Get("Content-Type"); ct != intake.WorkbookContentType {
		t.Fatalf("Content-Type %q, want %q", ct, intake.WorkbookContentType)
	}
	if cd := res.header.Get("Content-Disposition"); cd != `attachment; filename="march.result.xlsx"` {
		t.Fatalf("Content-Disposition %q", cd)
	}
}

func TestSubmitReplay(t *testing.T) {
	e := newEnv(t, Config{})
	first := e.submit("acme", "Run-7", "march.csv", firstRun)
	wantStatus(t, first, http.StatusCreated)
	// Same key (compared case-insensitively, bare or as an RFC 8941 string), same body.
	for _, key := range []string{"Run-7", "run-7", `"RUN-7"`} {
		again := e.submit("acme", key, "march.csv", firstRun)
		wantStatus(t, again, http.StatusCreated)
		if !again.replayed() || !bytes.Equal(again.body, first.body) {
			t.Fatalf("key %s: replay %s (replayed %v), want %s verbatim", key, again.body, again.replayed(), first.body)
		}
	}
	if n := e.count(`SELECT count(*) FROM envelopes`); n != 1 {
		t.Fatalf("%d envelopes, want 1: a replay executes nothing", n)
	}
	// The same key is another partner's own key.
	o := e.submit("other", "run-7", "march.csv", firstRun)
	wantStatus(t, o, http.StatusCreated)
	if o.replayed() {
		t.Fatal("keys must be scoped per partner")
	}
}

func TestSubmitDifferentBody(t *testing.T) {
	e := newEnv(t, Config{})
	wantStatus(t, e.submit("acme", "k1", "march.csv", firstRun), http.StatusCreated)
	changed := csvRows("E001,2026-03,BASE,9999.00,USD")
	p := wantProblem(t, e.submit("acme", "K1", "march.csv", changed), http.StatusUnprocessableEntity, "idempotency_key_reuse")
	if got := e.record("acme", "E001", "2026-03", "BASE"); got.Amount != "1000.00" {
		t.Fatalf("record changed by a refused body: %+v", got)
	}
	// The refused bytes are kept for audit, as a key_reuse envelope.
	env, err := e.st.Envelope(e.ctx, int64(p["envelope_id"].(float64)))
	if err != nil {
		t.Fatal(err)
	}
	if env.Status != "key_reuse" || env.Size != int64(len(changed)) {
		t.Fatalf("audit envelope %+v", env)
	}
	// The original body still replays.
	r := e.submit("acme", "k1", "march.csv", firstRun)
	if r.status != http.StatusCreated || !r.replayed() {
		t.Fatalf("status %d replayed %v", r.status, r.replayed())
	}
}

func TestSubmitBadKey(t *testing.T) {
	e := newEnv(t, Config{})
	wantProblem(t, e.submit("acme", "", "a.csv", firstRun), http.StatusBadRequest, "idempotency_key_missing")
	for _, key := range []string{`""`, " ", strings.Repeat("k", 256), `"unterminated`, `"a"b`, "caf\u00e9"} {
		req := e.submitReq("acme", "", "a.csv", strings.NewReader(firstRun))
		req.Header.Set("Idempotency-Key", key)
		wantProblem(t, e.do(req), http.StatusBadRequest, "idempotency_key_malformed")
	}
	req := e.submitReq("acme", "a", "a.csv", strings.NewReader(firstRun))
	req.Header.Add("Idempotency-Key", "b")
	wantProblem(t, e.do(req), http.StatusBadRequest, "idempotency_key_malformed")
	wantProblem(t, e.submit("acme", "k", "", firstRun), http.StatusBadRequest, "invalid_name")
	wantProblem(t, e.submit("acme", "k", "..%2Fetc%2Fpasswd", firstRun), http.StatusBadRequest, "invalid_name")
	if n := e.count(`SELECT count(*) FROM idempotency_keys`); n != 0 {
		t.Fatalf("%d keys claimed by refused requests", n)
	}
	// 255 characters is the limit, inclusive.
	wantStatus(t, e.submit("acme", strings.Repeat("k", 255), "a.csv", firstRun), http.StatusCreated)
}

func TestSubmitUnauthorized(t *testing.T) {
	e := newEnv(t, Config{})
	for _, auth := range []string{"", "Bearer", "Bearer nope", "Basic " + e.token["acme"], "Bearer pit_" + strings.Repeat("A", 43)} {
		req := e.submitReq("", "k", "a.csv", strings.NewReader(firstRun))
		if auth != "" {
			req.Header.Set("Authorization", auth)
		}
		r := e.do(req)
		wantProblem(t, r, http.StatusUnauthorized, "unauthorized")
		if r.header.Get("WWW-Authenticate") == "" {
			t.Fatal("401 without WWW-Authenticate")
		}
	}
	// A revoked token stops working; the newest keeps working.
	newer, err := e.st.IssueAPIToken(e.ctx, "acme")
	if err != nil {
		t.Fatal(err)
	}
	old := e.token["acme"]
	if n, err := e.st.RevokeOldAPITokens(e.ctx, "acme"); err != nil || n != 1 {
		t.Fatalf("revoked %d, %v", n, err)
	}
	wantProblem(t, e.submit("acme", "k", "a.csv", firstRun), http.StatusUnauthorized, "unauthorized")
	e.token["acme"] = newer
	wantStatus(t, e.submit("acme", "k", "a.csv", firstRun), http.StatusCreated)
	e.token["acme"] = old
	wantProblem(t, e.get("acme", "/v1/submissions/1"), http.StatusUnauthorized, "unauthorized")
	if n := e.count(`SELECT count(*) FROM envelopes`); n != 1 {
		t.Fatalf("%d envelopes", n)
	}
}

func TestSubmitPartnerScoping(t *testing.T) {
	e := newEnv(t, Config{})
	r := e.submit("acme", "k", "a.csv", firstRun)
	wantStatus(t, r, http.StatusCreated)
	id := int64(r.json(t)["id"].(float64))
	wantProblem(t, e.get("other", fmt.Sprintf("/v1/submissions/%d", id)), http.StatusNotFound, "not_found")
	wantProblem(t, e.get("other", fmt.Sprintf("/v1/submissions/%d/result.csv", id)), http.StatusNotFound, "not_found")
	wantStatus(t, e.get("acme", fmt.Sprintf("/v1/submissions/%d/result.csv", id)), http.StatusOK)
}

func TestSubmitTooLarge(t *testing.T) {
	e := newEnv(t, Config{MaxBody: 100})
	big := csvRows(strings.Repeat("E001,2026-03,BASE,1.00,USD\n", 10))
	wantProblem(t, e.submit("acme", "k", "a.csv", big), http.StatusRequestEntityTooLarge, "body_too_large")
	// Without a Content-Length the limit holds while reading, and the claim is released.
	r := e.do(e.submitReq("acme", "k", "a.csv", io.MultiReader(strings.NewReader(big))))
	wantProblem(t, r, http.StatusRequestEntityTooLarge, "body_too_large")
	if n := e.count(`SELECT count(*) FROM idempotency_keys`); n != 0 {
		t.Fatalf("%d keys left claimed by a refused body", n)
	}
	wantStatus(t, e.submit("acme", "k", "a.csv", csvRows("E1,2026-03,BASE,1.00,USD")), http.StatusCreated)
}

// A request still reading its body holds the key: the same key gets 409
// until it completes, then the replay.
func TestSubmitInProgressConflict(t *testing.T) {
	e := newEnv(t, Config{})
	pr, pw := io.Pipe()
	first := make(chan resp, 1)
	go func() { first <- e.do(e.submitReq("acme", "slow", "a.csv", pr)) }()
	if _, err := pw.Write([]byte(csvHeader)); err != nil {
		t.Fatal(err)
	}
	eventually.True(t, 10*time.Second, func() bool {
		return e.count(`SELECT count(*) FROM idempotency_keys WHERE idem_key = 'slow'`) == 1
	}, "key slow in progress")
	r := e.submit("acme", "SLOW", "a.csv", firstRun)
	wantProblem(t, r, http.StatusConflict, "idempotency_key_in_progress")
	if r.header.Get("Retry-After") == "" {
		t.Fatal("409 without Retry-After")
	}
	// Even a different body gets 409 while the first is in progress.
	wantProblem(t, e.submit("acme", "slow", "a.csv", "x"), http.StatusConflict, "idempotency_key_in_progress")
	if _, err := pw.Write([]byte(strings.TrimPrefix(firstRun, csvHeader))); err != nil {
		t.Fatal(err)
	}
	pw.Close()
	f := <-first
	wantStatus(t, f, http.StatusCreated)
	again := e.submit("acme", "slow", "a.csv", firstRun)
	if again.status != http.StatusCreated || !again.replayed() || !bytes.Equal(again.body, f.body) {
		t.Fatalf("after completion: %d %s", again.status, again.body)
	}
}

// A crashed request stops renewing its lease; once it expires the key is
// taken over and processed.
func TestSubmitLeaseTakeover(t *testing.T) {
	e := newEnv(t, Config{})
	crashed := []byte("crashed-owner-01")
	c, err := e.st.LeaseIdempotencyKey(e.ctx, "acme", "k", crashed, time.Hour)
	if err != nil || !c.Leased {
		t.Fatalf("lease %+v %v", c, err)
	}
	wantProblem(t, e.submit("acme", "k", "a.csv", firstRun), http.StatusConflict, "idempotency_key_in_progress")
	// The lease runs out (the test moves its end into the past rather than
	// waiting for it): nobody renews it.
	e.expireLease(t, "k")
	r := e.submit("acme", "k", "a.csv", firstRun)
	wantStatus(t, r, http.StatusCreated)
	if r.replayed() {
		t.Fatal("takeover answered as a replay")
	}
	// The crashed holder no longer holds the key.
	if ok, err := e.st.RenewIdempotencyLease(e.ctx, "acme", "k", crashed, time.Hour); err != nil || ok {
		t.Fatalf("stale owner renewed its lease: %v %v", ok, err)
	}
	again := e.submit("acme", "k", "a.csv", firstRun)
	if !again.replayed() || !bytes.Equal(again.body, r.body) {
		t.Fatalf("replay %s", again.body)
	}
}

// A crash after the submission was processed but before it was answered:
// the dead request's lease is left, live; the retry takes the key over at
// once (its submission is processed) and gets the same answer, nothing
// applied twice.
func TestSubmitCrashAfterReceive(t *testing.T) {
	e := newEnv(t, Config{})
	r := e.submit("acme", "k", "a.csv", firstRun)
	wantStatus(t, r, http.StatusCreated)
	// The lease the process held when it died, never released.
	if l, err := e.st.LeaseIdempotencyKey(e.ctx, "acme", "k", []byte("dead-process-002"), time.Hour); err != nil || !l.Leased {
		t.Fatalf("lease %+v %v", l, err)
	}
	again := e.submit("acme", "k", "a.csv", firstRun)
	wantStatus(t, again, http.StatusCreated)
	if !bytes.Equal(again.body, r.body) {
		t.Fatalf("answer after recovery %s, want %s", again.body, r.body)
	}
	if got := e.record("acme", "E001", "2026-03", "BASE"); got.Version != 1 {
		t.Fatalf("record applied twice: %+v", got)
	}
}

// The same bytes under the same key by another door (here a file received
// as an upload) are a replay over HTTP too, and say so.
func TestSubmitReplaysAnUploadedFile(t *testing.T) {
	e := newEnv(t, Config{})
	path := filepath.Join(t.TempDir(), "a.csv")
	writeFile(t, path, firstRun)
	if _, _, err := intake.New(e.st, nil).IngestFile(e.ctx, "acme", path, "sftp"); err != nil {
		t.Fatal(err)
	}
	r := e.submit("acme", "A.csv", "a.csv", firstRun)
	wantStatus(t, r, http.StatusCreated)
	if !r.replayed() {
		t.Errorf("a replay of an uploaded file is not marked Idempotent-Replayed: %v", r.header)
	}
	if got := e.record("acme", "E001", "2026-03", "BASE"); got.Version != 1 {
		t.Fatalf("record applied twice: %+v", got)
	}
	again := e.submit("acme", "A.csv", "a.csv", firstRun)
	if !again.replayed() || !bytes.Equal(again.body, r.body) {
		t.Errorf("second HTTP replay: header %v body %s, want %s", again.header, again.body, r.body)
	}
}

func TestReaper(t *testing.T) {
	e := newEnv(t, Config{ReapBatch: 2})
	for i := range 5 {
		wantStatus(t, e.submit("acme", fmt.Sprintf("old-%d", i), "a.csv", csvRows(fmt.Sprintf("E%d,2026-03,BASE,1.00,USD", i))), http.StatusCreated)
	}
	if n := e.count(`SELECT count(*) FROM idempotency_keys`); n != 0 {
		t.Fatalf("%d leases left by requests that were answered", n)
	}
	// Requests that died holding their keys, never retried: their leases ran out.
	for i := range 5 {
		if _, err := e.st.LeaseIdempotencyKey(e.ctx, "acme", fmt.Sprintf("dead-%d", i), []byte("dead"), -time.Second); err != nil {
			t.Fatal(err)
		}
	}
	wantStatus(t, e.submit("acme", "fresh", "a.csv", csvRows("F,2026-03,BASE,1.00,USD")), http.StatusCreated)
	if _, err := e.st.LeaseIdempotencyKey(e.ctx, "acme", "fresh-dead", []byte("dead"), -time.Second); err != nil {
		t.Fatal(err)
	}
	if _, err := e.st.Pool().Exec(e.ctx, `UPDATE idempotency_keys SET created_at = now() - interval '73 hours' WHERE idem_key LIKE 'dead-%'`); err != nil {
		t.Fatal(err)
	}
	// A key under a live lease is never reaped, however old.
	if _, err := e.st.LeaseIdempotencyKey(e.ctx, "acme", "working", []byte("owner"), time.Hour); err != nil {
		t.Fatal(err)
	}
	if _, err := e.st.Pool().Exec(e.ctx, `UPDATE idempotency_keys SET created_at = now() - interval '100 hours' WHERE idem_key = 'working'`); err != nil {
		t.Fatal(err)
	}
	n, err := e.api.Reap(e.ctx)
	if err != nil || n != 5 {
		t.Fatalf("reaped %d, %v; want 5 in batches of 2", n, err)
	}
	if left := e.count(`SELECT count(*) FROM idempotency_keys`); left != 2 {
		t.Fatalf("%d keys left, want fresh-dead and working", left)
	}
	// Long after, a key's answer is still its submission's.
	r := e.submit("acme", "old-0", "a.csv", csvRows("E0,2026-03,BASE,1.00,USD"))
	wantStatus(t, r, http.StatusCreated)
	if r.json(t)["counts"].(map[string]any)["created"] != 1.0 {
		t.Fatalf("same bytes long after: %s", r.body)
	}
	if got := e.record("acme", "E0", "2026-03", "BASE"); got.Version != 1 {
		t.Fatalf("applied again long after: %+v", got)
	}
	wantProblem(t, e.submit("acme", "old-1", "a.csv", csvRows("E1,2026-03,BASE,5.00,USD")), http.StatusUnprocessableEntity, "idempotency_key_reuse")
}

// N identical requests at once: one execution, the rest 409 or the replay.
func TestSubmitConcurrentIdentical(t *testing.T) {
	e := newEnv(t, Config{})
	const n = 12
	out := make([]resp, n)
	atOnce(n, func(i int) {
		out[i] = e.do(e.submitReq("acme", "same", "a.csv", strings.NewReader(firstRun)))
	})
	var executed []resp
	for _, r := range out {
		switch {
		case r.status == http.StatusCreated && !r.replayed():
			executed = append(executed, r)
		case r.status == http.StatusCreated, r.status == http.StatusConflict:
		default:
			t.Fatalf("unexpected %d %s", r.status, r.body)
		}
	}
	if len(executed) != 1 {
		t.Fatalf("%d executions, want 1", len(executed))
	}
	for _, r := range out {
		if r.status == http.StatusCreated && !bytes.Equal(r.body, executed[0].body) {
			t.Fatalf("replay %s differs from %s", r.body, executed[0].body)
		}
	}
	if c := e.count(`SELECT count(*) FROM envelopes`); c != 1 {
		t.Fatalf("%d envelopes, want 1", c)
	}
}

func TestResultNotReady(t *testing.T) {
	e := newEnv(t, Config{})
	// An envelope recorded but not yet processed (as by another transport).
	path := t.TempDir() + "/x.csv"
	writeFile(t, path, firstRun)
	env, err := e.st.Receive(e.ctx, incoming("acme", "x.csv", path), nil)
	if err != nil {
		t.Fatal(err)
	}
	g := e.get("acme", fmt.Sprintf("/v1/submissions/%d", env.ID))
	wantStatus(t, g, http.StatusOK)
	if g.json(t)["status"] != "received" {
		t.Fatalf("%s", g.body)
	}
	wantProblem(t, e.get("acme", fmt.Sprintf("/v1/submissions/%d/result.csv", env.ID)), http.StatusConflict, "not_ready")
}

// expireLease ends the lease on an in-progress key now, as if its time had
// run out.
func (e *tenv) expireLease(t *testing.T, key string) {
	t.Helper()
	tag, err := e.st.Pool().Exec(e.ctx, `UPDATE idempotency_keys SET lease_until = now() - interval '1 millisecond'
		WHERE idem_key = $1`, key)
	if err != nil || tag.RowsAffected() != 1 {
		t.Fatalf("expire the lease of %q: %v (%d keys)", key, err, tag.RowsAffected())
	}
}

// With a job queue, the processing job is scheduled in the envelope's own
// transaction, once per submission; the spool is left empty.
func TestSubmitEnqueue(t *testing.T) {
	var mu sync.Mutex
	var jobs []int64
	spool := t.TempDir()
	e := newEnv(t, Config{SpoolDir: spool, Enqueue: func(ctx context.Context, tx pgx.Tx, env records.Envelope) error {
		var n int
		if err := tx.QueryRow(ctx, `SELECT count(*) FROM envelopes WHERE id = $1`, env.ID).Scan(&n); err != nil || n != 1 {
			return fmt.Errorf("envelope %d not visible in the enqueue transaction: %v", env.ID, err)
		}
		mu.Lock()
		jobs = append(jobs, env.ID)
		mu.Unlock()
		return nil
	}})
	r := e.submit("acme", "k", "a.csv", firstRun)
	wantStatus(t, r, http.StatusCreated)
	wantStatus(t, e.submit("acme", "k", "a.csv", firstRun), http.StatusCreated)
	if len(jobs) != 1 || jobs[0] != int64(r.json(t)["id"].(float64)) {
		t.Fatalf("jobs %v", jobs)
	}
	if left, _ := os.ReadDir(spool); len(left) != 0 {
		t.Fatalf("spool not empty: %v", left)
	}
}

func TestMountAndSpoolCleanup(t *testing.T) {
	st := pgtest.Store(t)
	dir := t.TempDir()
	spool := filepath.Join(dir, "spool", "http")
	if err := os.MkdirAll(spool, 0o750); err != nil {
		t.Fatal(err)
	}
	stale, fresh := filepath.Join(spool, "http-1.part"), filepath.Join(spool, "http-2.part")
	writeFile(t, stale, "x")
	writeFile(t, fresh, "x")
	old := time.Now().Add(-48 * time.Hour)
	if err := os.Chtimes(stale, old, old); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	mux := http.NewServeMux()
	Mount(ctx, mux, intake.New(st, nil), partnerauth.New(st), dir)
	eventually.True(t, 10*time.Second, func() bool { _, err := os.Stat(stale); return os.IsNotExist(err) }, "stale spool file %s removed", stale)
	if _, err := os.Stat(fresh); err != nil {
		t.Fatalf("fresh spool file removed: %v", err)
	}
	rec := httptest.NewRecorder()
	mux.ServeHTTP(rec, httptest.NewRequest("GET", "/v1/openapi.json", nil))
	if rec.Code != http.StatusOK || !json.Valid(rec.Body.Bytes()) {
		t.Fatalf("openapi via Mount: %d", rec.Code)
	}
}

// A live request renews its lease: however long it takes, the key stays
// its own (409 for others), unlike a crashed one.
func TestSubmitLeaseRenewed(t *testing.T) {
	e := newEnv(t, Config{Lease: 300 * time.Millisecond})
	pr, pw := io.Pipe()
	first := make(chan resp, 1)
	go func() { first <- e.do(e.submitReq("acme", "long", "a.csv", pr)) }()
	if _, err := pw.Write([]byte(csvHeader)); err != nil {
		t.Fatal(err)
	}
	eventually.True(t, 10*time.Second, func() bool { return e.count(`SELECT count(*) FROM idempotency_keys WHERE idem_key = 'long'`) == 1 }, "key long claimed")
	start := time.Now()
	for range 4 {
		// The lease runs out (the test moves its end into the past), and the
		// live request renews it: the renewal is the signal waited for.
		e.expireLease(t, "long")
		eventually.True(t, 10*time.Second, func() bool {
			return e.count(`SELECT count(*) FROM idempotency_keys WHERE idem_key = 'long' AND lease_until > now()`) == 1
		}, "the lease of key long renewed")
		wantProblem(t, e.submit("acme", "long", "a.csv", firstRun), http.StatusConflict, "idempotency_key_in_progress")
	}
	if d := time.Since(start); d < e.api.cfg.Lease {
		t.Fatalf("the renewals took %v, less than one lease (%v): the test proves nothing", d, e.api.cfg.Lease)
	}
	if _, err := pw.Write([]byte(strings.TrimPrefix(firstRun, csvHeader))); err != nil {
		t.Fatal(err)
	}
	pw.Close()
	f := <-first
	wantStatus(t, f, http.StatusCreated)
	if f.replayed() {
		t.Fatal("the long request lost its key")
	}
}

// When a queue worker is processing the envelope already, the request waits
// for that outcome instead of failing. The worker (a second transaction
// processing the file sent over SFTP) holds the envelope and waits for the
// partner's lock, which the test holds until the request has recorded its
// replay: the request's own processing finds the envelope busy.
func TestSubmitWhileWorkerProcesses(t *testing.T) {
	e := newEnv(t, Config{})
	// The request's receipt is seen in its log line: a repeat under the
	// request's own key is answered, not recorded as an envelope.
	logs := &syncbuf.Buffer{}
	e.api.in.Log = slog.New(slog.NewTextHandler(logs, nil))
	partnerLock, err := e.st.Pool().Begin(e.ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer partnerLock.Rollback(e.ctx)
	if _, err := partnerLock.Exec(e.ctx, `SELECT pg_advisory_xact_lock(7310, hashtext('acme'))`); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "a.csv")
	writeFile(t, path, firstRun)
	sent, err := e.api.in.Submit(e.ctx, intake.Submission{Partner: "acme", Name: "a.csv", Path: path, Source: "sftp"}, nil)
	if err != nil || sent.Received.Status != records.StatusReceived {
		t.Fatalf("%+v %v", sent, err)
	}
	worker := make(chan records.Envelope, 1)
	go func() {
		env, err := e.api.in.Process(context.Background(), sent.Received.ID)
		if err != nil {
			t.Error(err)
		}
		worker <- env
	}()
	eventually.True(t, 10*time.Second, func() bool {
		return e.count(`SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted`) == 1
	}, "the worker waiting for the partner lock")
	request := make(chan resp, 1)
	go func() { request <- e.submit("acme", "a.csv", "a.csv", firstRun) }()
	eventually.True(t, 10*time.Second, func() bool {
		return strings.Contains(logs.String(), fmt.Sprintf("status=replay bytes=%d source=http", len(firstRun)))
	}, "the repeated request received as a replay")
	if err := partnerLock.Commit(e.ctx); err != nil {
		t.Fatal(err)
	}
	if env := <-worker; !env.Applied {
		t.Fatalf("the worker did not apply the envelope: %+v", env)
	}
	r := <-request
	wantStatus(t, r, http.StatusCreated)
	if m := r.json(t); m["status"] != "processed" || m["counts"].(map[string]any)["created"] != 2.0 {
		t.Fatalf("%s", r.body)
	}
}

// Requests the API has no route for still get problem documents.
func TestUnknownRoutesAreProblems(t *testing.T) {
	e := newEnv(t, Config{})
	cases := []struct {
		method, path string
		status       int
		code, allow  string
	}{
		{"GET", "/v1/nothing", http.StatusNotFound, "not_found", ""},
		{"DELETE", "/v1/submissions/10", http.StatusMethodNotAllowed, "method_not_allowed", "GET"},
		{"PUT", "/v1/submissions", http.StatusMethodNotAllowed, "method_not_allowed", "POST, GET"},
	}
	for _, c := range cases {
		req, err := http.NewRequest(c.method, e.srv.URL+c.path, nil)
		if err != nil {
			t.Fatal(err)
		}
		r := e.do(req)
		wantProblem(t, r, c.status, c.code)
		if got := r.header.Get("Allow"); got != c.allow {
			t.Errorf("%s %s: Allow %q, want %q", c.method, c.path, got, c.allow)
		}
	}
}

// A process dies while it processes a submission: its lease on the key
// stays, live, with nobody to renew or release it, and the job queue
// processes the recorded envelope after the restart. A retry gets 409 while
// the envelope waits and its answer as soon as the envelope is processed,
// not when the lease runs out; nothing is applied twice.
func TestSubmitRetryAfterCrashGetsProcessedAnswer(t *testing.T) {
	e := newEnv(t, Config{})
	dead := []byte("dead-process-001")
	if c, err := e.st.LeaseIdempotencyKey(e.ctx, "acme", "k", dead, time.Hour); err != nil || !c.Leased {
		t.Fatalf("lease %+v %v", c, err)
	}
	// The dead request recorded its envelope (received, unprocessed).
	path := filepath.Join(t.TempDir(), "body")
	writeFile(t, path, firstRun)
	in := intake.New(e.st, nil)
	sub, err := in.Submit(e.ctx, intake.Submission{Partner: "acme", Name: "a.csv", Path: path, Source: "http"}, &intake.SubmitOpts{Key: "k"})
	got := sub.Received
	if err != nil || got.Status != intake.StatusReceived {
		t.Fatalf("record: %+v %v", got, err)
	}
	wantProblem(t, e.submit("acme", "k", "a.csv", firstRun), http.StatusConflict, "idempotency_key_in_progress")
	// The queue processes it after the restart.
	out, err := in.Process(e.ctx, got.ID)
	if err != nil || out.Status != intake.StatusProcessed {
		t.Fatalf("process: %+v %v", out, err)
	}
	r := e.submit("acme", "k", "a.csv", firstRun)
	wantStatus(t, r, http.StatusCreated)
	if !r.replayed() || int64(r.json(t)["id"].(float64)) != got.ID {
		t.Fatalf("retry after processing: replayed %v, %s; want envelope %d replayed", r.replayed(), r.body, got.ID)
	}
	if v := e.record("acme", "E001", "2026-03", "BASE"); v.Version != 1 {
		t.Fatalf("record applied twice: %+v", v)
	}
	// The dead holder's lease is gone with the request that took it over.
	if n := e.count(`SELECT count(*) FROM idempotency_keys WHERE idem_key = 'k'`); n != 0 {
		t.Fatalf("%d leases on key k; want none", n)
	}
}
