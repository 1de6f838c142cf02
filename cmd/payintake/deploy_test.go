package main

import (
	"context"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	outbound "github.com/payintake/payintake/dispatch"
	"github.com/payintake/payintake/intake"
	"github.com/payintake/payintake/intake/sftpd"
	"github.com/payintake/payintake/internal/observe"
)

// descNames is a Registerer that keeps the names of what is registered.
type descNames map[string]bool

var fqName = regexp.MustCompile(`fqName: "([^"]+)"`)

func (d descNames) Register(c prometheus.Collector) error {
	ch := make(chan *prometheus.Desc, 64)
	go func() { c.Describe(ch); close(ch) }()
	for desc := range ch {
		if m := fqName.FindStringSubmatch(desc.String()); m != nil {
			d[m[1]] = true
		}
	}
	return nil
}

func (d descNames) MustRegister(cs ...prometheus.Collector) {
	for _, c := range cs {
		_ = d.Register(c)
	}
}

func (d descNames) Unregister(prometheus.Collector) bool { return false }

// TestDeployNamesServedMetrics: every metric the alerting rules and the
// Grafana dashboard in deploy/ use is one serve registers (a renamed metric
// would silently empty a panel or never fire an alert).
func TestDeployNamesServedMetrics(t *testing.T) {
	names := descNames{}
	names.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	intake.NewMetrics(names)
	sftpd.NewMetrics(names)
	observe.NewHTTPMetrics(names)
	pool, err := pgxpool.New(context.Background(), "postgres://127.0.0.1:1/none") // never connects: Describe only
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	registerDBMetrics(names, pool)
	outbound.NewMetrics(names)

	used := regexp.MustCompile(`\b(?:payintake|pgxpool|go|process)_[a-z_]+\b`)
	for _, f := range []string{"../../deploy/prometheus/alerts.yml", "../../deploy/grafana/payintake.json"} {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, m := range used.FindAllString(string(b), -1) {
			base := m
			for _, suf := range []string{"_bucket", "_count", "_sum"} {
				if !names[base] && strings.HasSuffix(base, suf) {
					base = strings.TrimSuffix(base, suf)
				}
			}
			if !names[base] {
				t.Errorf("%s uses %s, which serve does not export", f, m)
			}
			n++
		}
		if n < 5 {
			t.Errorf("%s: only %d metric names found", f, n)
		}
	}
}
