package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/payintake/payintake/intake"
	"github.com/payintake/payintake/records"
)

func wantOutcome(t *testing.T, r resp, outcome, code string, version int) map[string]any {
	t.Helper()
	wantStatus(t, r, http.StatusOK)
	if ct := r.header.Get("Content-Type"); ct != "application/json" {
		t.Fatalf("Content-Type %q", ct)
	}
	m := r.json(t)
	if m["outcome"] != outcome || m["code"] != code || m["version"] != float64(version) {
		t.Fatalf("answer %s, want outcome %s code %q version %d", r.body, outcome, code, version)
	}
	return m
}

func TestWebhookCreatedUpdatedUnchanged(t *testing.T) {
	e := newEnv(t, Config{})
	wantOutcome(t, e.hook("acme", "msg_1", change("line-1", 1, "E001", "2150.00")), "created", "", 1)
	rec := e.record("acme", "E001", "2026-03", "BASE")
	if rec.Amount != "2150.00" || rec.Currency != "USD" || rec.Version != 1 {
		t.Fatalf("record %+v", rec)
	}
	// Formatting alone is not a change.
	body := `{"entity_id":"line-1","version":2,"employee_ref":" E001 ","pay_period":"2026-03","component":"base","amount":"2,150.0","currency":"usd"}`
	wantOutcome(t, e.hook("acme", "msg_2", body), "unchanged", "", 2)
	wantOutcome(t, e.hook("acme", "msg_3", change("line-1", 3, "E001", "2200.00")), "updated", "", 3)
	rec = e.record("acme", "E001", "2026-03", "BASE")
	if rec.Amount != "2200.00" || rec.Version != 2 {
		t.Fatalf("record %+v", rec)
	}
	var amount, by string
	if err := e.st.Pool().QueryRow(e.ctx, `SELECT amount::text, replaced_by FROM record_history WHERE record_id = $1`, rec.ID).Scan(&amount, &by); err != nil {
		t.Fatal(err)
	}
	if amount != "2150.00" || by != "webhook msg_3" {
		t.Fatalf("history %s %q", amount, by)
	}
	// Optional fields, with hours as a JSON number taken literally.
	full := `{"entity_id":"line-2","version":1,"employee_ref":"E002","pay_period":"2026-03","component":"OT","amount":"150.00","currency":"USD","hours":7.5,"rate":"20.00","pay_date":"2026-03-31"}`
	wantOutcome(t, e.hook("acme", "msg_4", full), "created", "", 1)
	if r := e.record("acme", "E002", "2026-03", "OT"); r.Hours != "7.5" || r.Rate != "20.00" || r.PayDate != "2026-03-31" {
		t.Fatalf("record %+v", r)
	}
}

func TestWebhookOutOfOrderVersions(t *testing.T) {
	e := newEnv(t, Config{})
	wantOutcome(t, e.hook("acme", "v3", change("line-9", 3, "E009", "300.00")), "created", "", 3)
	m := wantOutcome(t, e.hook("acme", "v1", change("line-9", 1, "E009", "100.00")), "stale", "superseded", 1)
	if !strings.Contains(m["message"].(string), "version 3") {
		t.Fatalf("message %v", m["message"])
	}
	wantOutcome(t, e.hook("acme", "v2", change("line-9", 2, "E009", "200.00")), "stale", "superseded", 2)
	wantOutcome(t, e.hook("acme", "v3b", change("line-9", 3, "E009", "333.00")), "stale", "superseded", 3)
	if r := e.record("acme", "E009", "2026-03", "BASE"); r.Amount != "300.00" || r.Version != 1 {
		t.Fatalf("record %+v: stale versions must change nothing", r)
	}
	// Versions are per partner.
	wantOutcome(t, e.hook("other", "v1", change("line-9", 1, "E009", "100.00")), "created", "", 1)
}

