package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/payintake/payintake/pgserver/pgtest"
	"github.com/payintake/payintake/records"
)

// submission bytes gives an auditor the file as it arrived, byte for byte
// (a repeat's from the first submission), and never bytes that do not match
// the hash taken on arrival.
func TestSubmissionBytes(t *testing.T) {
	c := &cli{t: t, url: pgtest.New(t), dir: t.TempDir()}
	ctx := t.Context()
	c.ok("partner", "add", "acme")
	// Messy on purpose: CRLF, spaces, a money format normalisation rewrites.
	sent := []byte("employee_ref,pay_period,component,amount,currency\r\n E1 ,2026-11, base ,\"$4,000.5\",usd\r\n")
	path := filepath.Join(c.dir, "payroll.csv")
	if err := os.WriteFile(path, sent, 0o644); err != nil {
		t.Fatal(err)
	}
	if out := c.ok("ingest", "--partner", "acme", path); !strings.Contains(out, "envelope 1 processed") {
		t.Fatalf("ingest: %q", out)
	}
	if out := c.ok("ingest", "--partner", "acme", path); !strings.Contains(out, "replay of envelope 1") {
		t.Fatalf("ingest again: %q", out)
	}

	// To stdout, and to a new file.
	code, out, errs := c.run("submission", "bytes", "1")
	if code != 0 || out != string(sent) {
		t.Fatalf("submission bytes 1: exit %d, %q (stderr %q), want the %d bytes sent", code, out, errs, len(sent))
	}
	if !strings.Contains(errs, `acme, "payroll.csv", from cli`) || !strings.Contains(errs, "as recorded on arrival") {
		t.Errorf("submission bytes 1 says %q, want the partner, file, source and the hash check", errs)
	}
	dst := filepath.Join(c.dir, "received.csv")
	c.ok("submission", "bytes", "1", "--output", dst)
	if got, err := os.ReadFile(dst); err != nil || !bytes.Equal(got, sent) {
		t.Fatalf("--output wrote %q (%v), want the bytes sent", got, err)
	}
	// An existing file is left alone.
	if code, _, errs := c.run("submission", "bytes", "1", "--output", dst); code != 1 || !strings.Contains(errs, "file exists") {
		t.Errorf("--output onto an existing file: exit %d, %q, want a refusal", code, errs)
	}

	// A repeat keeps no bytes: its first submission's are written, and it says so.
	code, out, errs = c.run("submission", "bytes", "2")
	if code != 0 || out != string(sent) || !strings.Contains(errs, "repeat of submission 1") {
		t.Fatalf("submission bytes 2 (a repeat): exit %d, %q, stderr %q", code, out, errs)
	}

	// An unknown id, an incomplete upload, bad arguments.
	st, err := records.Open(ctx, c.url, records.Options{MaxConns: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if err := st.MarkIncomplete(ctx, "acme", "cut.csv", "sftp", 4096); err != nil {
		t.Fatal(err)
	}
	for _, k := range []struct {
		args []string
		code int
		says string
	}{
		{[]string{"99"}, 1, "there is no submission 99"},
		{[]string{"3"}, 1, "cut off after 4096 bytes"},
		{[]string{"x"}, 2, "give a submission ID"},
		{nil, 2, "takes one submission ID"},
	} {
		code, out, errs := c.run(append([]string{"submission", "bytes"}, k.args...)...)
		if code != k.code || out != "" || !strings.Contains(errs, k.says) {
			t.Errorf("submission bytes %v: exit %d, stdout %q, stderr %q; want exit %d saying %q", k.args, code, out, errs, k.code, k.says)
		}
	}

	// Bytes that no longer match the hash taken on arrival are refused, and
	// --output leaves no file behind.
	conn, err := pgx.Connect(ctx, c.url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(ctx, `UPDATE envelope_chunks SET data = overlay(data placing '9' from 60 for 1) WHERE envelope_id = 1 AND n = 0`); err != nil {
		t.Fatal(err)
	}
	tampered := filepath.Join(c.dir, "tampered.csv")
	if code, _, errs := c.run("submission", "bytes", "1", "--output", tampered); code != 1 || !strings.Contains(errs, "do not hash to the SHA-256 recorded") {
		t.Errorf("tampered bytes: exit %d, %q, want a refusal", code, errs)
	}
	if _, err := os.Stat(tampered); !os.IsNotExist(err) {
		t.Errorf("tampered bytes left %s behind (%v)", tampered, err)
	}
}
