package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/payintake/payintake/pgserver/pgtest"
	"github.com/payintake/payintake/records"
)

// badFileNames is the one table every door is tried with.
var badFileNames = []string{
	"pay\u202eroll.csv",               // right-to-left override: shows as "payllor.csv"
	"pay\u2066roll.csv",               // bidi isolate
	"pay\u200broll.csv",               // zero-width space
	"\ufeffpayroll.csv",               // byte order mark
	"pay\x01roll.csv",                 // C0 control
	"pay\x7froll.csv",                 // DEL
	"pay\u0085roll.csv",               // C1 control (NEL)
	"pay\troll.csv",                   // tab
	"pay\nroll.csv",                   // line feed
	"pay\\roll.csv",                   // backslash
	" payroll.csv",                    // leading space
	"payroll.csv ",                    // trailing space
	"payroll\u00a0",                   // trailing NBSP
	"pay\xffroll.csv",                 // invalid UTF-8
	"..",                              // the parent directory
	strings.Repeat("a", 252) + ".csv", // 256 bytes
}

// One name rule for every door: each bad name is refused by an SFTP upload,
// by HTTP ?name= and by `payintake ingest`, and nothing is received under
// it; a good name with spaces and accents goes through all three.
func TestHostileFileNamesEveryDoor(t *testing.T) {
	ctx := context.Background()
	dbURL := pgtest.New(t)
	st, err := records.Open(ctx, dbURL, records.Options{MaxConns: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	keys := addPartners(t, st, "acme")
	token, err := st.IssueAPIToken(ctx, "acme")
	if err != nil {
		t.Fatal(err)
	}
	srv := startServer(t, dbURL, t.TempDir(), nil)
	sftpc := srv.login("acme", keys["acme"])
	tmp := t.TempDir()
	body := []byte("employee_ref,pay_period,component,amount,currency\nE1,2026-11,BASE,10.00,USD\n")

	sftpDoor := func(name string) error {
		f, err := sftpc.Create("/inbox/" + name)
		if err != nil {
			return err
		}
		if _, err := f.Write(body); err != nil {
			f.Close()
			return err
		}
		return f.Close()
	}
	httpDoor := func(name string) error {
		req, _ := http.NewRequest(http.MethodPost, "http://"+srv.httpAddr+"/v1/submissions?name="+url.QueryEscape(name), bytes.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+token)
		req.Header.Set("Idempotency-Key", fmt.Sprintf("k-%x", sha256.Sum256([]byte(name))))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode >= 300 {
			return fmt.Errorf("%d %s", resp.StatusCode, b)
		}
		return nil
	}
	ingestDoor := func(name string) error {
		path := tmp + "/" + name
		if len(name) <= 255 && name != ".." {
			if err := os.WriteFile(path, body, 0o644); err != nil {
				return fmt.Errorf("test setup: %w", err)
			}
		}
		var out, errb bytes.Buffer
		if code := run(ctx, []string{"ingest", "--partner", "acme", "--database-url", dbURL, "--data-dir", filepath.Join(tmp, "data"), path}, &out, &errb); code != 0 {
			return fmt.Errorf("exit %d: %s", code, errb.String())
		}
		return nil
	}
	doors := []struct {
		name string
		send func(string) error
		says string
	}{
		{"sftp", sftpDoor, "permission denied"},
		{"http", httpDoor, "invalid_name"},
		{"ingest", ingestDoor, "cannot be sent"},
	}
	refused := map[string]int{}
	for _, d := range doors {
		for _, n := range badFileNames {
			err := d.send(n)
			if err == nil {
				t.Errorf("%s accepted the name %q", d.name, n)
				continue
			}
			if !strings.Contains(strings.ToLower(err.Error()), d.says) || strings.Contains(err.Error(), "test setup") {
				t.Errorf("%s refused %q with %v, want it to say %q", d.name, n, err, d.says)
				continue
			}
			refused[d.name]++
		}
		if err := d.send(d.name + " paie novembre é.csv"); err != nil {
			t.Errorf("%s refused a good name: %v", d.name, err)
		}
	}
	var received, bad int
	if err := st.Pool().QueryRow(ctx, `SELECT count(*), count(*) FILTER (WHERE file_name <> ALL($1)) FROM envelopes`,
		[]string{"sftp paie novembre é.csv", "http paie novembre é.csv", "ingest paie novembre é.csv"}).Scan(&received, &bad); err != nil {
		t.Fatal(err)
	}
	if received != 3 || bad != 0 {
		t.Errorf("%d envelopes, %d under a bad name; want the 3 good ones only", received, bad)
	}
	t.Logf("SUMMARY file-names: %d bad names refused by sftp %d, http %d, ingest %d; 3 good names received, 0 envelopes under a bad name",
		len(badFileNames), refused["sftp"], refused["http"], refused["ingest"])
}
