package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/payintake/payintake/internal/eventually"
	"github.com/payintake/payintake/pgserver/pgtest"
	"github.com/payintake/payintake/records"
)

// serve under a low descriptor limit (prlimit --nofile=300) with 400
// stalled sockets on each door: it lowers its connection caps to fit the
// limit, closes the connections past them at once, stays up, and serves
// HTTP and SFTP again as soon as the sockets go. With the limit lowered
// after start (so that the caps do not fit it), descriptors run out:
// both accept loops back off and serve still stays up. Before, the SFTP
// accept loop treated EMFILE as fatal and serve exited.
func TestHostileDescriptorExhaustion(t *testing.T) {
	t.Run("limit at start", func(t *testing.T) { descriptorExhaustion(t, false) })
	t.Run("limit lowered after start", func(t *testing.T) { descriptorExhaustion(t, true) })
}

func descriptorExhaustion(t *testing.T, afterStart bool) {
	url := pgtest.New(t)
	st, err := records.Open(context.Background(), url, records.Options{MaxConns: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	keys := addPartners(t, st, "acme")
	const nofile, stalled = 300, 400
	// /metrics on its own address: the HTTP door is meant to be full.
	ml, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	metricsAddr := ml.Addr().String()
	ml.Close()
	limit := fmt.Sprintf("--nofile=%d", nofile)
	wrapper := []string{"prlimit", limit, "--"}
	if afterStart {
		wrapper = nil
	}
	srv := startServerUnder(t, wrapper, url, t.TempDir(), nil,
		"--workers", "1", "--db-max-conns", "8", "--metrics-addr", metricsAddr)
	if afterStart {
		if out, err := exec.Command("prlimit", "--pid", strconv.Itoa(srv.cmd.Process.Pid), limit).CombinedOutput(); err != nil {
			t.Fatalf("prlimit: %v %s", err, out)
		}
	}
	metric := func(name string) float64 {
		resp, err := http.Get("http://" + metricsAddr + "/metrics")
		if err != nil {
			return -1
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		for line := range strings.Lines(string(b)) {
			if v, ok := strings.CutPrefix(strings.TrimSpace(line), name+" "); ok {
				f, _ := strconv.ParseFloat(v, 64)
				return f
			}
		}
		return -1
	}
	if lowered := strings.Contains(srv.logs.String(), "connection caps lowered"); lowered == afterStart {
		t.Fatalf("serve did not fit its caps to --nofile=%d:\n%s", nofile, tail(srv.logs.String(), 2000))
	}
	var socks []net.Conn
	defer func() {
		for _, c := range socks {
			c.Close()
		}
	}()
	resets := 0 // connections reset at the cap before the dial even returned
	for _, addr := range []string{srv.httpAddr, srv.sftpAddr} {
		for range stalled {
			c, err := net.DialTimeout("tcp", addr, 5*time.Second)
			if errors.Is(err, syscall.ECONNRESET) {
				resets++
				continue
			}
			if err != nil {
				t.Fatalf("dial %s: %v", addr, err)
			}
			socks = append(socks, c)
		}
	}
	// Every socket is taken by the kernel; give serve time to accept or
	// refuse them all, then check it is still there.
	var refusedHTTP, refusedSFTP float64
	eventually.NoError(t, 20*time.Second, func() error {
		refusedHTTP, refusedSFTP = metric(`payintake_connections_refused_total{door="http"}`), metric(`payintake_connections_refused_total{door="sftp"}`)
		if refusedHTTP > 0 && refusedSFTP > 0 || afterStart && strings.Contains(srv.logs.String(), "sftp accept failed; retrying with backoff") {
			return nil
		}
		return fmt.Errorf("connections refused at the caps: HTTP %v, SFTP %v; want some on each (or, with --nofile set after start, the SFTP accept loop backing off)", refusedHTTP, refusedSFTP)
	})
	if !srv.alive() {
		t.Fatalf("serve exited under %d stalled sockets with --nofile=%d", 2*stalled, nofile)
	}
	for _, c := range socks {
		c.Close()
	}
	socks = nil
	gone := time.Now()
	eventually.NoError(t, 30*time.Second, func() error {
		if !srv.alive() {
			t.Fatal("serve exited after the sockets went")
		}
		if !srv.healthy() {
			return errors.New("serve does not answer /healthz again after the sockets went")
		}
		return nil
	})
	httpBack := time.Since(gone)
	// The sockets' server ends, and those still in the kernel's accept
	// queue, take a moment to be accepted and found closed: until then a
	// login may meet the cap, and is reset; a client tries again.
	eventually.NoError(t, 30*time.Second, func() error {
		if !srv.alive() {
			t.Fatal("serve exited after the sockets went")
		}
		c, err := srv.dial("acme", keys["acme"])
		if err == nil {
			_, err = c.ReadDir("/inbox")
			c.Close()
		}
		if err != nil {
			return fmt.Errorf("SFTP not served again after the sockets went: %w", err)
		}
		return nil
	})
	sftpBack := time.Since(gone)
	backedOff := strings.Contains(srv.logs.String(), "sftp accept failed; retrying with backoff")
	if afterStart && !backedOff {
		t.Errorf("descriptors did not run out (the case proves nothing) or the SFTP accept loop did not back off:\n%s", tail(srv.logs.String(), 2000))
	}
	t.Logf("SUMMARY serve --nofile=%d (set after start: %v, SFTP accept backed off on EMFILE: %v), %d stalled sockets on HTTP and %d on SFTP: still up; refused at the caps: %v HTTP, %v SFTP (%d reset before the dial returned); /healthz again %v and an SFTP login %v after they went",
		nofile, afterStart, backedOff, stalled, stalled, refusedHTTP, refusedSFTP, resets, httpBack.Round(time.Millisecond), sftpBack.Round(time.Millisecond))
}

// Stalled unauthenticated bodies against a running serve (whose
// --http-read-timeout is 5 minutes): on /v1/submissions, a replay, the
// review bulk endpoint, /metrics with a token required and a path no route
// takes, each is answered at once and its connection closed. Before, each
// held its connection for the 5 minutes.
func TestHostileStalledBodiesServe(t *testing.T) {
	url := pgtest.New(t)
	tokenFile := filepath.Join(t.TempDir(), "metrics.token")
	if err := os.WriteFile(tokenFile, []byte("0123456789abcdef0123"), 0o600); err != nil {
		t.Fatal(err)
	}
	srv := startServer(t, url, t.TempDir(), nil, "--workers", "1", "--metrics-token-file", tokenFile)
	var report []string
	for _, path := range []string{"/v1/submissions?name=a.csv", "/v1/submissions/1/replays", "/v1/review/bulk/approve", "/metrics", "/nowhere"} {
		c, err := net.Dial("tcp", srv.httpAddr)
		if err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		fmt.Fprintf(c, "POST %s HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nIdempotency-Key: k\r\nContent-Length: 100000\r\n\r\n{\"rows\":", path)
		_ = c.SetReadDeadline(time.Now().Add(30 * time.Second)) // the test's own bound
		br := bufio.NewReader(c)
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			c.Close()
			t.Fatalf("%s: no answer: %v", path, err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		_, err = br.ReadByte()
		took := time.Since(start)
		c.Close()
		report = append(report, fmt.Sprintf("%s %d in %v", path, resp.StatusCode, took.Round(time.Millisecond)))
		if resp.StatusCode < 400 || err != io.EOF || took > 3*time.Second {
			t.Errorf("%s: %d, then %v, after %v; want a refusal and the connection closed once httpbody.Linger has passed", path, resp.StatusCode, err, took)
		}
	}
	t.Logf("SUMMARY stalled unauthenticated bodies against serve (--http-read-timeout 5m): %s; each connection closed", strings.Join(report, "; "))
}