func TestWebhookDuplicateDelivery(t *testing.T) {
	e := newEnv(t, Config{})
	body := change("line-1", 1, "E001", "10.00")
	first := e.hook("acme", "msg_dup", body)
	wantOutcome(t, first, "created", "", 1)
	// A redelivery (new timestamp, new signature) gets the first answer verbatim.
	again := e.hook("acme", "msg_dup", body)
	if again.status != http.StatusOK || !again.replayed() || !bytes.Equal(again.body, first.body) {
		t.Fatalf("redelivery %d %s (replayed %v), want %s", again.status, again.body, again.replayed(), first.body)
	}
	if first.replayed() {
		t.Fatal("first delivery marked as replay")
	}
	if n := e.count(`SELECT count(*) FROM webhook_deliveries`); n != 1 {
		t.Fatalf("%d deliveries", n)
	}
	// The same webhook-id with another body is refused and quarantined.
	reuse := wantProblem(t, e.hook("acme", "msg_dup", change("line-1", 2, "E001", "99.00")), http.StatusUnprocessableEntity, "webhook_id_reuse")
	if r := e.record("acme", "E001", "2026-03", "BASE"); r.Amount != "10.00" {
		t.Fatalf("record %+v", r)
	}
	if n := e.count(`SELECT count(*) FROM webhook_quarantine WHERE code = 'webhook_id_reuse'`); n != 1 {
		t.Fatalf("%d quarantined", n)
	}
	// The partner is told what the quarantine record says, in one wording.
	var kept string
	if err := e.st.Pool().QueryRow(e.ctx, `SELECT message FROM webhook_quarantine WHERE code = 'webhook_id_reuse'`).Scan(&kept); err != nil {
		t.Fatal(err)
	}
	if reuse["detail"] != kept || !strings.Contains(kept, "msg_dup") || !strings.Contains(kept, "kept for audit") {
		t.Fatalf("problem detail %q, quarantine record %q: want one wording, naming the webhook-id", reuse["detail"], kept)
	}
}

func TestWebhookConcurrentDuplicates(t *testing.T) {
	e := newEnv(t, Config{})
	body := change("line-c", 1, "E100", "10.00")
	const n = 10
	out := make([]resp, n)
	atOnce(n, func(i int) { out[i] = e.hook("acme", "msg_conc", body) })
	fresh := 0
	for _, r := range out {
		wantOutcome(t, r, "created", "", 1)
		if !r.replayed() {
			fresh++
		}
		if !bytes.Equal(r.body, out[0].body) {
			t.Fatalf("answers differ: %s vs %s", r.body, out[0].body)
		}
	}
	if fresh != 1 {
		t.Fatalf("%d executions, want 1", fresh)
	}
}

func TestWebhookSignature(t *testing.T) {
	e := newEnv(t, Config{})
	body := change("line-1", 1, "E001", "10.00")
	now := time.Now()
	ts := strconv.FormatInt(now.Unix(), 10)
	sig, err := Sign(e.secret["acme"], "msg_s", now.Unix(), []byte(body))
	if err != nil {
		t.Fatal(err)
	}
	tampered := strings.Replace(body, "10.00", "99.00", 1)
	cases := []struct {
		name, partner, id, ts, sig, body, code string
	}{
		{"tampered body", "acme", "msg_s", ts, sig, tampered, "signature_invalid"},
		{"other id", "acme", "msg_t", ts, sig, body, "signature_invalid"},
		{"other timestamp", "acme", "msg_s", strconv.FormatInt(now.Unix()+1, 10), sig, body, "signature_invalid"},
		{"other partner's secret", "other", "msg_s", ts, sig, body, "signature_invalid"},
		{"unknown partner", "nobody", "msg_s", ts, sig, body, "signature_invalid"},
		{"no signature", "acme", "msg_s", ts, "", body, "signature_missing"},
		{"no id", "acme", "", ts, sig, body, "signature_missing"},
		{"no timestamp", "acme", "msg_s", "", sig, body, "signature_missing"},
		{"bad timestamp", "acme", "msg_s", "yesterday", sig, body, "timestamp_invalid"},
		{"wrong version", "acme", "msg_s", ts, "v2" + sig[2:], body, "signature_invalid"},
		{"garbage", "acme", "msg_s", ts, "v1,!!!", body, "signature_invalid"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			wantProblem(t, e.hookRaw(c.partner, c.id, c.ts, c.sig, c.body), http.StatusUnauthorized, c.code)
		})
	}
	// Expired, and too far in the future.
	for _, skew := range []time.Duration{-6 * time.Minute, 6 * time.Minute} {
		wantProblem(t, e.hookAt("acme", e.secret["acme"], "msg_s", now.Add(skew), body), http.StatusUnauthorized, "timestamp_out_of_tolerance")
	}
	for _, table := range []string{"webhook_deliveries", "webhook_quarantine", "webhook_entities", "records"} {
		if n := e.count(`SELECT count(*) FROM ` + table); n != 0 {
			t.Fatalf("%d rows in %s after refused signatures: nothing may be stored", n, table)
		}
	}
	// Within the tolerance, and with one good signature among several.
	old := now.Add(-4 * time.Minute)
	good, _ := Sign(e.secret["acme"], "msg_s", old.Unix(), []byte(body))
	r := e.hookRaw("acme", "msg_s", strconv.FormatInt(old.Unix(), 10), "v1,AAAA "+sig+" "+good, body)
	wantOutcome(t, r, "created", "", 1)
}

