package sftpd_test

import (
	"testing"
	"time"

	"github.com/pkg/sftp"
)

// A client that only sends SSH keepalives (as OpenSSH's
// ServerAliveInterval does) while its SFTP session does nothing is closed
// at the idle timeout: keepalives keep a TCP connection up, not a session.
func TestSFTPKeepalivesAreNotActivity(t *testing.T) {
	t.Parallel()
	const idle = 500 * time.Millisecond
	z := newDropZone(t, zoneOpts{idle: idle, workers: -1})
	conn := z.dial("acme", z.partner("acme"))
	c, err := sftp.NewClient(conn)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.ReadDir("/inbox"); err != nil { // the last SFTP request
		t.Fatal(err)
	}
	last := time.Now()
	closed := make(chan time.Time, 1)
	go func() { _ = conn.Wait(); closed <- time.Now() }()
	answered := 0
	tick := time.NewTicker(idle / 5)
	defer tick.Stop()
	for {
		select {
		case at := <-closed:
			after := at.Sub(last)
			t.Logf("SUMMARY keepalive-only SFTP connection closed %v after its last SFTP request (idle timeout %v, %d keepalives answered meanwhile)",
				after.Round(time.Millisecond), idle, answered)
			if after < idle {
				t.Fatalf("closed after %v, before the idle timeout %v", after, idle)
			}
			if answered < 3 {
				t.Fatalf("only %d keepalives answered before the close: the case proves nothing", answered)
			}
			if n := z.metric("payintake_sftp_idle_closed_total"); n != 1 {
				t.Fatalf("idle closes counted: %v; want 1", n)
			}
			return
		case <-tick.C:
			if _, _, err := conn.SendRequest("keepalive@openssh.com", true, nil); err == nil {
				answered++
			}
			if time.Since(last) > 20*idle {
				t.Fatalf("still open %v after the last SFTP request with keepalives only (idle timeout %v)", time.Since(last), idle)
			}
		}
	}
}
