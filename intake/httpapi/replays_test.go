package httpapi

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"os/exec"
	"strings"
	"testing"
)

func (e *tenv) replay(partner string, id int64, key, body string) resp {
	e.t.Helper()
	req, err := http.NewRequest("POST", fmt.Sprintf("%s/v1/submissions/%d/replays", e.srv.URL, id), strings.NewReader(body))
	if err != nil {
		e.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+e.token[partner])
	if key != "" {
		req.Header.Set("Idempotency-Key", key)
	}
	return e.do(req)
}

type replayAnswer struct {
	ID     int64          `json:"id"`
	Counts map[string]int `json:"counts"`
	Rows   []struct {
		Row      int    `json:"row"`
		Line     int    `json:"line"`
		LegKey   string `json:"leg_key"`
		Outcome  string `json:"outcome"`
		Code     string `json:"code"`
		Field    string `json:"field"`
		ReplayID int64  `json:"replay_id"`
		Settled  bool   `json:"settled_before"`
	} `json:"rows"`
}

func decodeReplay(t *testing.T, r resp) replayAnswer {
	t.Helper()
	wantStatus(t, r, http.StatusCreated)
	var a replayAnswer
	if err := json.Unmarshal(r.body, &a); err != nil {
		t.Fatalf("%s: %v", r.body, err)
	}
	return a
}

func leg(row int, emp, amount string) string {
	return fmt.Sprintf(`{"row":%d,"employee_ref":%q,"pay_period":"2026-03","component":"BASE","amount":%q,"currency":"USD"}`, row, emp, amount)
}

func legs(l ...string) string { return `{"rows":[` + strings.Join(l, ",") + `]}` }

// hmacHex computes HMAC-SHA256 with the openssl command, independently of
// the Go code under test.
func hmacHex(t *testing.T, key, msg string) string {
	t.Helper()
	cmd := exec.Command("openssl", "dgst", "-sha256", "-hmac", key)
	cmd.Stdin = strings.NewReader(msg)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("openssl: %v", err)
	}
	f := strings.Fields(string(out))
	return f[len(f)-1]
}

func TestReplayLegs(t *testing.T) {
	e := newEnv(t, Config{})
	id := submissionID(t, e.submit("acme", "run-1", "march.csv", csvRows(
		"E001,2026-03,BASE,1000.00,USD", "E002,2026-03,BASE,12.345,USD", "E003,2026-03,BASE,abc,USD", "E004,2026-03,BASE,4.00,USD")))
	original := e.get("acme", fmt.Sprintf("/v1/submissions/%d/result.csv", id))
	wantStatus(t, original, http.StatusOK)

	body := legs(leg(2, "E002", "12.34"), leg(3, "E003", "still bad"))
	first := e.replay("acme", id, "fix-1", body)
	a := decodeReplay(t, first)
	if len(a.Rows) != 2 || a.Counts["created"] != 1 || a.Counts["rejected"] != 1 {
		t.Fatalf("replay answer %s", first.body)
	}
	r2, r3 := a.Rows[0], a.Rows[1]
	if r2.Row != 2 || r2.Line != 3 || r2.Outcome != "created" || r2.Settled || r2.ReplayID != a.ID {
		t.Fatalf("row 2 %+v", r2)
	}
	if r3.Row != 3 || r3.Outcome != "rejected" || r3.Code != "invalid_amount" || r3.Field != "amount" {
		t.Fatalf("row 3 %+v", r3)
	}
	// The leg key is HMAC-SHA256(submission key, decimal row index).
	if want := hmacHex(t, "run-1", "2"); r2.LegKey != want {
		t.Fatalf("leg key of row 2 %s, openssl says %s", r2.LegKey, want)
	}
	if got := e.record("acme", "E002", "2026-03", "BASE"); got.Amount != "12.34" || got.Version != 1 {
		t.Fatalf("record E002 %+v", got)
	}

	// The same request again: the first answer, nothing applied.
	again := e.replay("acme", id, "fix-1", body)
	if again.status != http.StatusCreated || !again.replayed() || !bytes.Equal(again.body, first.body) {
		t.Fatalf("repeat: %d %v %s", again.status, again.header, again.body)
	}
	if ct := again.header.Get("Content-Type"); ct != "application/json" {
		t.Fatalf("repeat answered as %q, want application/json (the stored answer's format)", ct)
	}
	wantProblem(t, e.replay("acme", id, "fix-1", legs(leg(3, "E003", "30.00"))), http.StatusUnprocessableEntity, "idempotency_key_reuse")

	// A settled leg replayed again under a new key: its first outcome,
	// nothing applied; a leg still rejected can be corrected again.
	b := decodeReplay(t, e.replay("acme", id, "fix-2", legs(leg(2, "E002", "99.00"), leg(3, "E003", "30.00"))))
	if b.Rows[0].Outcome != "created" || !b.Rows[0].Settled || b.Rows[0].ReplayID != a.ID || b.Rows[0].LegKey != r2.LegKey {
		t.Fatalf("settled leg replayed: %+v", b.Rows[0])
	}
	if b.Rows[1].Outcome != "created" || b.Rows[1].Settled || b.Rows[1].ReplayID != b.ID {
		t.Fatalf("corrected leg: %+v", b.Rows[1])
	}
	if got := e.record("acme", "E002", "2026-03", "BASE"); got.Amount != "12.34" || got.Version != 1 {
		t.Fatalf("a settled leg was applied again: %+v", got)
	}
	if n := e.count(`SELECT count(*) FROM record_history`); n != 0 {
		t.Fatalf("%d history rows", n)
	}

	// Rows that were not rejected or held, or are not rows, are refused whole.
	replays := e.count(`SELECT count(*) FROM replays`)
	p := wantProblem(t, e.replay("acme", id, "fix-3", legs(leg(1, "E001", "5.00"), leg(99, "E099", "5.00"))), http.StatusUnprocessableEntity, "row_not_replayable")
	if d := p["detail"].(string); !strings.Contains(d, "row 1 was created") || !strings.Contains(d, "row 99 is not a row") {
		t.Fatalf("refusal %q", d)
	}
	if got := e.record("acme", "E001", "2026-03", "BASE"); got.Amount != "1000.00" || e.count(`SELECT count(*) FROM replays`) != replays {
		t.Fatalf("a refused replay applied something: %+v", got)
	}
	wantProblem(t, e.replay("acme", id, "fix-4", `{"rows":[{"row":3,"employee_ref":"E003","pay_period":"2026-03","component":"BASE","amount":30.00,"currency":"USD"}]}`),
		http.StatusUnprocessableEntity, "money_not_string")
	wantProblem(t, e.replay("acme", id, "", body), http.StatusBadRequest, "idempotency_key_missing")
	wantProblem(t, e.replay("other", id, "fix-5", body), http.StatusNotFound, "not_found")

	// The rows listing and result.csv show the latest outcomes and the
	// replays that produced them; the original stays as it was.
	rows, _ := listRowsPage(t, e.get("acme", fmt.Sprintf("/v1/submissions/%d/rows?outcome=rejected", id)))
	if len(rows) != 0 {
		t.Fatalf("rejected rows after the replays: %+v", rows)
	}
	latest := e.get("acme", fmt.Sprintf("/v1/submissions/%d/result.csv", id))
	wantStatus(t, latest, http.StatusOK)
	want := "line,row,outcome,employee_ref,pay_period,component,amount,currency,code,field,message,replay\n" +
		"2,1,created,E001,2026-03,BASE,1000.00,USD,,,,\n" +
		fmt.Sprintf("3,2,created,E002,2026-03,BASE,12.34,USD,,,,%d\n", a.ID) +
		fmt.Sprintf("4,3,created,E003,2026-03,BASE,30.00,USD,,,,%d\n", b.ID) +
		"5,4,created,E004,2026-03,BASE,4.00,USD,,,,\n"
	if string(latest.body) != want {
		t.Fatalf("latest result:\n%s\nwant:\n%s", latest.body, want)
	}
	orig := e.get("acme", fmt.Sprintf("/v1/submissions/%d/result.csv?original=1", id))
	if !bytes.Equal(orig.body, original.body) || !strings.Contains(string(orig.body), "too_many_decimals") {
		t.Fatalf("original result changed:\n%s\nwas:\n%s", orig.body, original.body)
	}
}

