// Package backoff holds the one retry-delay rule of payintake's outbound
// HTTP calls (vendor dispatch, partner notifications): an exponential delay
// with ±20% jitter, or the server's Retry-After plus up to 10%.
package backoff

import (
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Rand returns a number in [0, 1). Production code passes rand.Float64 (of
// math/rand/v2); tests pass a fixed or scripted source.
type Rand func() float64

// Jitter is the ± fraction applied to the exponential delay; RetryAfterExtra
// the most that is added on top of a server's Retry-After.
const (
	Jitter          = 0.20
	RetryAfterExtra = 0.10
)

// maxDelay bounds a delay however large the attempt number (2^62 ns would
// overflow); no retry waits more than a day.
const maxDelay = 24 * time.Hour

// Delay is the wait before retry number attempt (1 for the first retry):
// base × 2^(attempt−1) with ±20% jitter; or, when retryAfter (the value of a
// Retry-After header: seconds or an HTTP date, relative to now) can be read,
// that delay plus up to 10%.
func Delay(base time.Duration, attempt int, retryAfter string, now time.Time, r Rand) time.Duration {
	if d, ok := ParseRetryAfter(retryAfter, now); ok {
		return clamp(float64(d) * (1 + RetryAfterExtra*r()))
	}
	return Exponential(base, attempt, r)
}

// Exponential is base × 2^(attempt−1), multiplied by a factor drawn
// uniformly from [0.8, 1.2).
func Exponential(base time.Duration, attempt int, r Rand) time.Duration {
	if attempt < 1 {
		attempt = 1
	}
	if attempt > 62 {
		attempt = 62
	}
	d := float64(base) * math.Exp2(float64(attempt-1))
	return clamp(d * (1 - Jitter + 2*Jitter*r()))
}

// ParseRetryAfter reads a Retry-After header value: a number of seconds or an
// HTTP date (a date in the past means no wait). ok is false when the value is
// empty or malformed.
func ParseRetryAfter(v string, now time.Time) (time.Duration, bool) {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0, false
	}
	if secs, err := strconv.ParseInt(v, 10, 64); err == nil {
		if secs < 0 {
			return 0, false
		}
		if secs > int64(maxDelay/time.Second) {
			return maxDelay, true
		}
		return time.Duration(secs) * time.Second, true
	}
	t, err := http.ParseTime(v)
	if err != nil {
		return 0, false
	}
	if d := t.Sub(now); d > 0 {
		return min(d, maxDelay), true
	}
	return 0, true
}

func clamp(d float64) time.Duration {
	if d > float64(maxDelay) {
		return maxDelay
	}
	if d < 0 {
		return 0
	}
	return time.Duration(d)
}

// Retryable reports whether an HTTP answer with this status is tried again
// (after Delay): a timeout, too many requests, or a server-side failure that
// may pass. Any other answer that is not a success is final. (A request that
// got no answer at all, a timeout or a dropped connection, is retried too.)
func Retryable(status int) bool {
	switch status {
	case 408, 429, 500, 502, 503, 504:
		return true
	}
	return false
}
