// Package eventually waits, in tests, for what another goroutine or process
// does: a file processed, a log line written, a row delivered. It polls a
// condition the test states, with a deadline, instead of each test writing
// its own loop of sleeps. It is for waiting for something to happen; a test
// that proves nothing happened uses a signal or a clock it controls.
package eventually

import (
	"fmt"
	"testing"
	"time"
)

// The first poll comes at once, the next after firstWait, then each wait
// doubles up to maxWait: quick for what is nearly done, light on the
// machine for what takes seconds.
const (
	firstWait = 10 * time.Millisecond
	maxWait   = 200 * time.Millisecond
)

// NoError calls try until it returns nil. If it has not within timeout, t
// fails (Fatal) with try's last error, which should say what was awaited
// and what was seen. try may fail t itself for what cannot get better.
func NoError(t testing.TB, timeout time.Duration, try func() error) {
	t.Helper()
	if err := poll(timeout, try); err != nil {
		t.Fatalf("not within %s: %v", timeout, err)
	}
}

// True calls cond until it returns true. If it has not within timeout, t
// fails (Fatal) saying what was awaited (format and args, as fmt.Sprintf).
func True(t testing.TB, timeout time.Duration, cond func() bool, format string, args ...any) {
	t.Helper()
	NoError(t, timeout, func() error {
		if cond() {
			return nil
		}
		return fmt.Errorf(format, args...)
	})
}

// poll returns nil once try does, or try's last error at the deadline.
func poll(timeout time.Duration, try func() error) error {
	deadline := time.Now().Add(timeout)
	wait := firstWait
	for {
		err := try()
		if err == nil || !time.Now().Before(deadline) {
			return err
		}
		time.Sleep(min(wait, time.Until(deadline)))
		wait = min(2*wait, maxWait)
	}
}
