package intake_test

import (
	"testing"

	"github.com/payintake/payintake/intake"
)

func TestReplayFileNames(t *testing.T) {
	for name, want := range map[string]string{
		"march.replay.csv": "march.result.csv", "March.REPLAY.txt": "March.result.csv", "a.b.replay.x": "a.b.result.csv", "march.replay-2.csv": "march.result.csv",
	} {
		if !intake.IsReplayFile(name) {
			t.Errorf("%s is not taken for a replay file", name)
		} else if got := intake.ReplayedName(name); got != want {
			t.Errorf("%s replays %q, want %q", name, got, want)
		}
	}
	for _, name := range []string{"march.csv", "replay.csv", ".replay.csv", "march.replays.csv", "march.replay-x.csv", "a.b.replay"} {
		if intake.IsReplayFile(name) {
			t.Errorf("%s taken for a replay file", name)
		}
	}
}
