package sftpd_test

import (
	"bytes"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"

	"github.com/payintake/payintake/intake"
	"github.com/payintake/payintake/intake/httpapi"
	"github.com/payintake/payintake/partnerauth"
	"github.com/payintake/payintake/records"
	"github.com/payintake/payintake/workbook/workbooktest"
)

// TestEveryDoorTakesAWorkbook: an .xlsx (openpyxl's, payroll sheet first)
// uploaded over SFTP, posted to the HTTP API and ingested from the CLI is
// read as its sheet's rows alike: four records created, the same result
// file, on the sheet's row numbers.
func TestEveryDoorTakesAWorkbook(t *testing.T) {
	book := workbooktest.Openpyxl(t, workbooktest.Payroll, "PAYROLL_FIRST=1")
	z := newDropZone(t, zoneOpts{})
	in := intake.New(z.store, nil)
	api := httptest.NewServer(httpapi.New(in, partnerauth.New(z.store), httpapi.Config{SpoolDir: t.TempDir()}).Handler())
	t.Cleanup(api.Close)
	results := map[string][]byte{}
	newest := func(partner string) records.Envelope {
		t.Helper()
		env, err := z.store.Submissions(z.ctx, records.SubmissionFilter{Partner: partner, Limit: 1})
		if err != nil || len(env) != 1 {
			t.Fatalf("submissions of %s: %v %v", partner, env, err)
		}
		return env[0]
	}
	check := func(door string, env records.Envelope) {
		t.Helper()
		var b bytes.Buffer
		if err := z.store.WriteResult(z.ctx, env.ID, &b); err != nil {
			t.Fatal(err)
		}
		if env.Status != records.StatusProcessed || fmt.Sprint(env.Counts) != "map[created:4]" {
			t.Errorf("%s: status %s counts %v, want 4 created:\n%s", door, env.Status, env.Counts, b.Bytes())
		}
		results[door] = b.Bytes()
	}

	c := z.login("book-sftp", z.partner("book-sftp"))
	put(t, c, "/inbox/pay.xlsx", book)
	waitResult(t, c, "pay.result.csv")
	check("sftp", newest("book-sftp"))

	if err := z.store.AddPartner(z.ctx, records.Partner{ID: "book-cli"}); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "pay.xlsx")
	if err := os.WriteFile(path, book, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, _, err := in.IngestFile(z.ctx, "book-cli", path, "cli"); err != nil {
		t.Fatal(err)
	}
	check("cli", newest("book-cli"))

	if err := z.store.AddPartner(z.ctx, records.Partner{ID: "book-http"}); err != nil {
		t.Fatal(err)
	}
	tok, err := z.store.IssueAPIToken(z.ctx, "book-http")
	if err != nil {
		t.Fatal(err)
	}
	req, _ := http.NewRequest("POST", api.URL+"/v1/submissions?name=pay.xlsx", bytes.NewReader(book))
	req.Header.Set("Authorization", "Bearer "+tok)
	req.Header.Set("Idempotency-Key", "pay.xlsx")
	req.Header.Set("Content-Type", "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusCreated {
		t.Fatalf("POST /v1/submissions: %d", resp.StatusCode)
	}
	check("http", newest("book-http"))

	if !bytes.HasPrefix(results["sftp"], []byte(records.ResultHeader+"2,1,created,00123,")) {
		t.Errorf("SFTP result should start at the sheet's row 2 with 00123:\n%s", results["sftp"])
	}
	for door, r := range results {
		if !bytes.Equal(r, results["sftp"]) {
			t.Errorf("%s: result\n%s\ndiffers from SFTP's\n%s", door, r, results["sftp"])
		}
	}
}
