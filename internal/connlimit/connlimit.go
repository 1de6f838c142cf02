// Package connlimit caps how many connections a listener keeps open, in
// all and per client address, so that no stranger (nor a crowd of them)
// can take every file descriptor of the process: past the cap a new
// connection is closed as soon as it is accepted, with a reset, holding
// nothing. golang.org/x/net/netutil.LimitListener caps the total only, and
// at the cap it stops accepting, so that one address's stalled sockets
// would keep every other client waiting in the kernel's queue; the
// per-address count needs its own accounting anyway.
package connlimit

import (
	"net"
	"sync"
	"sync/atomic"
)

// Limits of a Listener; 0 means no limit.
type Limits struct {
	Max     int // connections open at once, in all
	PerAddr int // connections open at once from one client IP address
}

// Listener is a net.Listener whose Accept gives only connections within
// its Limits; the others are closed at once and counted.
type Listener struct {
	net.Listener
	lim     Limits
	mu      sync.Mutex
	open    int
	perAddr map[string]int
	refused atomic.Uint64
}

// Listen wraps ln with lim.
func Listen(ln net.Listener, lim Limits) *Listener {
	return &Listener{Listener: ln, lim: lim, perAddr: map[string]int{}}
}

// Refused is how many connections were closed at the cap so far.
func (l *Listener) Refused() uint64 { return l.refused.Load() }

// Open is how many accepted connections are open now.
func (l *Listener) Open() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.open
}

// Accept waits for a connection within the limits. Errors of the
// underlying Accept (EMFILE among them) are returned as they are: the
// caller backs off and tries again.
func (l *Listener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		ip := addrOf(c)
		if l.take(ip) {
			return &conn{Conn: c, release: sync.OnceFunc(func() { l.give(ip) })}, nil
		}
		l.refused.Add(1)
		// A reset rather than a close: no TIME_WAIT, no lingering buffer.
		if tc, ok := c.(*net.TCPConn); ok {
			_ = tc.SetLinger(0)
		}
		c.Close()
	}
}

func (l *Listener) take(ip string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if (l.lim.Max > 0 && l.open >= l.lim.Max) || (l.lim.PerAddr > 0 && l.perAddr[ip] >= l.lim.PerAddr) {
		return false
	}
	l.open++
	l.perAddr[ip]++
	return true
}

func (l *Listener) give(ip string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.open--
	if l.perAddr[ip]--; l.perAddr[ip] <= 0 {
		delete(l.perAddr, ip)
	}
}

func addrOf(c net.Conn) string {
	if a, ok := c.RemoteAddr().(*net.TCPAddr); ok {
		return a.IP.String()
	}
	host, _, err := net.SplitHostPort(c.RemoteAddr().String())
	if err != nil {
		return c.RemoteAddr().String()
	}
	return host
}

// conn gives its slot back when it is closed, once.
type conn struct {
	net.Conn
	release func()
}

func (c *conn) Close() error {
	err := c.Conn.Close()
	c.release()
	return err
}
