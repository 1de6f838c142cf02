package main

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/payintake/payintake/pgserver/pgtest"
)

// TestNotifyCLI: partner set --notify-url checks the URL and warns when the
// partner has no secret to sign with; a processed file's event is listed
// (filters, JSON with its log) and can be queued again by redeliver.
func TestNotifyCLI(t *testing.T) {
	c := &cli{t: t, url: pgtest.New(t), dir: t.TempDir()}
	c.ok("partner", "add", "acme")
	if code, _, errs := c.run("partner", "set", "acme", "--notify-url", "ftp://x"); code != 2 || !strings.Contains(errs, "--notify-url") {
		t.Fatalf("a non-http URL: exit %d, %s", code, errs)
	}
	code, out, errs := c.run("partner", "set", "acme", "--notify-url", "http://127.0.0.1:9/events")
	if code != 0 || !strings.Contains(out, "notify-url=http://127.0.0.1:9/events") || !strings.Contains(errs, "payintake partner webhook-secret acme") {
		t.Fatalf("partner set --notify-url: exit %d, %s %s", code, out, errs)
	}
	c.ok("ingest", "--partner", "acme", c.file("march.csv", "employee_ref,pay_period,component,amount,currency\nE1,2026-03,BASE,10.00,USD\n"))

	var evs []struct {
		ID        int64  `json:"id"`
		Type      string `json:"type"`
		State     string `json:"state"`
		WebhookID string `json:"webhook_id"`
		Payload   struct {
			Data struct {
				Counts map[string]int `json:"counts"`
			} `json:"data"`
		} `json:"payload"`
		Log []any `json:"attempt_log"`
	}
	if err := json.Unmarshal([]byte(c.ok("notify", "list", "--partner", "acme", "--format", "json")), &evs); err != nil {
		t.Fatal(err)
	}
	if len(evs) != 1 || evs[0].Type != "submission.processed" || evs[0].State != "pending" || evs[0].Payload.Data.Counts["created"] != 1 || evs[0].Log == nil {
		t.Fatalf("notify list: %+v", evs)
	}
	if out := c.ok("notify", "list", "--status", "delivered"); strings.Contains(out, evs[0].WebhookID) {
		t.Fatalf("--status delivered lists a pending event:\n%s", out)
	}
	if out := c.ok("notify", "list"); !strings.Contains(out, evs[0].WebhookID) || !strings.Contains(out, "pending") {
		t.Fatalf("notify list:\n%s", out)
	}
	if code, _, errs := c.run("notify", "list", "--status", "lost"); code != 2 || !strings.Contains(errs, "pending, delivered, failed") {
		t.Fatalf("a bad --status: exit %d, %s", code, errs)
	}
	out = c.ok("notify", "redeliver", fmt.Sprint(evs[0].ID), "--by", "ops")
	if !strings.Contains(out, evs[0].WebhookID) || !strings.Contains(out, "queued again") {
		t.Fatalf("notify redeliver: %s", out)
	}
	if code, _, errs := c.run("notify", "redeliver", "999"); code != 1 || !strings.Contains(errs, "no notification event 999") {
		t.Fatalf("redeliver an unknown event: exit %d, %s", code, errs)
	}
}
