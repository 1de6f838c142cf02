package records_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/payintake/payintake/pgserver/pgtest"
	"github.com/payintake/payintake/records"
)

// Idempotency-Key leases on a real database, one keyed case per path of
// LeaseIdempotencyKey and of the calls that end a lease. A lease that ran
// out is made by leasing with a negative duration (it ended before it
// began), so no case waits for a clock.
func TestIdempotencyKeys(t *testing.T) {
	ctx := context.Background()
	const partner, key = "acme", "run-2026-11"
	a, b := []byte("owner-a"), []byte("owner-b")
	type step func(t *testing.T, st *records.Store)
	lease := func(owner []byte, d time.Duration, want records.KeyLease) step {
		return func(t *testing.T, st *records.Store) {
			t.Helper()
			got, err := st.LeaseIdempotencyKey(ctx, partner, key, owner, d)
			if err != nil {
				t.Fatal(err)
			}
			if got != want {
				t.Errorf("lease by %s: %+v, want %+v", owner, got, want)
			}
		}
	}
	renew := func(owner []byte, want bool) step {
		return func(t *testing.T, st *records.Store) {
			t.Helper()
			ok, err := st.RenewIdempotencyLease(ctx, partner, key, owner, time.Minute)
			if err != nil {
				t.Fatal(err)
			}
			if ok != want {
				t.Errorf("renew by %s: %v, want %v", owner, ok, want)
			}
		}
	}
	release := func(owner []byte) step {
		return func(t *testing.T, st *records.Store) {
			t.Helper()
			if err := st.ReleaseIdempotencyKey(ctx, partner, key, owner); err != nil {
				t.Fatal(err)
			}
		}
	}
	reap := func(retention time.Duration, want int64) step {
		return func(t *testing.T, st *records.Store) {
			t.Helper()
			n, err := st.ReapIdempotencyKeys(ctx, retention, 10)
			if err != nil {
				t.Fatal(err)
			}
			if n != want {
				t.Errorf("reaped %d keys, want %d", n, want)
			}
		}
	}
	// receive records the key's submission; process gives it its outcome.
	var received records.Envelope
	receive := func(t *testing.T, st *records.Store) {
		t.Helper()
		path := filepath.Join(t.TempDir(), "body")
		if err := os.WriteFile(path, []byte("employee_ref,pay_period,component,amount,currency\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		env, err := st.Receive(ctx, records.Incoming{PartnerID: partner, FileName: "a.csv", Key: key, Source: "http", Path: path}, nil)
		if err != nil {
			t.Fatal(err)
		}
		received = env
	}
	process := func(t *testing.T, st *records.Store) {
		t.Helper()
		if _, err := st.Pool().Exec(ctx, `UPDATE envelopes SET status = 'processed' WHERE id = $1`, received.ID); err != nil {
			t.Fatal(err)
		}
	}
	leased := records.KeyLease{Leased: true}
	takenOver := records.KeyLease{Leased: true, TakenOver: true}
	busy := records.KeyLease{}
	for name, steps := range map[string][]step{
		"a new key is leased":                               {lease(a, time.Minute, leased)},
		"a key under another's live lease is busy":          {lease(a, time.Minute, leased), lease(b, time.Minute, busy)},
		"a lease that ran out is taken over":                {lease(a, -time.Second, leased), lease(b, time.Minute, takenOver)},
		"a live lease on a waiting submission is busy":      {lease(a, time.Minute, leased), receive, lease(b, time.Minute, busy)},
		"a live lease on a processed submission is taken":   {lease(a, time.Minute, leased), receive, process, lease(b, time.Minute, takenOver)},
		"the holder that lost its lease cannot renew it":    {lease(a, -time.Second, leased), lease(b, time.Minute, takenOver), renew(a, false), renew(b, true)},
		"only the holder renews":                            {lease(a, time.Minute, leased), renew(b, false), renew(a, true)},
		"a released key is leased again at once":            {lease(a, time.Minute, leased), release(a), lease(b, time.Minute, leased)},
		"another's release leaves the lease":                {lease(a, time.Minute, leased), release(b), lease(b, time.Minute, busy)},
		"reaping leaves a lease younger than the retention": {lease(a, -time.Second, leased), reap(time.Hour, 0), lease(b, time.Minute, takenOver)},
		"reaping leaves an old key under a live lease":      {lease(a, time.Minute, leased), reap(-time.Second, 0), lease(b, time.Minute, busy)},
		"reaping removes an old lease that ran out":         {lease(a, -time.Second, leased), reap(-time.Second, 1), lease(b, time.Minute, leased)},
	} {
		t.Run(name, func(t *testing.T) {
			st := pgtest.Store(t)
			if err := st.AddPartner(ctx, records.Partner{ID: partner}); err != nil {
				t.Fatal(err)
			}
			for _, s := range steps {
				s(t, st)
			}
		})
	}
}