func TestWebhookSecretRotation(t *testing.T) {
	e := newEnv(t, Config{})
	old := e.secret["acme"]
	newer, err := e.st.AddWebhookSecret(e.ctx, "acme")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(newer, "whsec_") || newer == old {
		t.Fatalf("secret %q", newer)
	}
	wantOutcome(t, e.hookAt("acme", old, "m1", time.Now(), change("a", 1, "E1", "1.00")), "created", "", 1)
	wantOutcome(t, e.hookAt("acme", newer, "m2", time.Now(), change("b", 1, "E2", "1.00")), "created", "", 1)
	// During the switch a sender may sign with both.
	body := change("c", 1, "E3", "1.00")
	now := time.Now()
	s1, _ := Sign(old, "m3", now.Unix(), []byte(body))
	s2, _ := Sign(newer, "m3", now.Unix(), []byte(body))
	wantOutcome(t, e.hookRaw("acme", "m3", strconv.FormatInt(now.Unix(), 10), s1+" "+s2, body), "created", "", 1)
	if n, err := e.st.RevokeOldWebhookSecrets(e.ctx, "acme"); err != nil || n != 1 {
		t.Fatalf("revoked %d %v", n, err)
	}
	wantProblem(t, e.hookAt("acme", old, "m4", time.Now(), change("d", 1, "E4", "1.00")), http.StatusUnauthorized, "signature_invalid")
	wantOutcome(t, e.hookAt("acme", newer, "m5", time.Now(), change("d", 1, "E4", "1.00")), "created", "", 1)
}

