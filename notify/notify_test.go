package notify_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/payintake/payintake/backoff"
	"github.com/payintake/payintake/notify"
)

const payroll = "employee_ref,pay_period,component,amount,currency\nE1,2026-03,BASE,10.00,USD\nE2,2026-03,BASE,12.345,USD\n"

// TestDeliveredThroughFailingReceiver: the receiver fails twice, then
// verifies the event with the official Standard Webhooks library. All three
// attempts carry the same webhook-id and body; the retries wait as vendor
// dispatch does (backoff.Delay, Retry-After honoured), by a clock the test
// moves; a wrong secret does not verify; every attempt is in the log and in
// the metrics.
func TestDeliveredThroughFailingReceiver(t *testing.T) {
	f := newFixture(t)
	wrong := "whsec_" + strings.Repeat("A", 43) + "="
	url, reqs := nodeReceiver(t, "2", f.secret, wrong)
	f.setURL("acme", url)
	env := f.send("acme", "march.csv", payroll)

	clk := newClock()
	reg := prometheus.NewRegistry()
	m := notify.NewMetrics(reg)
	half := func() float64 { return 0.5 } // jitter factor exactly 1
	n := notify.New(f.st, notify.Config{Now: clk.Now, Rand: half, RetryBase: time.Second, Metrics: m})
	deliver := func(want int) {
		t.Helper()
		got, err := n.DeliverDue(f.ctx)
		if err != nil || got != want {
			t.Fatalf("DeliverDue at %s: %d attempts (%v), want %d", clk.Now(), got, err, want)
		}
	}
	event := func() notify.Event {
		t.Helper()
		evs, err := n.Store().List(f.ctx, notify.Filter{Partner: "acme"})
		if err != nil || len(evs) != 1 {
			t.Fatalf("events: %v (%v), want one", evs, err)
		}
		return evs[0]
	}

	deliver(1)
	first := next(t, reqs)
	ev := event()
	start := clk.Now()
	if ev.State != notify.StatePending || ev.LastStatus == nil || *ev.LastStatus != 503 || ev.NextAttemptAt == nil ||
		!ev.NextAttemptAt.Equal(start.Add(backoff.Exponential(time.Second, 1, half))) {
		t.Fatalf("after a 503: %+v, want pending until %s", ev, start.Add(time.Second))
	}
	deliver(0) // not due yet
	clk.Set(*ev.NextAttemptAt)
	deliver(1)
	second := next(t, reqs)
	ev = event()
	// Retry-After: 3 plus 10% × 0.5.
	if want := clk.Now().Add(3150 * time.Millisecond); ev.State != notify.StatePending || *ev.LastStatus != 500 || !ev.NextAttemptAt.Equal(want) {
		t.Fatalf("after a 500 with Retry-After: 3: %+v, want pending until %s", ev, want)
	}
	clk.Set(ev.NextAttemptAt.Add(-time.Millisecond))
	deliver(0)
	clk.Set(*ev.NextAttemptAt)
	deliver(1)
	third := next(t, reqs)

	for i, r := range []request{first, second, third} {
		if r.Method != "POST" || r.ContentType != "application/json" || r.Headers["webhook-id"] != ev.WebhookID || r.Body != first.Body {
			t.Errorf("attempt %d: %s %s webhook-id %q, body %s; want POST application/json, webhook-id %q and the first body",
				i+1, r.Method, r.ContentType, r.Headers["webhook-id"], r.Body, ev.WebhookID)
		}
	}
	if !third.Verified[0] {
		t.Errorf("the official verifier refused the third attempt with the partner's secret: %+v", third)
	}
	if third.Verified[1] {
		t.Errorf("the official verifier accepted the event with a wrong secret")
	}
	if ev.WebhookID != fmt.Sprintf("msg_submission.processed_%d", env.ID) {
		t.Errorf("webhook-id %q, want it derived from the event", ev.WebhookID)
	}

	var body struct {
		Type      string
		Timestamp time.Time
		Data      struct {
			SubmissionID int64 `json:"submission_id"`
			Name, Status string
			Counts       map[string]int
			ResultURL    string `json:"result_url"`
			RowsURL      string `json:"rows_url"`
		}
	}
	if err := json.Unmarshal([]byte(third.Body), &body); err != nil {
		t.Fatal(err)
	}
	d := body.Data
	if body.Type != notify.SubmissionProcessed || d.SubmissionID != env.ID || d.Name != "march.csv" || d.Status != "processed" ||
		d.Counts["created"] != 1 || d.Counts["rejected"] != 1 || d.ResultURL != fmt.Sprintf("/v1/submissions/%d/result.csv", env.ID) ||
		d.RowsURL != fmt.Sprintf("/v1/submissions/%d/rows", env.ID) || body.Timestamp.IsZero() {
		t.Errorf("payload %s", third.Body)
	}

	ev = event()
	if ev.State != notify.StateDelivered || ev.Attempts != 3 || ev.DeliveredAt == nil || len(ev.Log) != 3 {
		t.Fatalf("after the third attempt: %+v", ev)
	}
	for i, want := range []int{503, 500, 204} {
		a := ev.Log[i]
		if a.Attempt != i+1 || a.Status == nil || *a.Status != want || a.FinishedAt == nil || a.URL != url {
			t.Errorf("log entry %d: %+v, want status %d", i+1, a, want)
		}
	}
	if !strings.Contains(ev.Log[0].Error, "503") {
		t.Errorf("log of the 503: %q", ev.Log[0].Error)
	}
	for result, want := range map[string]float64{"delivered": 1, "retried": 2, "failed": 0} {
		if got := counter(t, reg, "payintake_notify_deliveries_total", "result", result); got != want {
			t.Errorf("payintake_notify_deliveries_total{result=%q} = %v, want %v", result, got, want)
		}
	}
}

// counter is the value of the series of a counter with label = value.
func counter(t *testing.T, reg *prometheus.Registry, name, label, value string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == label && l.GetValue() == value {
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	return 0
}
