package httpapi

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
)

// Partner "other" probes acme's submission at every route that takes an
// id: each answer is byte for byte the answer for an id that does not
// exist, and none names acme.
func TestHostileOtherPartnersSubmissionDoesNotExist(t *testing.T) {
	e := newEnv(t, Config{})
	id := submissionID(t, e.submit("acme", "k-a", "acme-run.csv", csvRows("E1,2026-03,BASE,abc,USD")))
	const missing = 987654
	same, leaks := 0, 0
	paths := []string{"/v1/submissions/%d", "/v1/submissions/%d/result.csv", "/v1/submissions/%d/result.csv?original=1", "/v1/submissions/%d/rows"}
	for _, p := range paths {
		got := e.get("other", fmt.Sprintf(p, id))
		base := e.get("other", fmt.Sprintf(p, missing))
		if got.status != http.StatusNotFound || string(got.body) != strings.ReplaceAll(string(base.body), fmt.Sprint(missing), fmt.Sprint(id)) {
			t.Errorf("%s: %d %s, differs from a missing id's %d %s", p, got.status, got.body, base.status, base.body)
		} else {
			same++
		}
		if strings.Contains(string(got.body), "acme") {
			leaks++
			t.Errorf("%s names acme: %s", p, got.body)
		}
	}
	body := legs(leg(1, "E1", "1.00"))
	got := e.replay("other", id, "fix-1", body)
	base := e.replay("other", missing, "fix-2", body)
	if got.status != http.StatusNotFound || string(got.body) != strings.ReplaceAll(string(base.body), fmt.Sprint(missing), fmt.Sprint(id)) {
		t.Errorf("replay: %d %s, differs from a missing id's %d %s", got.status, got.body, base.status, base.body)
	} else {
		same++
	}
	if strings.Contains(string(got.body), "acme") {
		leaks++
	}
	t.Logf("SUMMARY other-partner-ids: %d of %d probes of another partner's submission answered exactly as a missing id; %d name it", same, len(paths)+1, leaks)
}