func TestWebhookInvalidBodyQuarantined(t *testing.T) {
	e := newEnv(t, Config{})
	cases := []struct{ name, body, code, field string }{
		{"float amount", `{"entity_id":"x","version":1,"employee_ref":"E1","pay_period":"2026-03","component":"BASE","amount":2150.5,"currency":"USD"}`, "money_not_string", "amount"},
		{"integer amount", `{"entity_id":"x","version":1,"employee_ref":"E1","pay_period":"2026-03","component":"BASE","amount":2150,"currency":"USD"}`, "money_not_string", "amount"},
		{"number rate", `{"entity_id":"x","version":1,"employee_ref":"E1","pay_period":"2026-03","component":"BASE","amount":"1.00","currency":"USD","rate":12.5}`, "money_not_string", "rate"},
		{"number employee", `{"entity_id":"x","version":1,"employee_ref":1,"pay_period":"2026-03","component":"BASE","amount":"1.00","currency":"USD"}`, "invalid_type", "employee_ref"},
		{"not json", `amount=1`, "invalid_json", ""},
		{"array", `[1]`, "invalid_json", ""},
		{"trailing", change("x", 1, "E1", "1.00") + `{}`, "invalid_json", ""},
		{"no entity", `{"version":1,"employee_ref":"E1","pay_period":"2026-03","component":"BASE","amount":"1.00","currency":"USD"}`, "missing_value", "entity_id"},
		{"no version", `{"entity_id":"x","employee_ref":"E1","pay_period":"2026-03","component":"BASE","amount":"1.00","currency":"USD"}`, "missing_value", "version"},
		{"float version", `{"entity_id":"x","version":1.5,"employee_ref":"E1","pay_period":"2026-03","component":"BASE","amount":"1.00","currency":"USD"}`, "invalid_version", "version"},
		{"string version", `{"entity_id":"x","version":"2","employee_ref":"E1","pay_period":"2026-03","component":"BASE","amount":"1.00","currency":"USD"}`, "invalid_version", "version"},
		{"exponent amount", change("x", 1, "E1", "1e3"), "invalid_amount", "amount"},
		{"too many decimals", change("x", 1, "E1", "1.001"), "too_many_decimals", "amount"},
		{"no currency", `{"entity_id":"x","version":1,"employee_ref":"E1","pay_period":"2026-03","component":"BASE","amount":"1.00"}`, "missing_value", "currency"},
		{"mangled id", change("x", 1, "1.23E+05", "1.00"), "mangled_identifier", "employee_ref"},
	}
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			id := fmt.Sprintf("bad_%d", i)
			r := e.hook("acme", id, c.body)
			p := wantProblem(t, r, http.StatusUnprocessableEntity, c.code)
			if c.field != "" && p["field"] != c.field {
				t.Fatalf("field %v, want %s: %s", p["field"], c.field, r.body)
			}
			if p["quarantined"] != true {
				t.Fatalf("%s", r.body)
			}
			// A redelivery gets the same 422.
			again := e.hook("acme", id, c.body)
			if again.status != http.StatusUnprocessableEntity || !again.replayed() || !bytes.Equal(again.body, r.body) {
				t.Fatalf("redelivery %d %s", again.status, again.body)
			}
		})
	}
	qs, err := e.st.QuarantinedWebhooks(e.ctx, "acme")
	if err != nil {
		t.Fatal(err)
	}
	if len(qs) != len(cases) {
		t.Fatalf("%d quarantined, want %d (once each)", len(qs), len(cases))
	}
	if qs[0].Code != "money_not_string" || qs[0].Body == nil || string(qs[0].Body) != cases[0].body || qs[0].WebhookID != "bad_0" {
		t.Fatalf("quarantine %+v", qs[0])
	}
	if n := e.count(`SELECT count(*) FROM records`); n != 0 {
		t.Fatalf("%d records from invalid bodies", n)
	}
	if n := e.count(`SELECT count(*) FROM webhook_entities`); n != 0 {
		t.Fatalf("invalid bodies moved entity versions")
	}
}

