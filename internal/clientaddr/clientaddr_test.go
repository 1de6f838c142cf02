package clientaddr_test

import (
	"crypto/tls"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"testing"
	"time"

	proxyproto "github.com/pires/go-proxyproto"

	"github.com/payintake/payintake/internal/clientaddr"
)

func mustParse(t *testing.T, list string, h clientaddr.Header) clientaddr.Proxies {
	t.Helper()
	p, err := clientaddr.Parse(list, h)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// TestParse: addresses and ranges are read, bad ones named.
func TestParse(t *testing.T) {
	p := mustParse(t, " 10.0.0.0/8, 192.0.2.7 ,2001:db8::/32", "")
	for a, want := range map[string]bool{"10.1.2.3": true, "192.0.2.7": true, "192.0.2.8": false, "2001:db8::1": true, "::ffff:10.0.0.1": true, "11.0.0.1": false} {
		if got := p.Trusted(netip.MustParseAddr(a)); got != want {
			t.Errorf("Trusted(%s) = %v, want %v", a, got, want)
		}
	}
	for _, bad := range []string{"10.0.0.1/8", "example.com", "10.0.0.0/33"} {
		if _, err := clientaddr.Parse(bad, ""); err == nil {
			t.Errorf("Parse(%q) accepted", bad)
		}
	}
	if _, err := clientaddr.Parse("", "x-real-ip"); err == nil {
		t.Error("an unknown header was accepted")
	}
}

// TestMiddleware: a trusted proxy's request comes from the rightmost
// address that is not a trusted proxy; anyone else's headers are ignored.
func TestMiddleware(t *testing.T) {
	xff := mustParse(t, "127.0.0.2,10.0.0.0/8", clientaddr.XForwardedFor)
	fwd := mustParse(t, "127.0.0.2,10.0.0.0/8", clientaddr.Forwarded)
	cases := []struct {
		name    string
		p       clientaddr.Proxies
		peer    string
		headers map[string][]string
		tls     bool
		client  string
		https   bool
	}{
		{"direct, headers ignored", xff, "127.0.0.1:5000", map[string][]string{"X-Forwarded-For": {"198.51.100.1"}, "X-Forwarded-Proto": {"https"}}, false, "127.0.0.1", false},
		{"direct TLS", xff, "127.0.0.1:5000", nil, true, "127.0.0.1", true},
		{"proxy appended", xff, "127.0.0.2:5000", map[string][]string{"X-Forwarded-For": {"198.51.100.1"}}, false, "198.51.100.1", false},
		{"client forged a left entry", xff, "127.0.0.2:5000", map[string][]string{"X-Forwarded-For": {"203.0.113.66, 198.51.100.1"}}, false, "198.51.100.1", false},
		{"two trusted hops", xff, "127.0.0.2:5000", map[string][]string{"X-Forwarded-For": {"203.0.113.66", "198.51.100.1, 10.1.1.1"}, "X-Forwarded-Proto": {"https"}}, false, "198.51.100.1", true},
		{"no header: the proxy itself", xff, "127.0.0.2:5000", nil, false, "127.0.0.2", false},
		{"garbage ends the walk", xff, "127.0.0.2:5000", map[string][]string{"X-Forwarded-For": {"198.51.100.1, nonsense, 10.1.1.1"}}, false, "10.1.1.1", false},
		{"ipv6 with port", xff, "127.0.0.2:5000", map[string][]string{"X-Forwarded-For": {"[2001:db8::7]:4711"}}, false, "2001:db8::7", false},
		{"forwarded mode ignores XFF", fwd, "127.0.0.2:5000", map[string][]string{"X-Forwarded-For": {"203.0.113.66"}, "Forwarded": {`for=198.51.100.1;proto=https`}}, false, "198.51.100.1", true},
		{"forwarded quoted v6 and trusted hop", fwd, "127.0.0.2:5000", map[string][]string{"Forwarded": {`for=203.0.113.66;proto=http, for="[2001:db8:cafe::17]:4711";proto=https, for=10.2.2.2;proto=http`}}, false, "2001:db8:cafe::17", true},
		{"forwarded untrusted peer", fwd, "127.0.0.1:5000", map[string][]string{"Forwarded": {`for=198.51.100.1`}}, false, "127.0.0.1", false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var client netip.Addr
			var remote string
			var https bool
			h := c.p.Middleware(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				client, remote, https = clientaddr.From(r), r.RemoteAddr, clientaddr.HTTPS(r)
			}))
			r := httptest.NewRequest("GET", "/", nil)
			r.RemoteAddr = c.peer
			for k, vs := range c.headers {
				for _, v := range vs {
					r.Header.Add(k, v)
				}
			}
			if c.tls {
				r.TLS = &tls.ConnectionState{}
			}
			h.ServeHTTP(httptest.NewRecorder(), r)
			if client.String() != c.client {
				t.Errorf("client %s, want %s", client, c.client)
			}
			if host, _, _ := net.SplitHostPort(remote); host != c.client {
				t.Errorf("RemoteAddr %s, want host %s", remote, c.client)
			}
			if https != c.https {
				t.Errorf("https %v, want %v", https, c.https)
			}
		})
	}
}