// Two replays of the same leg at once under different keys: it is applied once.
func TestReplayLegConcurrent(t *testing.T) {
	e := newEnv(t, Config{})
	id := submissionID(t, e.submit("acme", "run-1", "march.csv", csvRows("E001,2026-03,BASE,x,USD")))
	answers := make([]replayAnswer, 4)
	atOnce(4, func(i int) {
		answers[i] = decodeReplay(t, e.replay("acme", id, fmt.Sprintf("k-%d", i), legs(leg(1, "E001", fmt.Sprintf("%d.00", 10+i)))))
	})
	applied := 0
	for _, a := range answers {
		if !a.Rows[0].Settled {
			applied++
		}
		if a.Rows[0].Outcome != "created" {
			t.Fatalf("answer %+v", a)
		}
	}
	if applied != 1 {
		t.Fatalf("%d replays applied the leg, want 1", applied)
	}
	if got := e.record("acme", "E001", "2026-03", "BASE"); got.Version != 1 || e.count(`SELECT count(*) FROM record_history`) != 0 {
		t.Fatalf("record %+v", got)
	}
}

// A replay file's envelope is not a submission to replay: its rows are
// legs of the submission it corrects, keyed by that submission.
func TestReplayOfAReplayFileRefused(t *testing.T) {
	e := newEnv(t, Config{})
	submissionID(t, e.submit("acme", "march.csv", "march.csv", csvRows("E1,2026-03,BASE,x,USD")))
	rf := submissionID(t, e.submit("acme", "march.replay.csv", "march.replay.csv",
		"row,employee_ref,pay_period,component,amount,currency\n1,E1,2026-03,BASE,y,USD\n"))
	rows, _ := listRowsPage(t, e.get("acme", fmt.Sprintf("/v1/submissions/%d/rows", rf)))
	if len(rows) != 1 || rows[0].Row != 1 || rows[0].Code != "invalid_amount" {
		t.Fatalf("replay file rows %+v", rows)
	}
	wantProblem(t, e.replay("acme", rf, "k", legs(leg(1, "E1", "5.00"))), http.StatusUnprocessableEntity, "not_replayable")
	if n := e.count(`SELECT count(*) FROM records`); n != 0 {
		t.Fatalf("%d records", n)
	}
}