func TestWebhookHeld(t *testing.T) {
	e := newEnv(t, Config{})
	wantOutcome(t, e.hook("acme", "m1", change("l1", 1, "E001", "100.00")), "created", "", 1)
	if _, err := e.st.LockPeriod(e.ctx, "acme", "2026-03", records.LockApproved, "tester"); err != nil {
		t.Fatal(err)
	}
	m := wantOutcome(t, e.hook("acme", "m2", change("l1", 2, "E001", "150.00")), "held", "record_locked", 2)
	x1 := int64(m["exception_id"].(float64))
	wantOutcome(t, e.hook("acme", "m3", change("l2", 1, "E002", "50.00")), "held", "period_locked", 1)
	if r := e.record("acme", "E001", "2026-03", "BASE"); r.Amount != "100.00" {
		t.Fatalf("locked record changed: %+v", r)
	}
	if _, err := e.st.FindRecord(e.ctx, "acme", "E002", "2026-03", "BASE"); err == nil {
		t.Fatal("a closed period took a new record")
	}
	xs, err := e.st.Exceptions(e.ctx, records.ExceptionFilter{Partner: "acme", Status: "open"})
	if err != nil {
		t.Fatal(err)
	}
	if len(xs) != 2 || xs[0].ID != x1 || xs[0].Code != "record_locked" || xs[0].Proposed["amount"] != "150.00" ||
		xs[0].Current["amount"] != "100.00" || xs[1].Code != "period_locked" || xs[1].Proposed["employee_ref"] != "E002" {
		t.Fatalf("exceptions %+v", xs)
	}
	// A newer different change supersedes the open exception.
	m = wantOutcome(t, e.hook("acme", "m4", change("l1", 3, "E001", "175.00")), "held", "record_locked", 3)
	x2 := int64(m["exception_id"].(float64))
	old, err := e.st.Exception(e.ctx, x1)
	if err != nil {
		t.Fatal(err)
	}
	if old.Status != "superseded" || x2 == x1 {
		t.Fatalf("old exception %+v, new %d", old, x2)
	}
	var by int64
	if err := e.st.Pool().QueryRow(e.ctx, `SELECT coalesce(superseded_by, 0) FROM exceptions WHERE id = $1`, x1).Scan(&by); err != nil || by != x2 {
		t.Fatalf("superseded exception %d points to %d (%v), want %d", x1, by, err, x2)
	}
	// A webhook has no file: no envelope, line or row on what it writes.
	if n := e.count(`SELECT count(*) FROM exceptions WHERE envelope_id IS NOT NULL OR line IS NOT NULL OR row_no IS NOT NULL`); n != 0 {
		t.Errorf("%d webhook exceptions claim a file line", n)
	}
	if !strings.Contains(old.Note, "webhook m4") || strings.Contains(old.Note, "line") {
		t.Errorf("supersession note %q should name the webhook and no line", old.Note)
	}
	// Versions already held are stale on redelivery with a new id.
	wantOutcome(t, e.hook("acme", "m5", change("l1", 2, "E001", "150.00")), "stale", "superseded", 2)
}

// A CSV file and a webhook touching the same natural key write one record.
func TestWebhookAndFileShareRecords(t *testing.T) {
	e := newEnv(t, Config{})
	in := intake.New(e.st, nil)
	ingest := func(name, data string) records.Envelope {
		path := filepath.Join(t.TempDir(), name)
		if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
		_, out, err := in.IngestFile(context.Background(), "acme", path, "cli")
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	// File, then webhook.
	env := ingest("a.csv", csvRows("E001,2026-03,BASE,1000.00,USD"))
	if env.Counts["created"] != 1 {
		t.Fatalf("counts %v", env.Counts)
	}
	wantOutcome(t, e.hook("acme", "w1", change("l1", 1, "E001", "1,000.00")), "unchanged", "", 1)
	wantOutcome(t, e.hook("acme", "w2", change("l1", 2, "E001", "1100.00")), "updated", "", 2)
	// Webhook, then file.
	wantOutcome(t, e.hook("acme", "w3", change("l2", 1, "E002", "500.00")), "created", "", 1)
	env = ingest("b.csv", csvRows("E001,2026-03,BASE,1100.00,USD", "E002,2026-03,BASE,550.00,USD"))
	if env.Counts["unchanged"] != 1 || env.Counts["updated"] != 1 {
		t.Fatalf("counts %v", env.Counts)
	}
	if n := e.count(`SELECT count(*) FROM records`); n != 2 {
		t.Fatalf("%d records, want 2", n)
	}
	r1, r2 := e.record("acme", "E001", "2026-03", "BASE"), e.record("acme", "E002", "2026-03", "BASE")
	if r1.Amount != "1100.00" || r1.Version != 2 || r2.Amount != "550.00" || r2.Version != 2 {
		t.Fatalf("records %+v %+v", r1, r2)
	}
	var hist []string
	rows, err := e.st.Pool().Query(e.ctx, `SELECT record_id || ':' || version || ':' || replaced_by FROM record_history ORDER BY record_id, version`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			t.Fatal(err)
		}
		hist = append(hist, s)
	}
	want := []string{fmt.Sprintf("%d:1:webhook w2", r1.ID), fmt.Sprintf("%d:1:envelope %d", r2.ID, env.ID)}
	if fmt.Sprint(hist) != fmt.Sprint(want) {
		t.Fatalf("history %v, want %v", hist, want)
	}
}

