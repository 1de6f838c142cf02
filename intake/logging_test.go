package intake

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"testing"
)

func TestRiverChatterBelowInfo(t *testing.T) {
	for _, level := range []slog.Level{slog.LevelInfo, slog.LevelDebug} {
		var b bytes.Buffer
		log := slog.New(quietRiver{slog.NewTextHandler(&b, &slog.HandlerOptions{Level: level})})
		log.InfoContext(context.Background(), "JobCleaner: Ran successfully", "num_jobs_deleted", 0)
		log.Warn("notifier unhealthy")
		got := b.String()
		if !strings.Contains(got, "level=WARN") {
			t.Errorf("level %s: the warning was dropped: %q", level, got)
		}
		shown := strings.Contains(got, "level=DEBUG msg=\"JobCleaner: Ran successfully\"")
		if want := level == slog.LevelDebug; shown != want || strings.Contains(got, "level=INFO") {
			t.Errorf("level %s: River's info line shown as debug %v, want %v: %q", level, shown, want, got)
		}
	}
}
