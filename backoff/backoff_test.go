package backoff

import (
	"math/rand/v2"
	"net/http"
	"testing"
	"time"
)

func fixed(v float64) Rand { return func() float64 { return v } }

func TestExponentialBounds(t *testing.T) {
	base := 2 * time.Second
	for attempt := 1; attempt <= 6; attempt++ {
		nominal := base << (attempt - 1)
		lo, hi := time.Duration(float64(nominal)*0.8), time.Duration(float64(nominal)*1.2)
		if got := Exponential(base, attempt, fixed(0)); got != lo {
			t.Errorf("attempt %d, r=0: %v, want %v", attempt, got, lo)
		}
		if got := Exponential(base, attempt, fixed(0.5)); got != nominal {
			t.Errorf("attempt %d, r=0.5: %v, want %v", attempt, got, nominal)
		}
		src := rand.New(rand.NewPCG(1, uint64(attempt)))
		seenLow, seenHigh := false, false
		for range 2000 {
			d := Exponential(base, attempt, src.Float64)
			if d < lo || d >= hi {
				t.Fatalf("attempt %d: delay %v outside [%v, %v)", attempt, d, lo, hi)
			}
			seenLow = seenLow || d < nominal*9/10
			seenHigh = seenHigh || d > nominal*11/10
		}
		if !seenLow || !seenHigh {
			t.Errorf("attempt %d: jitter does not spread over ±20%% (low %v high %v)", attempt, seenLow, seenHigh)
		}
	}
	if got := Exponential(time.Second, 500, fixed(0.99)); got != maxDelay {
		t.Errorf("huge attempt: %v, want the cap %v", got, maxDelay)
	}
}

func TestRetryAfter(t *testing.T) {
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	date := now.Add(30 * time.Second).Format(http.TimeFormat)
	cases := []struct {
		header string
		r      float64
		want   time.Duration
	}{
		{"7", 0, 7 * time.Second},
		{"7", 0.5, 7*time.Second + 350*time.Millisecond},
		{" 10 ", 0.999999, 10*time.Second + 999999*time.Microsecond},
		{date, 0, 30 * time.Second},
		{date, 0.5, 31500 * time.Millisecond},
		{now.Add(-time.Minute).Format(http.TimeFormat), 0.5, 0},
		{"", 0.5, 8 * time.Second},     // attempt 3 of 2s, no jitter at 0.5
		{"soon", 0.5, 8 * time.Second}, // unreadable: the exponential rule
		{"-3", 0.5, 8 * time.Second},   // negative: unreadable
	}
	for _, c := range cases {
		if got := Delay(2*time.Second, 3, c.header, now, fixed(c.r)); got != c.want {
			t.Errorf("Retry-After %q, r=%v: %v, want %v", c.header, c.r, got, c.want)
		}
	}
}
