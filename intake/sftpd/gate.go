package sftpd

// The pre-login gate: what a connection may cost before it has logged in.
//
//  1. On accept the server sends its SSH version line at once, and the
//     client must send something within bannerTimeout. Until it does, the
//     connection is "silent": it holds no handshake slot, and silent
//     connections are bounded per address and in all; over the address's
//     bound, its oldest silent one is closed if silent for silentGrace (a
//     burst of new connections is not mistaken for silence), and over the
//     bound in all, the oldest anywhere is closed. Real
//     clients send their version line within milliseconds, so 500 silent
//     sockets from one address cost 500 idle sockets and lock nobody out.
//  2. A connection that has spoken takes a handshake slot: at most
//     maxPendingLoginsPerAddress per address and maxPendingLogins in all,
//     for at most HandshakeTimeout. When none is free it waits in line (no
//     polling: a release hands its slot to the first waiter whose address is
//     under its own bound, so one busy address does not hold up the others),
//     at most maxLoginWait, and at most maxLoginWaitersPerAddress waiters
//     per address; beyond, it is closed.

import (
	"bufio"
	"bytes"
	"container/list"
	"context"
	"errors"
	"net"
	"sync"
	"time"

	"github.com/payintake/payintake/internal/clientaddr"
)

const (
	serverVersion              = "SSH-2.0-payintake"
	bannerTimeout              = 10 * time.Second
	silentGrace                = time.Second
	maxSilentPerAddress        = 128
	maxSilent                  = 2048
	maxPendingLoginsPerAddress = 10
	maxPendingLogins           = 256
	maxLoginWaitersPerAddress  = 256
	maxLoginWait               = 20 * time.Second
)

// bannerConn is a connection whose server version line was already sent (the
// SSH library's own is swallowed) and whose first client bytes are buffered
// (the version line and key exchange offer read ahead, peekKexInit).
type bannerConn struct {
	net.Conn
	r    *bufio.Reader
	skip []byte
}

func newBannerConn(c net.Conn) *bannerConn {
	return &bannerConn{Conn: c, r: bufio.NewReaderSize(c, maxKexInit), skip: []byte(serverVersion + "\r\n")}
}

func (c *bannerConn) Read(p []byte) (int, error) { return c.r.Read(p) }

func (c *bannerConn) Write(p []byte) (int, error) {
	if c.skip != nil {
		skip := c.skip
		c.skip = nil
		if bytes.HasPrefix(p, skip) {
			n, err := c.Conn.Write(p[len(skip):])
			return n + len(skip), err
		}
	}
	return c.Conn.Write(p)
}

// loginGate holds the bounds above.
type loginGate struct {
	mu      sync.Mutex
	silent  *list.List            // of *silentConn, oldest first
	bySrc   map[string]*list.List // per address, of *list.Element of silent
	slots   map[string]int        // handshake slots taken per address
	used    int                   // handshake slots taken in all
	waiters *list.List            // of *gateWaiter, first come first
	waiting map[string]int        // waiters per address
	closed  func(reason string)   // counts a connection closed by the gate
	now     func() time.Time      // the clock of silentGrace
}

type silentConn struct {
	c     net.Conn
	ip    string
	since time.Time
	el    *list.Element // in bySrc[ip]
}

type gateWaiter struct {
	ip      string
	granted chan struct{}
}

func newLoginGate(now func() time.Time, closed func(string)) *loginGate {
	return &loginGate{silent: list.New(), bySrc: map[string]*list.List{}, slots: map[string]int{},
		waiters: list.New(), waiting: map[string]int{}, closed: closed, now: now}
}

