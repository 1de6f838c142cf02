package main

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/payintake/payintake/pgserver/pgtest"
)

// TestHostileOutboundURLs: the URLs an operator gives for the vendor
// (target add --url) and for a partner's notifications (--notify-url) are
// normalised, or refused as bad usage with a message saying what is wrong
// (before: `HTTP://…` got a raw PostgreSQL CHECK error, and a space in the
// host, a user name and password, and cloud metadata addresses were stored).
func TestHostileOutboundURLs(t *testing.T) {
	c := &cli{t: t, url: pgtest.New(t), dir: t.TempDir()}
	c.ok("partner", "add", "acme")
	bad := map[string]string{
		"http://a b/":                        "a space",
		"HTTP://vendor.example/a b":          "a space",
		"http://user:secret@vendor.example/": "user name or password",
		"http://169.254.169.254/latest":      "link-local",
		"http://[fd00:ec2::254]/":            "AWS instance metadata",
		"http://100.100.100.200/":            "Alibaba",
		"ftp://vendor.example/":              "not http or https",
		"http://vendor.example:99999/":       "not 1 to 65535",
		"http://vendor_x.example/":           "invalid host name",
	}
	for raw, why := range bad {
		for _, args := range [][]string{
			{"target", "add", "vendor", "--url", raw},
			{"partner", "set", "acme", "--notify-url", raw},
		} {
			code, _, errs := c.run(args...)
			if code != 2 || !strings.Contains(errs, why) || !strings.Contains(errs, args[3]) || strings.Contains(errs, "SQLSTATE") || strings.Contains(errs, ":secret@") {
				t.Errorf("%s %s %q: exit %d: %s; want usage (2) naming the flag and saying %q", args[0], args[1], raw, code, errs, why)
			}
		}
	}
	var ts []map[string]any
	if err := json.Unmarshal([]byte(c.ok("target", "list", "--format", "json")), &ts); err != nil || len(ts) != 0 {
		t.Fatalf("a refused URL was stored: %v %v", ts, err)
	}

	c.ok("target", "add", "vendor", "--url", "HTTPS://Vendor.Example:8443/Batches")
	if err := json.Unmarshal([]byte(c.ok("target", "list", "--format", "json")), &ts); err != nil || len(ts) != 1 ||
		ts[0]["url"] != "https://vendor.example:8443/Batches" {
		t.Errorf("target list: %v %v, want the URL normalised", ts, err)
	}
	c.ok("partner", "set", "acme", "--notify-url", "HTTP://10.0.0.7/Hook")
	var ps []map[string]any
	if err := json.Unmarshal([]byte(c.ok("partner", "list", "--format", "json")), &ps); err != nil || len(ps) != 1 ||
		ps[0]["notify_url"] != "http://10.0.0.7/Hook" {
		t.Errorf("partner list: %v %v, want the private address kept and the URL normalised", ps, err)
	}
}

// TestHostileRedirectShownByDispatchStatus: a vendor answering 302 with a
// Location on another server: the foreground dispatch counts no line
// paid, the other server gets nothing, and dispatch status shows each line
// dead-lettered with status 302 and where the vendor pointed.
func TestHostileRedirectShownByDispatchStatus(t *testing.T) {
	c := &cli{t: t, url: pgtest.New(t), dir: t.TempDir()}
	var elsewhere, asked atomic.Int32
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		elsewhere.Add(1)
	}))
	defer other.Close()
	loc := other.URL + "/batches"
	vendor := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		asked.Add(1)
		http.Redirect(w, r, loc, http.StatusFound)
	}))
	defer vendor.Close()
	c.ok("target", "add", "payroll", "--url", vendor.URL, "--rate-limit", "0")
	c.ok("partner", "add", "acme", "--target", "payroll")
	c.ok("ingest", "--partner", "acme", c.file("nov.csv", "employee_ref,pay_period,component,amount,currency\nE1,2026-11,BASE,100.00,USD\nE2,2026-11,BASE,200.00,USD\n"))
	c.ok("records", "lock", "--partner", "acme", "--period", "2026-11")
	code, out, errs := c.run("dispatch", "--partner", "acme", "--period", "2026-11")
	if code != 1 || !strings.Contains(out, "0 succeeded, 0 pending, 2 dead-lettered") || !strings.Contains(errs, "2 line(s) dead-lettered") {
		t.Errorf("dispatch: exit %d, printed %q %q; want exit 1 and both lines dead-lettered", code, out, errs)
	}
	if asked.Load() != 1 || elsewhere.Load() != 0 {
		t.Errorf("vendor asked %d times, the Location's server %d times; want 1 and 0", asked.Load(), elsewhere.Load())
	}
	var st []struct {
		Succeeded   int `json:"succeeded"`
		Failed      int `json:"failed"`
		Attempts    int `json:"attempts"`
		DeadLetters []struct {
			Status int    `json:"status"`
			Detail string `json:"detail"`
		} `json:"dead_letters"`
	}
	if err := json.Unmarshal([]byte(c.ok("dispatch", "status", "--format", "json")), &st); err != nil || len(st) != 1 {
		t.Fatalf("status: %v %v", st, err)
	}
	if st[0].Succeeded != 0 || st[0].Failed != 2 || st[0].Attempts != 1 || len(st[0].DeadLetters) != 2 {
		t.Fatalf("status %+v", st[0])
	}
	for _, dl := range st[0].DeadLetters {
		if dl.Status != http.StatusFound || !strings.Contains(dl.Detail, "redirect to "+loc+" not followed") {
			t.Errorf("dead letter %+v", dl)
		}
	}
	if text := c.ok("dispatch", "status", "--partner", "acme"); !strings.Contains(text, "302 redirect to "+loc) {
		t.Errorf("dispatch status (text) does not show the 302 and its Location:\n%s", text)
	}
}
