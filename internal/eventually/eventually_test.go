package eventually

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
)

// TestNoErrorReturnsOnceTrue: polling goes on while the condition fails
// and stops at the first call that finds it true.
func TestNoErrorReturnsOnceTrue(t *testing.T) {
	calls := 0
	NoError(t, 10*time.Second, func() error {
		calls++
		if calls < 3 {
			return errors.New("not done")
		}
		return nil
	})
	if calls != 3 {
		t.Errorf("%d calls, want 3: two that failed and the one that held", calls)
	}
}

// TestTimeoutFailsWithTheLastError: at the deadline the test fails with
// what the condition last said, not later than the timeout and a poll.
func TestTimeoutFailsWithTheLastError(t *testing.T) {
	ft := &fatalT{}
	start := time.Now()
	i := 0
	func() {
		defer func() { _ = recover() }()
		NoError(ft, 100*time.Millisecond, func() error {
			i++
			return fmt.Errorf("attempt %d: 2 envelopes waiting", i)
		})
	}()
	if took := time.Since(start); took > time.Second {
		t.Errorf("failed after %s for a 100ms timeout", took)
	}
	if !strings.Contains(ft.msg, fmt.Sprintf("attempt %d: 2 envelopes waiting", i)) || !strings.Contains(ft.msg, "not within 100ms") {
		t.Errorf("failure %q does not carry the last error (attempt %d)", ft.msg, i)
	}
	ft.msg = ""
	func() {
		defer func() { _ = recover() }()
		True(ft, 20*time.Millisecond, func() bool { return false }, "result of %s", "a.csv")
	}()
	if !strings.Contains(ft.msg, "result of a.csv") {
		t.Errorf("True's failure %q does not say what was awaited", ft.msg)
	}
}

// fatalT records Fatalf and stops the caller as testing.T does.
type fatalT struct {
	testing.TB
	msg string
}

func (f *fatalT) Helper() {}

func (f *fatalT) Fatalf(format string, args ...any) {
	f.msg = fmt.Sprintf(format, args...)
	panic("fatal")
}
