// Package httpbody bounds how long a client may take to send a request
// body, and how little a refused client costs.
//
// Go's server bounds a whole request with Server.ReadTimeout (minutes, for
// a large submission on a slow link), and before it answers a handler that
// did not read the body it reads up to 256 KiB of that body, so that the
// connection can be kept. A stranger who sends headers and then stalls
// would so hold a connection, a descriptor and a goroutine for the whole
// read timeout, even after being refused. Two rules, one mechanism (the
// connection's read deadline, through http.ResponseController):
//
//   - Guard: an answer to a request whose body was not read to its end
//     (refused for its credentials, its content type, its size, a busy
//     key…) is sent at once with "Connection: close", and the connection
//     is closed without waiting for the rest: what arrives within Linger
//     is dropped (so that a client still sending reads the answer, not a
//     reset), and then the connection is closed.
//   - Reader: a handler reads a body within Limits.Timeout plus its size at
//     Limits.MinRate; a client slower than that gets its read cut off
//     (TimedOut) and its connection closed.
package httpbody

import (
	"errors"
	"io"
	"net/http"
	"os"
	"sync/atomic"
	"time"
)

// Defaults of Limits for bodies that may be large (submissions, replays,
// review API bodies); webhooks and login forms, which are small, use
// tighter ones of their own.
const (
	DefaultTimeout = 30 * time.Second
	DefaultMinRate = 32 << 10 // bytes per second: a 64 MiB submission within 35 minutes
)

// Limits bound the reading of one request body.
type Limits struct {
	// Max is the largest body; a larger one fails with *http.MaxBytesError
	// (and the connection is closed). 0: no limit here.
	Max int64
	// Timeout is the time the body has to begin and arrive, extended by
	// its size at MinRate: a body of n bytes must have arrived within
	// Timeout + n/MinRate of the start of reading. 0: DefaultTimeout.
	Timeout time.Duration
	// MinRate is the slowest a body may arrive, in bytes per second, once
	// Timeout has passed. 0: none (Timeout bounds the whole body).
	MinRate int64
	// Ceiling, if set, is the longest a body is read whatever its rate
	// (serve passes --http-read-timeout, so that the answer's own write
	// deadline is still ahead when the body has arrived).
	Ceiling time.Duration
}

// Linger bounds how long a connection whose answer Guard sent before its
// body was read still takes the body in before it is closed. Go's server,
// finding the handler's body unread, drops up to 256 KiB of it; past that
// (or a body declared larger) it reads none and instead half-closes the
// connection and waits its own 500 ms for the client to stop. Either way a
// client still sending when the answer comes (a browser uploading a file
// over a limit, a chunked body) reads the answer instead of a reset; one
// that stalls holds the connection about Linger, plus the server's wait.
const Linger = 500 * time.Millisecond

// TimedOut reports whether err is a body read cut off by its deadline.
func TimedOut(err error) bool { return errors.Is(err, os.ErrDeadlineExceeded) }

// ReadAll reads r's whole body under l (see Reader).
func ReadAll(w http.ResponseWriter, r *http.Request, l Limits) ([]byte, error) {
	return io.ReadAll(Reader(w, r, l))
}

// Reader returns r's body, read under l: its connection's read deadline is
// set now, and moved on as bytes arrive. A handler that reads a body calls
// it once, before reading.
func Reader(w http.ResponseWriter, r *http.Request, l Limits) io.ReadCloser {
	if l.Max > 0 && r.ContentLength > l.Max {
		// Declared too large: refused before a byte is read (the handler
		// answers 413 at once, Guard closes the connection).
		return refused{&http.MaxBytesError{Limit: l.Max}}
	}
	if l.Timeout <= 0 {
		l.Timeout = DefaultTimeout
	}
	b := &bodyReader{rc: http.NewResponseController(w), src: r.Body, l: l, start: time.Now()}
	b.setDeadline(b.start.Add(l.Timeout))
	if l.Max > 0 {
		return http.MaxBytesReader(w, b, l.Max)
	}
	return b
}

// refused is a body that is not read: every Read fails with err.
type refused struct{ err error }

func (r refused) Read([]byte) (int, error) { return 0, r.err }
func (r refused) Close() error             { return nil }

type bodyReader struct {
	rc       *http.ResponseController
	src      io.ReadCloser
	l        Limits
	start    time.Time
	n        int64
	deadline time.Time
}

func (b *bodyReader) Read(p []byte) (int, error) {
	n, err := b.src.Read(p)
	b.n += int64(n)
	if n > 0 && b.l.MinRate > 0 {
		due := b.start.Add(b.l.Timeout + time.Duration(float64(b.n)/float64(b.l.MinRate)*float64(time.Second)))
		// Moved in steps (a tenth of Timeout, at most a second): a deadline
		// costs a timer update, not worth making for every small read.
		if due.Sub(b.deadline) >= min(time.Second, b.l.Timeout/10) {
			b.setDeadline(due)
		}
	}
	return n, err
}

func (b *bodyReader) Close() error { return b.src.Close() }

func (b *bodyReader) setDeadline(t time.Time) {
	if b.l.Ceiling > 0 {
		if c := b.start.Add(b.l.Ceiling); t.After(c) {
			t = c
		}
	}
	if t.Equal(b.deadline) {
		return
	}
	b.deadline = t
	// ErrNotSupported only for a writer that cannot reach its connection
	// (a test recorder): then Server.ReadTimeout alone bounds the body.
	_ = b.rc.SetReadDeadline(t)
}

// Guard wraps h so that an answer to a request whose body h did not read
// to its end closes the connection (Connection: close) after the client
// has had Linger to take the answer in, instead of the server reading on
// to the body's end.
func Guard(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Body == nil || r.Body == http.NoBody || r.ContentLength == 0 {
			h.ServeHTTP(w, r)
			return
		}
		body := &trackedBody{ReadCloser: r.Body}
		r.Body = body
		h.ServeHTTP(&guardedWriter{ResponseWriter: w, body: body}, r)
		// The server's own body again (h may have set another): finding it
		// closed with more left than it drops, the server half-closes the
		// connection and waits before closing it, so that the client reads
		// the answer rather than a reset.
		r.Body = body.ReadCloser
	})
}

// trackedBody notes when its body has been read to its end.
type trackedBody struct {
	io.ReadCloser
	eof atomic.Bool
}

func (t *trackedBody) Read(p []byte) (int, error) {
	n, err := t.ReadCloser.Read(p)
	if err == io.EOF {
		t.eof.Store(true)
	}
	return n, err
}

type guardedWriter struct {
	http.ResponseWriter
	body  *trackedBody
	wrote bool
}

func (g *guardedWriter) WriteHeader(code int) {
	if !g.wrote && code >= 200 {
		g.wrote = true
		if !g.body.eof.Load() {
			// Connection: close stops the server from reading up to 256 KiB
			// of the body before the answer; the deadline stops it from
			// reading the rest after for longer than Linger.
			g.Header().Set("Connection", "close")
			_ = http.NewResponseController(g.ResponseWriter).SetReadDeadline(time.Now().Add(Linger))
		}
	}
	g.ResponseWriter.WriteHeader(code)
}

func (g *guardedWriter) Write(p []byte) (int, error) {
	if !g.wrote {
		g.WriteHeader(http.StatusOK)
	}
	return g.ResponseWriter.Write(p)
}

// Unwrap lets http.ResponseController reach the connection.
func (g *guardedWriter) Unwrap() http.ResponseWriter { return g.ResponseWriter }
