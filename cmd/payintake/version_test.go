package main

import (
	"bytes"
	"context"
	"runtime"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/payintake/payintake/internal/observe"
)

// `payintake version` and `--version` print the build Go recorded, and
// serve exports it as payintake_build_info.
func TestVersion(t *testing.T) {
	b := observe.BuildInfo()
	var lines []string
	for _, args := range [][]string{{"version"}, {"--version"}} {
		var out, errb bytes.Buffer
		if code := run(context.Background(), args, &out, &errb); code != 0 {
			t.Fatalf("payintake %s: exit %d: %s", args[0], code, errb.String())
		}
		lines = append(lines, strings.TrimSpace(out.String()))
	}
	if lines[0] != lines[1] || lines[0] != b.String() || !strings.HasPrefix(lines[0], "payintake "+b.Version+" (revision "+b.Revision) ||
		!strings.Contains(lines[0], runtime.Version()) {
		t.Fatalf("version %q, --version %q; the build says %+v", lines[0], lines[1], b)
	}

	reg := prometheus.NewRegistry()
	registerBuildInfo(reg)
	mfs, err := reg.Gather()
	if err != nil || len(mfs) != 1 || mfs[0].GetName() != "payintake_build_info" || len(mfs[0].GetMetric()) != 1 {
		t.Fatalf("build info metric: %v %v", mfs, err)
	}
	m := mfs[0].GetMetric()[0]
	labels := map[string]string{}
	for _, l := range m.GetLabel() {
		labels[l.GetName()] = l.GetValue()
	}
	if m.GetGauge().GetValue() != 1 || labels["version"] != b.Version || labels["revision"] != b.Revision || labels["goversion"] != runtime.Version() {
		t.Fatalf("payintake_build_info %v = %v", labels, m.GetGauge().GetValue())
	}
	if ua := observe.UserAgent("notify"); ua != "payintake-notify/"+b.Version || strings.ContainsAny(ua, "() ") {
		t.Fatalf("User-Agent %q", ua)
	}
}
