package httpapi

import (
	"net/http"
	"testing"
)

// A revoked token is refused by the very next request.
func TestRevokedTokenRefusedAtOnce(t *testing.T) {
	e := newEnv(t, Config{})
	wantStatus(t, e.get("acme", "/v1/submissions"), http.StatusOK)
	if err := e.st.RevokeAPIToken(e.ctx, "acme", e.token["acme"][:10]); err != nil {
		t.Fatal(err)
	}
	wantProblem(t, e.get("acme", "/v1/submissions"), http.StatusUnauthorized, "unauthorized")
	wantProblem(t, e.submit("acme", "k", "a.csv", firstRun), http.StatusUnauthorized, "unauthorized")
	wantStatus(t, e.get("other", "/v1/submissions"), http.StatusOK)
}
