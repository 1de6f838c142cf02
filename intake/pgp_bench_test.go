package intake_test

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/payintake/payintake/bench"
	"github.com/payintake/payintake/intake"
	"github.com/payintake/payintake/pgserver/pgtest"
	"github.com/payintake/payintake/records"
)

// BenchmarkPGPUpload compares a ~60 MB payroll file received and processed
// plain with the same file encrypted and signed by gpg (its defaults: ZIP
// compression), each a first file of a partner of its own, through
// `payintake ingest`'s door: the clock runs from the file being complete to
// the outcome committed (the sealed result included). It reports both and
// their ratio (BENCHMARKS.md, OpenPGP).
//
//	go test ./intake -run '^$' -bench PGPUpload -benchtime 1x
func BenchmarkPGPUpload(b *testing.B) {
	st := pgtest.Store(b)
	in := intake.New(st, nil)
	dir := b.TempDir()
	const rows = 1_050_000
	plainPath := filepath.Join(dir, "pay.csv")
	f, err := os.Create(plainPath)
	if err != nil {
		b.Fatal(err)
	}
	size, err := bench.File{Rows: rows}.WriteTo(f)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		b.Fatal(err)
	}
	plain, err := os.ReadFile(plainPath)
	if err != nil {
		b.Fatal(err)
	}
	var plainTotal, pgpTotal time.Duration
	for i := 0; b.Loop(); i++ {
		b.StopTimer()
		s := newPGPSide(b, st, in, fmt.Sprintf("bench-pgp-%d", i), records.PGPRequire, "ed25519", false)
		enc := s.seal(string(plain))
		encPath := filepath.Join(dir, "pay.csv.gpg")
		if err := os.WriteFile(encPath, enc, 0o644); err != nil {
			b.Fatal(err)
		}
		if err := st.AddPartner(s.ctx, records.Partner{ID: fmt.Sprintf("bench-plain-%d", i)}); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		plainRun := func() {
			start := time.Now()
			got, _, err := in.IngestFile(s.ctx, fmt.Sprintf("bench-plain-%d", i), plainPath, "bench")
			plainTotal += time.Since(start)
			if err != nil || got.Counts["created"] != rows {
				b.Fatalf("plain: %v %v", got.Counts, err)
			}
		}
		pgpRun := func() {
			start := time.Now()
			got, _, err := in.IngestFile(s.ctx, s.partner, encPath, "bench")
			pgpTotal += time.Since(start)
			if err != nil || got.Counts["created"] != rows {
				b.Fatalf("encrypted: %v %v", got.Counts, err)
			}
		}
		// Alternated: whichever runs second finds the database warmer.
		if i%2 == 0 {
			plainRun()
			pgpRun()
		} else {
			pgpRun()
			plainRun()
		}
		b.Logf("%.1f MB plain, %.1f MB encrypted: plain %v, encrypted %v (%.2f×)", float64(size)/1e6, float64(len(enc))/1e6,
			plainTotal, pgpTotal, pgpTotal.Seconds()/plainTotal.Seconds())
	}
	b.ReportMetric(plainTotal.Seconds()/float64(b.N), "plain-s/op")
	b.ReportMetric(pgpTotal.Seconds()/float64(b.N), "pgp-s/op")
	b.ReportMetric(pgpTotal.Seconds()/plainTotal.Seconds(), "pgp/plain")
}