// accepted is what the server side of a Listener saw of one connection.
type accepted struct {
	client, proxy netip.AddrPort
	err           error
	first         string // the first bytes read after the header
	readErr       error
}

// listen serves a Listener trusting 127.0.0.2 and reports each connection.
func listen(t *testing.T) (string, <-chan accepted) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	wrapped := mustParse(t, "127.0.0.2", "").Listener(ln)
	out := make(chan accepted, 4)
	go func() {
		for {
			c, err := wrapped.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				var a accepted
				a.client, a.proxy, a.err = clientaddr.Client(c)
				if a.err == nil {
					_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
					b := make([]byte, 5)
					_, a.readErr = io.ReadFull(c, b)
					a.first = string(b)
				}
				out <- a
			}()
		}
	}()
	return ln.Addr().String(), out
}

func dialFrom(t *testing.T, local, addr string) net.Conn {
	t.Helper()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(local)}, Timeout: 5 * time.Second}
	c, err := d.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func header(t *testing.T, version byte, src string) []byte {
	t.Helper()
	h := proxyproto.HeaderProxyFromAddrs(version, net.TCPAddrFromAddrPort(netip.MustParseAddrPort(src)), net.TCPAddrFromAddrPort(netip.MustParseAddrPort("127.0.0.1:2022")))
	b, err := h.Format()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestListener: over real TCP, a trusted proxy's PROXY v1 or v2 header gives
// the client, its LOCAL health check stands for itself; a trusted proxy
// without a header is refused, and so is a header from anyone else, while
// anyone else without one is served as itself.
func TestListener(t *testing.T) {
	addr, out := listen(t)
	for _, v := range []byte{1, 2} {
		c := dialFrom(t, "127.0.0.2", addr)
		if _, err := c.Write(append(header(t, v, "198.51.100.9:40000"), "SSH-2"...)); err != nil {
			t.Fatal(err)
		}
		a := <-out
		if a.err != nil || a.client.String() != "198.51.100.9:40000" || a.proxy.Addr().String() != "127.0.0.2" || a.first != "SSH-2" {
			t.Errorf("v%d through the trusted proxy: %+v", v, a)
		}
	}

	local := &proxyproto.Header{Version: 2, Command: proxyproto.LOCAL}
	lb, err := local.Format()
	if err != nil {
		t.Fatal(err)
	}
	c := dialFrom(t, "127.0.0.2", addr)
	if _, err := c.Write(append(lb, "SSH-2"...)); err != nil {
		t.Fatal(err)
	}
	if a := <-out; a.err != nil || a.client.Addr().String() != "127.0.0.2" {
		t.Errorf("LOCAL health check: %+v", a)
	}

	c = dialFrom(t, "127.0.0.2", addr)
	if _, err := c.Write([]byte("SSH-2.0-OpenSSH_9.2\r\n")); err != nil {
		t.Fatal(err)
	}
	if a := <-out; !errors.Is(a.err, clientaddr.ErrRefused) {
		t.Errorf("trusted proxy without a header: %+v, want refused", a)
	}

	c = dialFrom(t, "127.0.0.1", addr)
	if _, err := c.Write(append(header(t, 2, "198.51.100.9:40000"), "SSH-2"...)); err != nil {
		t.Fatal(err)
	}
	if a := <-out; a.err != nil || !errors.Is(a.readErr, clientaddr.ErrRefused) || a.client.Addr().String() != "127.0.0.1" {
		t.Errorf("untrusted source with a v2 header: %+v, want refused at its first read", a)
	}
	c = dialFrom(t, "127.0.0.1", addr)
	if _, err := c.Write(append(header(t, 1, "198.51.100.9:40000"), "SSH-2"...)); err != nil {
		t.Fatal(err)
	}
	if a := <-out; !errors.Is(a.readErr, clientaddr.ErrRefused) {
		t.Errorf("untrusted source with a v1 header: %+v, want refused", a)
	}

	c = dialFrom(t, "127.0.0.1", addr)
	if _, err := c.Write([]byte("SSH-2.0-OpenSSH_9.2\r\n")); err != nil {
		t.Fatal(err)
	}
	if a := <-out; a.err != nil || a.readErr != nil || a.first != "SSH-2" || a.client.Addr().String() != "127.0.0.1" || a.proxy.IsValid() {
		t.Errorf("untrusted source without a header: %+v", a)
	}
}