// hello sends the server's version line and waits (holding no slot) for
// the client's first bytes. An error: the client was silent, evicted, or
// refused by its first bytes (clientaddr.ErrRefused: a PROXY header from
// a source that is not a trusted proxy).
func (g *loginGate) hello(bc *bannerConn, ip string) error {
	_ = bc.Conn.SetDeadline(time.Now().Add(bannerTimeout))
	if _, err := bc.Conn.Write(bc.skip); err != nil {
		return err
	}
	sc := &silentConn{c: bc.Conn, ip: ip, since: g.now()}
	g.mu.Lock()
	el := g.silent.PushBack(sc)
	src := g.bySrc[ip]
	if src == nil {
		src = list.New()
		g.bySrc[ip] = src
	}
	sc.el = src.PushBack(el)
	var evict []*silentConn
	for src.Len() > maxSilentPerAddress {
		oldest := src.Front().Value.(*list.Element)
		if g.now().Sub(oldest.Value.(*silentConn).since) < silentGrace {
			break
		}
		evict = append(evict, g.dropSilent(oldest))
	}
	for g.silent.Len() > maxSilent {
		evict = append(evict, g.dropSilent(g.silent.Front()))
	}
	g.mu.Unlock()
	for _, e := range evict {
		_ = e.c.Close()
		g.closed("evicted")
	}
	_, err := bc.r.Peek(1)
	g.mu.Lock()
	if sc.el != nil {
		g.dropSilent(el)
	}
	g.mu.Unlock()
	if errors.Is(err, clientaddr.ErrRefused) {
		g.closed("proxy_header")
		return err
	}
	if err != nil {
		g.closed("silent")
		return err
	}
	return nil
}

// dropSilent forgets a silent connection (g.mu held).
func (g *loginGate) dropSilent(el *list.Element) *silentConn {
	sc := el.Value.(*silentConn)
	g.silent.Remove(el)
	if src := g.bySrc[sc.ip]; src != nil {
		src.Remove(sc.el)
		if src.Len() == 0 {
			delete(g.bySrc, sc.ip)
		}
	}
	sc.el = nil
	return sc
}

func (g *loginGate) free(ip string) bool {
	return g.slots[ip] < maxPendingLoginsPerAddress && g.used < maxPendingLogins
}

func (g *loginGate) take(ip string) {
	g.slots[ip]++
	g.used++
}

// enter takes a handshake slot for ip, waiting in line for one up to
// maxLoginWait or until ctx is done.
func (g *loginGate) enter(ctx context.Context, ip string) bool {
	g.mu.Lock()
	if g.free(ip) && g.waiting[ip] == 0 {
		g.take(ip)
		g.mu.Unlock()
		return true
	}
	if g.waiting[ip] >= maxLoginWaitersPerAddress {
		g.mu.Unlock()
		g.closed("full")
		return false
	}
	w := &gateWaiter{ip: ip, granted: make(chan struct{})}
	el := g.waiters.PushBack(w)
	g.waiting[ip]++
	g.mu.Unlock()
	t := time.NewTimer(maxLoginWait)
	defer t.Stop()
	select {
	case <-w.granted:
		return true
	case <-t.C:
	case <-ctx.Done():
	}
	g.mu.Lock()
	select {
	case <-w.granted: // granted meanwhile: give it back
		g.mu.Unlock()
		g.leave(ip)
	default:
		g.waiters.Remove(el)
		g.unwait(ip)
		g.mu.Unlock()
	}
	g.closed("full")
	return false
}

func (g *loginGate) unwait(ip string) {
	if g.waiting[ip]--; g.waiting[ip] <= 0 {
		delete(g.waiting, ip)
	}
}

// leave gives back ip's slot, to the first waiter that may take one.
func (g *loginGate) leave(ip string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.slots[ip]--; g.slots[ip] <= 0 {
		delete(g.slots, ip)
	}
	g.used--
	for el := g.waiters.Front(); el != nil && g.used < maxPendingLogins; {
		next := el.Next()
		w := el.Value.(*gateWaiter)
		if g.free(w.ip) {
			g.waiters.Remove(el)
			g.unwait(w.ip)
			g.take(w.ip)
			close(w.granted)
		}
		el = next
	}
}
