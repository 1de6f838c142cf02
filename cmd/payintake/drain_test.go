package main

import (
	"bytes"
	"crypto/sha256"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/payintake/payintake/pgserver/pgtest"
)

// SIGTERM during an SFTP upload: serve tells systemd it stops, /readyz
// answers 503 at once, new connections are refused, the upload in flight
// finishes and is received whole, and serve exits 0.
func TestServeDrainsOnSIGTERM(t *testing.T) {
	url := pgtest.New(t)
	st := openTestStore(t, url)
	key := addPartners(t, st, "drain")["drain"]

	// systemd's notify socket (Type=notify), as a datagram socket here.
	sockDir, err := os.MkdirTemp("", "sd")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(sockDir) })
	sock := filepath.Join(sockDir, "notify")
	nl, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: sock, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nl.Close() })
	notes := make(chan string, 16)
	go func() {
		buf := make([]byte, 4096)
		for {
			n, err := nl.Read(buf)
			if err != nil {
				close(notes)
				return
			}
			notes <- string(buf[:n])
		}
	}()
	expect := func(state string) {
		t.Helper()
		select {
		case got := <-notes:
			if !strings.Contains(got, state) {
				t.Fatalf("systemd was told %q, want %q", got, state)
			}
		case <-time.After(30 * time.Second):
			t.Fatalf("systemd was never told %q", state)
		}
	}

	srv := startServer(t, url, t.TempDir(), []string{"NOTIFY_SOCKET=" + sock}, "--workers", "1", "--drain-timeout", "40s")
	expect("READY=1")
	if code, body := srv.get("/readyz"); code != 200 {
		t.Fatalf("/readyz before SIGTERM: %d %s", code, body)
	}
	c := srv.login("drain", key)
	data := payrollFile("DR", 4000)
	f, err := c.Create("/inbox/drain.csv")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write(data[:len(data)/2]); err != nil {
		t.Fatal(err)
	}

	if err := srv.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	expect("STOPPING=1")
	// Not ready from the start of the drain: the upload is still open, so
	// the drain is still waiting.
	if code, body := srv.get("/readyz"); code != 503 || !strings.Contains(body, "draining") {
		t.Fatalf("/readyz during the drain: %d %s", code, body)
	}
	if _, err := srv.dial("drain", key); err == nil {
		t.Fatal("a new SFTP connection was taken during the drain")
	}
	select {
	case <-srv.done:
		t.Fatalf("serve exited with an upload in flight: %v", srv.state)
	default:
	}
	if _, err := f.Write(data[len(data)/2:]); err != nil {
		t.Fatalf("write during the drain: %v", err)
	}
	if err := f.Close(); err != nil {
		t.Fatalf("close during the drain: %v", err)
	}
	select {
	case <-srv.done:
		if !srv.state.Success() {
			t.Fatalf("serve exited with %v after the drain", srv.state)
		}
	case <-time.After(40 * time.Second):
		t.Fatal("serve did not exit after its upload finished")
	}

	var sum []byte
	if err := st.Pool().QueryRow(t.Context(), `SELECT sha256 FROM envelopes WHERE partner_id = 'drain' AND file_name = 'drain.csv' AND status <> 'incomplete'`).Scan(&sum); err != nil {
		t.Fatalf("the upload finished during the drain was not received: %v", err)
	}
	if want := sha256.Sum256(data); !bytes.Equal(sum, want[:]) {
		t.Fatalf("envelope sha256 %x, file %x", sum, want)
	}
	if !strings.Contains(srv.logs.String(), `msg=draining`) {
		t.Fatalf("no drain in the log:\n%s", tail(srv.logs.String(), 2000))
	}
}