func TestWebhookTooLarge(t *testing.T) {
	e := newEnv(t, Config{MaxWebhookBody: 64})
	wantProblem(t, e.hook("acme", "big", change("line-1", 1, "E001", "10.00")), http.StatusRequestEntityTooLarge, "body_too_large")
	wantProblem(t, e.hook("acme", strings.Repeat("i", 256), "{}"), http.StatusBadRequest, "invalid_webhook_id")
}

func TestOpenAPI(t *testing.T) {
	e := newEnv(t, Config{})
	r := e.get("", "/v1/openapi.json")
	wantStatus(t, r, http.StatusOK)
	var doc struct {
		OpenAPI string                                `json:"openapi"`
		Paths   map[string]map[string]json.RawMessage `json:"paths"`
	}
	if err := json.Unmarshal(r.body, &doc); err != nil {
		t.Fatalf("openapi.json does not parse: %v", err)
	}
	if doc.OpenAPI != "3.1.0" {
		t.Fatalf("openapi %q", doc.OpenAPI)
	}
	n := 0
	for _, rt := range routes {
		ops, ok := doc.Paths[rt.path]
		if !ok {
			t.Errorf("route %s %s is not in the OpenAPI document", rt.method, rt.path)
			continue
		}
		if _, ok := ops[strings.ToLower(rt.method)]; !ok {
			t.Errorf("route %s %s has no %s operation in the OpenAPI document", rt.method, rt.path, rt.method)
		}
		n++
	}
	total := 0
	for path, ops := range doc.Paths {
		if strings.HasPrefix(path, reviewPaths) {
			continue
		}
		for method := range ops {
			if method != "parameters" {
				total++
			}
		}
	}
	if total != len(routes) {
		t.Errorf("the OpenAPI document has %d operations, the server %d routes", total, len(routes))
	}
	// Every $ref resolves.
	var all map[string]any
	_ = json.Unmarshal(r.body, &all)
	var walk func(v any)
	walk = func(v any) {
		switch v := v.(type) {
		case map[string]any:
			if ref, ok := v["$ref"].(string); ok {
				var cur any = all
				for _, part := range strings.Split(strings.TrimPrefix(ref, "#/"), "/") {
					m, _ := cur.(map[string]any)
					cur = m[part]
				}
				if cur == nil {
					t.Errorf("$ref %s does not resolve", ref)
				}
			}
			for _, x := range v {
				walk(x)
			}
		case []any:
			for _, x := range v {
				walk(x)
			}
		}
	}
	walk(all)
}

// An exception held from a webhook is decided like one held from a file.
func TestWebhookHeldApproved(t *testing.T) {
	e := newEnv(t, Config{})
	wantOutcome(t, e.hook("acme", "m1", change("l1", 1, "E001", "100.00")), "created", "", 1)
	if _, err := e.st.LockPeriod(e.ctx, "acme", "2026-03", records.LockPaid, "tester"); err != nil {
		t.Fatal(err)
	}
	x1 := int64(wantOutcome(t, e.hook("acme", "m2", change("l1", 2, "E001", "150.00")), "held", "record_locked", 2)["exception_id"].(float64))
	x2 := int64(wantOutcome(t, e.hook("acme", "m3", change("l2", 1, "E002", "50.00")), "held", "period_locked", 1)["exception_id"].(float64))
	for _, id := range []int64{x1, x2} {
		if _, err := e.st.Decide(e.ctx, records.Decision{ExceptionID: id, Approve: true, Reviewer: "rita"}); err != nil {
			t.Fatalf("approve %d: %v", id, err)
		}
	}
	if r := e.record("acme", "E001", "2026-03", "BASE"); r.Amount != "150.00" || r.LockedReason != "paid" {
		t.Fatalf("record %+v", r)
	}
	if r := e.record("acme", "E002", "2026-03", "BASE"); r.Amount != "50.00" {
		t.Fatalf("record %+v", r)
	}
}
