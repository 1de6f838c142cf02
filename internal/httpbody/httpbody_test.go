package httpbody

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// stalled sends a request's headers and the first bytes of a body it
// announced as much larger, then nothing.
func stalled(t *testing.T, addr, path string) (net.Conn, *bufio.Reader) {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	fmt.Fprintf(c, "POST %s HTTP/1.1\r\nHost: x\r\nContent-Type: text/csv\r\nContent-Length: 100000\r\n\r\nemployee_ref,", path)
	_ = c.SetReadDeadline(time.Now().Add(20 * time.Second)) // the test's own bound
	return c, bufio.NewReader(c)
}

// A request refused before its body is read is answered at once and its
// connection closed, though its body never comes (the server would read
// 256 KiB of it, for up to its ReadTimeout, without Guard).
func TestGuardClosesRefusedRequest(t *testing.T) {
	srv := httptest.NewUnstartedServer(Guard(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "who are you", http.StatusUnauthorized)
	})))
	srv.Config.ReadTimeout = time.Minute
	srv.Start()
	defer srv.Close()
	start := time.Now()
	_, br := stalled(t, srv.Listener.Addr().String(), "/")
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	answered := time.Since(start)
	if resp.StatusCode != http.StatusUnauthorized || !resp.Close {
		t.Errorf("answer %d, close %v; want 401 closing the connection", resp.StatusCode, resp.Close)
	}
	if _, err := br.ReadByte(); err != io.EOF {
		t.Errorf("after the answer the connection gave %v; want EOF (closed)", err)
	}
	closed := time.Since(start)
	if closed > 5*time.Second {
		t.Errorf("answered after %v, closed after %v; want both at once", answered, closed)
	}
	t.Logf("SUMMARY stalled refused body: answered in %v, connection closed in %v (server ReadTimeout 1m)", answered.Round(time.Millisecond), closed.Round(time.Millisecond))
}

// A body that stalls is cut off after Timeout; one that keeps arriving
// above MinRate is read to its end although it takes longer than Timeout.
func TestReaderDeadline(t *testing.T) {
	lim := Limits{Timeout: 300 * time.Millisecond, MinRate: 200}
	got := make(chan error, 1)
	srv := httptest.NewServer(Guard(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, err := ReadAll(w, r, lim)
		got <- err
		if TimedOut(err) {
			http.Error(w, "too slow", http.StatusRequestTimeout)
			return
		}
		fmt.Fprintf(w, "%d", len(b))
	})))
	defer srv.Close()

	start := time.Now()
	_, br := stalled(t, srv.Listener.Addr().String(), "/")
	if err := <-got; !TimedOut(err) {
		t.Fatalf("stalled body: %v; want a deadline", err)
	}
	took := time.Since(start)
	resp, err := http.ReadResponse(br, nil)
	if err != nil || resp.StatusCode != http.StatusRequestTimeout {
		t.Fatalf("stalled body answered %v %v", resp, err)
	}
	if took > 3*time.Second {
		t.Errorf("stalled body cut off after %v; want about %v", took, lim.Timeout)
	}

	// 20 bytes every 50 ms (400 B/s, above 200) for about a second.
	pr, pw := io.Pipe()
	go func() {
		for range 20 {
			_, _ = pw.Write([]byte(strings.Repeat("x", 20)))
			time.Sleep(50 * time.Millisecond) // a slow but steady sender: the time must pass
		}
		pw.Close()
	}()
	start = time.Now()
	resp, err = http.Post(srv.URL, "text/plain", pr)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err := <-got; err != nil || string(b) != "400" {
		t.Errorf("steady body: %v, answer %q; want all 400 bytes", err, b)
	}
	if d := time.Since(start); d < lim.Timeout {
		t.Errorf("steady body took %v; the case needs longer than Timeout %v", d, lim.Timeout)
	}
}

// A body declared larger than Max is refused before it is read: 413 at
// once, the connection closed, although the body never comes.
func TestReaderRefusesDeclaredTooLarge(t *testing.T) {
	srv := httptest.NewServer(Guard(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, err := ReadAll(w, r, Limits{Max: 1000})
		var mbe *http.MaxBytesError
		if !errors.As(err, &mbe) {
			t.Errorf("read: %v; want *http.MaxBytesError", err)
		}
		http.Error(w, "too large", http.StatusRequestEntityTooLarge)
	})))
	defer srv.Close()
	start := time.Now()
	_, br := stalled(t, srv.Listener.Addr().String(), "/")
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	if _, err := br.ReadByte(); resp.StatusCode != http.StatusRequestEntityTooLarge || err != io.EOF || time.Since(start) > 5*time.Second {
		t.Errorf("answer %d, then %v, after %v; want 413 and the connection closed at once", resp.StatusCode, err, time.Since(start))
	}
}

// A client still sending a body over Max when it is refused reads the
// refusal, whether it declared the body's length (refused before a byte is
// read) or sent it chunked (refused once Max is passed): the connection
// takes the rest in for Linger instead of being reset under the client.
func TestRefusedClientStillSendingReadsTheAnswer(t *testing.T) {
	srv := httptest.NewServer(Guard(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, err := ReadAll(w, r, Limits{Max: 64 << 10})
		var mbe *http.MaxBytesError
		if !errors.As(err, &mbe) {
			t.Errorf("read: %v; want *http.MaxBytesError", err)
		}
		http.Error(w, "too large", http.StatusRequestEntityTooLarge)
	})))
	defer srv.Close()
	body := []byte(strings.Repeat("x", 4<<20))
	for _, how := range []string{"declared", "chunked"} {
		for i := range 20 {
			var r io.Reader = bytes.NewReader(body)
			if how == "chunked" {
				r = io.MultiReader(r) // no length Go's client can know: sent chunked
			}
			resp, err := http.Post(srv.URL, "text/plain", r)
			if err != nil {
				t.Fatalf("%s body, try %d: %v; want the 413", how, i, err)
			}
			b, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusRequestEntityTooLarge || err != nil || string(b) != "too large\n" {
				t.Fatalf("%s body, try %d: %d %q %v; want the 413 whole", how, i, resp.StatusCode, b, err)
			}
		}
	}
}
