package clientaddr

import (
	"bufio"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"sync"
	"time"

	proxyproto "github.com/pires/go-proxyproto"
)

// HeaderTimeout bounds how long a trusted proxy's connection may take to
// send its PROXY header (HAProxy sends it at once).
const HeaderTimeout = 10 * time.Second

// Listener wraps ln (the SFTP address): a connection from a trusted proxy
// must open with a PROXY header, any other must not. Accept never waits for
// a header; Client (on the connection's own goroutine) does.
func (p Proxies) Listener(ln net.Listener) net.Listener {
	return &listener{Listener: &proxyproto.Listener{
		Listener: ln,
		ConnPolicy: func(o proxyproto.ConnPolicyOptions) (proxyproto.Policy, error) {
			if p.Trusted(addrPort(o.Upstream).Addr()) {
				return proxyproto.REQUIRE, nil
			}
			// Handed over raw, and checked lazily on its first read
			// (untrusted): reading here would hold every client that
			// waits for the server's greeting before it speaks.
			return proxyproto.SKIP, nil
		},
		ValidateHeader:    validTCP,
		ReadHeaderTimeout: HeaderTimeout,
	}}
}

// validTCP accepts a header naming a TCP client, or LOCAL (the proxy's own
// health check, which stands for itself).
func validTCP(h *proxyproto.Header) error {
	if h.Command.IsLocal() {
		return nil
	}
	if _, _, ok := h.TCPAddrs(); !ok {
		return errors.New("the PROXY header names a client that is not TCP over IPv4 or IPv6; only TCP clients are served")
	}
	return nil
}

type listener struct{ *proxyproto.Listener }

func (l *listener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	if pc, ok := c.(*proxyproto.Conn); ok {
		return &proxied{Conn: pc}, nil
	}
	return &direct{Conn: c}, nil
}

// proxied is a trusted proxy's connection: its client is the PROXY header's.
type proxied struct{ *proxyproto.Conn }

// direct is any other connection: its client is its peer, and its first
// read refuses a PROXY header.
type direct struct {
	net.Conn
	once sync.Once
	r    *bufio.Reader // nil once the first bytes are read back
	err  error
}

func (c *direct) Read(b []byte) (int, error) {
	c.once.Do(func() {
		c.r = bufio.NewReaderSize(c.Conn, 256)
		h, err := proxyproto.Read(c.r)
		switch {
		case err == nil && h != nil:
			c.err = fmt.Errorf("%w: %s sent a PROXY header and is not a trusted proxy (serve --trusted-proxies)", ErrRefused, c.Conn.RemoteAddr())
		case err != nil && !errors.Is(err, proxyproto.ErrNoProxyProtocol):
			c.err = fmt.Errorf("%w: %s: %w", ErrRefused, c.Conn.RemoteAddr(), err)
		}
	})
	if c.err != nil {
		return 0, c.err
	}
	if c.r != nil {
		if c.r.Buffered() > 0 {
			return c.r.Read(b)
		}
		c.r = nil
	}
	return c.Conn.Read(b)
}

// Client returns the client's address of a connection accepted by a
// Listener, and the proxy's when it came through one (else the zero
// AddrPort). For a trusted proxy's connection it waits for the PROXY header
// (at most HeaderTimeout) and returns an error wrapping ErrRefused when
// there is none or it is malformed: close the connection. A connection
// from another listener is its peer.
func Client(c net.Conn) (client, proxy netip.AddrPort, err error) {
	pc, ok := c.(*proxied)
	if !ok {
		return addrPort(c.RemoteAddr()), netip.AddrPort{}, nil
	}
	proxy = addrPort(pc.Raw().RemoteAddr())
	h := pc.ProxyHeader()
	if h == nil {
		// The header is missing or bad: a read returns why at once,
		// touching no byte of the connection.
		_, err := pc.Conn.Read(nil)
		if err == nil {
			err = proxyproto.ErrNoProxyProtocol
		}
		if errors.Is(err, proxyproto.ErrNoProxyProtocol) {
			return proxy, proxy, fmt.Errorf("%w: %s is a trusted proxy but sent no PROXY header (HAProxy: send-proxy-v2 on the server line)", ErrRefused, proxy)
		}
		return proxy, proxy, fmt.Errorf("%w: PROXY header from %s: %w", ErrRefused, proxy, err)
	}
	if h.Command.IsLocal() {
		return proxy, proxy, nil
	}
	return addrPort(h.SourceAddr), proxy, nil
}
