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

	"github.com/pkg/sftp"

	"github.com/payintake/payintake/internal/eventually"
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
	f := c.halfUpload(t, "drain.csv", data)

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
	finishUpload(t, f, data)
	srv.waitExit(t, 40*time.Second)

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

// waitExit waits for the process to exit with status 0 within d (after a
// SIGTERM the test sent: a drain). t is the test that waits, which may be
// a subtest of the one that started s (the fleet's replicas).
func (s *server) waitExit(t testing.TB, within time.Duration) {
	t.Helper()
	select {
	case <-s.done:
		if !s.state.Success() {
			t.Fatalf("serve exited with %v after the drain", s.state)
		}
	case <-time.After(within):
		t.Fatalf("serve did not exit within %v of the drain's end", within)
	}
}

// drain sends SIGTERM and waits until serve says it drains (t as for
// waitExit).
func (s *server) drain(t testing.TB) {
	t.Helper()
	if err := s.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	eventually.True(t, 10*time.Second, func() bool { return strings.Contains(s.logs.String(), "msg=draining") }, "serve draining")
}

// halfUpload opens /inbox/name and writes the first half of data: an
// upload in flight, finished with finishUpload.
func (c *client) halfUpload(t testing.TB, name string, data []byte) *sftp.File {
	t.Helper()
	f, err := c.Create("/inbox/" + name)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write(data[:len(data)/2]); err != nil {
		t.Fatal(err)
	}
	return f
}

// finishUpload writes the second half of data to f and closes it (the
// moment of receipt).
func finishUpload(t testing.TB, f *sftp.File, data []byte) {
	t.Helper()
	if _, err := f.Write(data[len(data)/2:]); err != nil {
		t.Fatalf("write the rest of %s: %v", f.Name(), err)
	}
	if err := f.Close(); err != nil {
		t.Fatalf("close %s: %v", f.Name(), err)
	}
}
