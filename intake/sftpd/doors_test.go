package sftpd_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/payintake/payintake/intake"
	"github.com/payintake/payintake/intake/httpapi"
	"github.com/payintake/payintake/partnerauth"
	"github.com/payintake/payintake/records"
)

// doorFile has a row of each kind a first run can give: created, rejected
// (with a column), and a formula-looking value echoed escaped.
const doorFile = "employee_ref,pay_period,component,amount,currency\n" +
	"E001,2026-11,BASE,4000.00,USD\n" +
	"E002,2026-11,BASE,12.345,USD\n" +
	"=1+1,2026-11,BASE,10.00,USD\n"

// TestEveryDoorSubmits: the SFTP drop zone, `payintake ingest` and POST
// /v1/submissions all go through Intake.Submit (each one's receipt is logged
// by it, and only by it), so the same bytes under the same name give the
// same envelope status, counts and result file, byte for byte, whatever the
// door; and the doors share one submission key: the same bytes sent again
// by the other two doors are replays of the first envelope.
func TestEveryDoorSubmits(t *testing.T) {
	z := newDropZone(t, zoneOpts{})
	log := slog.New(slog.NewTextHandler(z.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	in := intake.New(z.store, log)
	api := httptest.NewServer(httpapi.New(in, partnerauth.New(z.store), httpapi.Config{SpoolDir: t.TempDir()}).Handler())
	t.Cleanup(api.Close)
	dir := t.TempDir()
	path := filepath.Join(dir, "run.csv")
	if err := os.WriteFile(path, []byte(doorFile), 0o644); err != nil {
		t.Fatal(err)
	}

	type outcome struct {
		id     int64
		status string
		counts map[string]int
		result []byte
	}
	resultOf := func(id int64) []byte {
		var b bytes.Buffer
		if err := z.store.WriteResult(z.ctx, id, &b); err != nil {
			t.Fatal(err)
		}
		return b.Bytes()
	}
	sftpDoor := func(partner string) outcome {
		c := z.login(partner, z.partner(partner))
		put(t, c, "/inbox/run.csv", []byte(doorFile))
		res := waitResult(t, c, "run.result.csv")
		env, err := z.store.Submissions(z.ctx, records.SubmissionFilter{Partner: partner, Limit: 1}) // the newest
		if err != nil || len(env) != 1 {
			t.Fatalf("submissions of %s: %v %v", partner, env, err)
		}
		return outcome{id: env[0].ID, status: env[0].Status, counts: env[0].Counts, result: res}
	}
	cliDoor := func(partner string) outcome {
		if err := z.store.AddPartner(z.ctx, records.Partner{ID: partner}); err != nil && !errors.Is(err, records.ErrExists) {
			t.Fatal(err)
		}
		got, out, err := in.IngestFile(z.ctx, partner, path, "cli")
		if err != nil {
			t.Fatal(err)
		}
		return outcome{id: got.ID, status: got.Status, counts: out.Counts, result: resultOf(out.ID)}
	}
	httpDoor := func(partner string) (outcome, http.Header) {
		if err := z.store.AddPartner(z.ctx, records.Partner{ID: partner}); err != nil && !errors.Is(err, records.ErrExists) {
			t.Fatal(err)
		}
		tok, err := z.store.IssueAPIToken(z.ctx, partner)
		if err != nil {
			t.Fatal(err)
		}
		req, _ := http.NewRequest("POST", api.URL+"/v1/submissions?name=run.csv", strings.NewReader(doorFile))
		req.Header.Set("Authorization", "Bearer "+tok)
		req.Header.Set("Idempotency-Key", "run.csv")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusCreated {
			t.Fatalf("POST /v1/submissions: %d %s", resp.StatusCode, body)
		}
		var sub struct {
			ID     int64          `json:"id"`
			Status string         `json:"status"`
			Counts map[string]int `json:"counts"`
		}
		if err := json.Unmarshal(body, &sub); err != nil {
			t.Fatal(err)
		}
		for k, v := range sub.Counts {
			if v == 0 {
				delete(sub.Counts, k) // the API lists every outcome, zeros included
			}
		}
		return outcome{id: sub.ID, status: sub.Status, counts: sub.Counts, result: resultOf(sub.ID)}, resp.Header
	}

	// Three partners, one door each: the same outcome.
	bySFTP, byCLI := sftpDoor("door-sftp"), cliDoor("door-cli")
	byHTTP, _ := httpDoor("door-http")
	want := map[string]int{"created": 2, "rejected": 1}
	for door, o := range map[string]outcome{"sftp": bySFTP, "cli": byCLI, "http": byHTTP} {
		if o.status != records.StatusProcessed || fmt.Sprint(o.counts) != fmt.Sprint(want) {
			t.Errorf("%s: status %s counts %v, want processed %v", door, o.status, o.counts, want)
		}
		if !bytes.Equal(o.result, bySFTP.result) {
			t.Errorf("%s: result file\n%s\ndiffers from the SFTP one\n%s", door, o.result, bySFTP.result)
		}
	}
	if !bytes.Contains(bySFTP.result, []byte("too_many_decimals,amount")) || !bytes.Contains(bySFTP.result, []byte("'=1+1")) {
		t.Errorf("result file lacks the rejected row or the escaped value:\n%s", bySFTP.result)
	}

	// One partner, the three doors in turn: one envelope, two replays.
	again, err := in.Submit(z.ctx, intake.Submission{Partner: "door-sftp", Name: "run.csv", Path: path, Source: "cli"}, &intake.SubmitOpts{Wait: true})
	if err != nil || again.Received.Status != records.StatusRepeat || again.Outcome.ID != bySFTP.id {
		t.Fatalf("ingest after SFTP: %+v %v, want a replay of envelope %d", again, err, bySFTP.id)
	}
	viaHTTP, h := httpDoor("door-sftp")
	if viaHTTP.id != bySFTP.id || h.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("HTTP after SFTP: submission %d (replayed %q), want envelope %d replayed", viaHTTP.id, h.Get("Idempotent-Replayed"), bySFTP.id)
	}

	// Each door's receipt was logged by Submit.
	for _, door := range []string{"sftp", "cli", "http"} {
		if !regexp.MustCompile(`msg="envelope received".* source=` + door + `\b`).MatchString(z.logs.String()) {
			t.Errorf("no receipt logged by Submit for door %s", door)
		}
	}
}
