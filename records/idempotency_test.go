package records_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"testing"
	"time"

	"github.com/payintake/payintake/pgserver/pgtest"
	"github.com/payintake/payintake/records"
)

// Idempotency-Key claims on a real database, one keyed case per path of
// ClaimIdempotencyKey and of the calls that end a claim. An expired lease is
// made by claiming with a negative lease (it ended before it began), so no
// case waits for a clock.
func TestIdempotencyKeys(t *testing.T) {
	ctx := context.Background()
	const partner, key = "acme", "run-2026-11"
	a, b := []byte("owner-a"), []byte("owner-b")
	sum := sha256.Sum256([]byte("the request body"))
	fp := sum[:]
	answer := records.StoredAnswer{Code: 202, Format: "application/json", Body: []byte(`{"envelope":1}`)}
	type step func(t *testing.T, st *records.Store)
	claim := func(owner []byte, lease time.Duration, want records.IdemClaim) step {
		return func(t *testing.T, st *records.Store) {
			t.Helper()
			got, err := st.ClaimIdempotencyKey(ctx, partner, key, owner, lease)
			if err != nil {
				t.Fatal(err)
			}
			if got.Claimed != want.Claimed || got.TakenOver != want.TakenOver || got.Status != want.Status ||
				!bytes.Equal(got.Fingerprint, want.Fingerprint) || got.Answer.Code != want.Answer.Code ||
				got.Answer.Format != want.Answer.Format || !bytes.Equal(got.Answer.Body, want.Answer.Body) ||
				got.EnvelopeID != want.EnvelopeID {
				t.Errorf("claim by %s: %+v, want %+v", owner, got, want)
			}
		}
	}
	complete := func(owner []byte, want bool) step {
		return func(t *testing.T, st *records.Store) {
			t.Helper()
			ok, err := st.CompleteIdempotencyKey(ctx, partner, key, owner, fp, 0, answer)
			if err != nil {
				t.Fatal(err)
			}
			if ok != want {
				t.Errorf("complete by %s: %v, want %v", owner, ok, want)
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
	claimed := records.IdemClaim{Claimed: true}
	busy := records.IdemClaim{Status: records.IdemInProgress}
	done := records.IdemClaim{Status: records.IdemDone, Fingerprint: fp, Answer: answer}
	for name, steps := range map[string][]step{
		"a new key is claimed":                               {claim(a, time.Minute, claimed)},
		"a key under another's live lease is busy":           {claim(a, time.Minute, claimed), claim(b, time.Minute, busy)},
		"an expired lease is taken over":                     {claim(a, -time.Second, claimed), claim(b, time.Minute, records.IdemClaim{Claimed: true, TakenOver: true})},
		"a completed key gives its stored answer back":       {claim(a, time.Minute, claimed), complete(a, true), claim(b, time.Minute, done)},
		"a completed key is not taken over however old":      {claim(a, -time.Second, claimed), complete(a, true), claim(b, time.Minute, done)},
		"the owner that lost its lease cannot complete":      {claim(a, -time.Second, claimed), claim(b, time.Minute, records.IdemClaim{Claimed: true, TakenOver: true}), complete(a, false), complete(b, true)},
		"only the owner renews":                              {claim(a, time.Minute, claimed), renew(b, false), renew(a, true)},
		"a released key is claimed again at once":            {claim(a, time.Minute, claimed), release(a), claim(b, time.Minute, claimed)},
		"another's release leaves the claim":                 {claim(a, time.Minute, claimed), release(b), claim(b, time.Minute, busy)},
		"reaping leaves a key younger than the retention":    {claim(a, time.Minute, claimed), complete(a, true), reap(time.Hour, 0), claim(b, time.Minute, done)},
		"reaping removes an old done key":                    {claim(a, time.Minute, claimed), complete(a, true), reap(-time.Second, 1), claim(b, time.Minute, claimed)},
		"reaping leaves an old key under a live lease":       {claim(a, time.Minute, claimed), reap(-time.Second, 0), claim(b, time.Minute, busy)},
		"reaping removes an old key whose lease has run out": {claim(a, -time.Second, claimed), reap(-time.Second, 1), claim(b, time.Minute, claimed)},
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
