package records_test

import (
	"context"
	"testing"
	"time"

	"github.com/payintake/payintake/pgserver/pgtest"
	"github.com/payintake/payintake/records"
)

// A storm of failed logins from one address (the 200-login test saw ~200)
// keeps answering with a lock no longer than LoginLockMax; it once overflowed
// PostgreSQL's interval and turned every further failure into a 500.
func TestLoginFailureStormStaysBounded(t *testing.T) {
	st := pgtest.Store(t)
	ctx := context.Background()
	var last time.Time
	for i := 0; i < 300; i++ {
		until, err := st.RecordLoginFailure(ctx, "alice", "192.0.2.7")
		if err != nil {
			t.Fatalf("failure %d: %v", i+1, err)
		}
		last = until
	}
	if last.IsZero() {
		t.Fatal("300 failures: not locked")
	}
	if d := time.Until(last); d > records.LoginLockMax+time.Minute || d < records.LoginLockMax-time.Minute {
		t.Fatalf("300 failures: locked for %v, want about %v", d, records.LoginLockMax)
	}
}
