package main

import (
	"encoding/json"
	"strings"
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
