package intake_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/payintake/payintake/intake"
	"github.com/payintake/payintake/records"
)

// TestQueueCollector reads the backlog at scrape time: an envelope received
// (its job queued, no worker running) waits, and its age is the time since
// it was received; a scrape whose queries run out of time reports an error
// instead of stale numbers.
func TestQueueCollector(t *testing.T) {
	f := newFixture(t, records.Partner{})
	if err := intake.MigrateQueue(f.ctx, f.store.Pool()); err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(intake.NewQueueCollector(f.store.Pool(), 5*time.Second))
	want := func(state string) string {
		return "# HELP payintake_envelopes_waiting Received envelopes not processed yet (their result is not available).\n# TYPE payintake_envelopes_waiting gauge\n" + state
	}
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want("payintake_envelopes_waiting 0\n")), "payintake_envelopes_waiting"); err != nil {
		t.Error(err)
	}
	q, err := intake.NewQueue(f.in, nil, intake.QueueConfig{}) // not started: jobs stay available
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(f.dir, "waiting.csv")
	if err := os.WriteFile(path, []byte("employee_ref,pay_period,component,amount,currency\nE1,2026-03,BASE,1.00,USD\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	env, err := f.store.Receive(f.ctx, records.Incoming{PartnerID: f.partner, FileName: "waiting.csv", Source: "sftp", Path: path}, q.Enqueue)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.store.Pool().Exec(f.ctx, `UPDATE envelopes SET received_at = now() - interval '10 minutes' WHERE id = $1`, env.ID); err != nil {
		t.Fatal(err)
	}
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want("payintake_envelopes_waiting 1\n")), "payintake_envelopes_waiting"); err != nil {
		t.Error(err)
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			name := mf.GetName()
			for _, l := range m.GetLabel() {
				name += "/" + l.GetValue()
			}
			got[name] = m.GetGauge().GetValue()
		}
	}
	if age := got["payintake_oldest_waiting_envelope_age_seconds"]; age < 600 || age > 700 {
		t.Errorf("oldest waiting age %v s, want about 600", age)
	}
	if got["payintake_ready"] != 1 {
		t.Errorf("payintake_ready %v, want 1", got["payintake_ready"])
	}
	if got["payintake_processing_jobs/available"] != 1 || got["payintake_processing_jobs/running"] != 0 {
		t.Errorf("processing jobs %v: want 1 available", got)
	}

	slow := prometheus.NewRegistry()
	slow.MustRegister(intake.NewQueueCollector(f.store.Pool(), time.Nanosecond))
	mfs, err = slow.Gather()
	if err == nil || !strings.Contains(err.Error(), "waiting envelopes") {
		t.Errorf("a scrape past its timeout: %v, want an error", err)
	}
	readyShown := false
	for _, mf := range mfs {
		if mf.GetName() == "payintake_ready" {
			readyShown = mf.GetMetric()[0].GetGauge().GetValue() == 0
		}
	}
	if !readyShown {
		t.Error("payintake_ready is not 0 when the database did not answer")
	}
}
