package intake_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/payintake/payintake/intake"
	"github.com/payintake/payintake/pgserver/pgtest"
	"github.com/payintake/payintake/records"
)

// BenchmarkQueueHandoff measures the hand-off from a received file to its
// worker: from the commit that records the envelope and its job to the
// start of the transaction that processes it (envelopes.processed_at is
// that transaction's now()). Two queues run side by side on two databases,
// one with River's default fetch cooldown (100 ms) and one with the
// queue's own (10 ms); one-row files are received alternately, each after
// the previous one is done plus a gap that varies (a worker that finished
// fetches again, so the next file usually meets its cooldown), and the
// median of each is reported.
//
//	go test -run '^$' -bench QueueHandoff -benchtime 1x ./intake
func BenchmarkQueueHandoff(b *testing.B) {
	const files = 25
	type side struct {
		name string
		st   *records.Store
		q    *intake.Queue
		hand []time.Duration
	}
	ctx := context.Background()
	dir := b.TempDir()
	path := filepath.Join(dir, "one-row.csv")
	if err := os.WriteFile(path, []byte(smallFile), 0o644); err != nil {
		b.Fatal(err)
	}
	sides := []*side{{name: "river-default-100ms"}, {name: "payintake-10ms"}}
	for i, s := range sides {
		st := pgtest.Store(b)
		if err := st.AddPartner(ctx, records.Partner{ID: "acme"}); err != nil {
			b.Fatal(err)
		}
		if err := intake.MigrateQueue(ctx, st.Pool()); err != nil {
			b.Fatal(err)
		}
		cfg := intake.QueueConfig{Workers: 2, TestOnly: true}
		if i == 0 {
			cfg.FetchCooldown = 100 * time.Millisecond
		}
		q, err := intake.NewQueue(intake.New(st, nil), nil, cfg)
		if err != nil {
			b.Fatal(err)
		}
		if err := q.Start(ctx); err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			if err := q.Stop(ctx); err != nil {
				b.Errorf("stop queue: %v", err)
			}
		})
		s.st, s.q = st, q
	}
	b.ResetTimer()
	for n := 0; n < b.N; n++ {
		for i := 0; i < files; i++ {
			for _, s := range sides {
				env, err := s.st.Receive(ctx, records.Incoming{PartnerID: "acme", FileName: fmt.Sprintf("run%d-file%d.csv", n, i),
					Source: "test", Path: path}, s.q.Enqueue)
				if err != nil {
					b.Fatal(err)
				}
				committed := time.Now()
				wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
				done, err := s.st.WaitDone(wctx, env.ID, time.Millisecond)
				cancel()
				if err != nil {
					b.Fatalf("%s: envelope %d: %v", s.name, env.ID, err)
				}
				if done.Status != records.StatusProcessed {
					b.Fatalf("%s: envelope %d is %s, want processed", s.name, env.ID, done.Status)
				}
				var started time.Time
				if err := s.st.Pool().QueryRow(ctx, `SELECT processed_at FROM envelopes WHERE id = $1`, env.ID).Scan(&started); err != nil {
					b.Fatal(err)
				}
				s.hand = append(s.hand, started.Sub(committed))
				time.Sleep(time.Duration(i*37%120) * time.Millisecond) // the next upload comes a little later
			}
		}
	}
	b.StopTimer()
	for _, s := range sides {
		sorted := slices.Clone(s.hand)
		slices.Sort(sorted)
		med, worst := sorted[len(sorted)/2], sorted[len(sorted)-1]
		b.ReportMetric(float64(med.Microseconds())/1000, "ms-median-"+s.name)
		b.ReportMetric(float64(worst.Microseconds())/1000, "ms-max-"+s.name)
		b.Logf("%s: hand-off median %v, max %v over %d files", s.name, med.Round(time.Microsecond), worst.Round(time.Microsecond), len(sorted))
	}
}
