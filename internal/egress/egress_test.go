package egress

import (
	"context"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"golang.org/x/net/dns/dnsmessage"
)

func TestParseURL(t *testing.T) {
	for raw, want := range map[string]string{
		"https://vendor.example/batches":            "https://vendor.example/batches",
		"HTTP://Vendor.Example:8443/Batches?a=B":    "http://vendor.example:8443/Batches?a=B",
		"HtTpS://10.0.0.7/v1/batches":               "https://10.0.0.7/v1/batches",
		"http://127.0.0.1:9/events":                 "http://127.0.0.1:9/events",
		"http://[::1]:8080/x":                       "http://[::1]:8080/x",
		"http://[FD00::1]/x":                        "http://[fd00::1]/x",
		"https://receiver.partner.example./hook%20": "https://receiver.partner.example./hook%20",
		"http://localhost":                          "http://localhost",
		"https://xn--bcher-kva.example/payroll":     "https://xn--bcher-kva.example/payroll",
	} {
		got, err := ParseURL(raw)
		if err != nil || got != want {
			t.Errorf("ParseURL(%q) = %q, %v; want %q", raw, got, err, want)
		}
	}
	for raw, why := range map[string]string{
		"":                                                "is empty",
		"http://a b/":                                     "a space",
		"http://a/b c":                                    "a space",
		"http://vendor.example/\x00":                      `"\x00"`,
		"http://vendor.example/<script>":                  `"<"`,
		"http://bücher.example/":                          "non-ASCII",
		"ftp://vendor.example/":                           "not http or https",
		"javascript:alert(1)":                             "not http or https",
		"http:vendor.example":                             "has no host",
		"vendor.example/batches":                          "not http or https",
		"//vendor.example/batches":                        "not http or https",
		"http:///batches":                                 "has no host",
		"http://user:pw@vendor.example/":                  "user name or password",
		"http://user@vendor.example/":                     "user name or password",
		"http://vendor.example/#x":                        "fragment",
		"http://vendor.example:0/":                        "port 0",
		"http://vendor.example:65536/":                    "port 65536",
		"http://vendor.example:/":                         "empty port",
		"http://169.254.169.254/latest":                   "link-local",
		"http://169.254.170.2/v2/creds":                   "link-local",
		"http://[fe80::1]/":                               "IPv6 link-local",
		"http://[fd00:ec2::254]/":                         "AWS instance metadata",
		"http://[::ffff:169.254.169.254]/":                "link-local",
		"http://[64:ff9b::a9fe:a9fe]/":                    "link-local",
		"http://100.100.100.200/":                         "Alibaba",
		"http://168.63.129.16/":                           "Azure",
		"http://[fe80::1%25eth0]/":                        "zone",
		"http://-vendor.example/":                         "invalid host name",
		"http://vendor_1.example/":                        "invalid host name",
		"http://vendor..example/":                         "invalid host name",
		"http://10.1/":                                    "neither an IP address nor a host name",
		"http://0x7f.1/":                                  "neither an IP address nor a host name",
		"http://2130706433/":                              "neither an IP address nor a host name",
		"http://" + strings.Repeat("a", 64) + ".example/": "invalid host name",
		"http://[::1/":                                    "cannot be parsed",
		"http://vendor.example/%zz":                       "cannot be parsed",
	} {
		got, err := ParseURL(raw)
		if !errors.Is(err, ErrBadURL) || !strings.Contains(err.Error(), why) {
			t.Errorf("ParseURL(%q) = %q, %v; want an ErrBadURL saying %q", raw, got, err, why)
		}
		if err != nil && strings.Contains(err.Error(), "secret") {
			t.Errorf("ParseURL(%q): the message shows the password: %v", raw, err)
		}
	}
}

// TestControl calls the dialer's check directly with the addresses a
// dialer passes it: nothing is dialled.
func TestControl(t *testing.T) {
	for addr, refuse := range map[string]bool{
		"169.254.169.254:80":          true,
		"169.254.0.1:443":             true,
		"169.254.255.255:8080":        true,
		"[fe80::1]:80":                true,
		"[fe80::1%eth0]:80":           true,
		"[febf:ffff::1]:80":           true,
		"[fd00:ec2::254]:80":          true,
		"[::ffff:169.254.169.254]:80": true,
		"[64:ff9b::a9fe:a9fe]:80":     true,
		"100.100.100.200:80":          true,
		"168.63.129.16:80":            true,
		"vendor.example:80":           true, // not resolved: never a dialer's argument
		"169.254.169.254":             true, // no port
		"127.0.0.1:80":                false,
		"127.9.9.9:443":               false,
		"[::1]:80":                    false,
		"10.0.0.1:443":                false,
		"172.16.5.4:443":              false,
		"192.168.1.1:443":             false,
		"[fd00:ec2::253]:53":          false,
		"[fec0::1]:80":                false,
		"169.253.255.255:80":          false,
		"169.255.0.0:80":              false,
		"100.100.100.201:80":          false,
		"203.0.113.10:443":            false,
		"[2001:db8::1]:443":           false,
	} {
		err := Control("tcp4", addr, nil)
		if refuse != (err != nil) || (err != nil && !errors.Is(err, ErrRefusedAddress)) {
			t.Errorf("Control(%s) = %v; want refused: %t", addr, err, refuse)
		}
	}
}

// fakeDNS answers the Go resolver over an in-memory pipe (no socket) from
// a table of names; any other name does not exist.
func fakeDNS(t *testing.T, names map[string][]netip.Addr) *net.Resolver {
	return &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, network, address string) (net.Conn, error) {
		client, server := net.Pipe()
		go func() {
			defer server.Close()
			for {
				var n [2]byte
				if _, err := io.ReadFull(server, n[:]); err != nil {
					return
				}
				q := make([]byte, binary.BigEndian.Uint16(n[:]))
				if _, err := io.ReadFull(server, q); err != nil {
					return
				}
				out, err := dnsAnswer(q, names)
				if err != nil {
					t.Errorf("fake DNS: %v", err)
					return
				}
				binary.BigEndian.PutUint16(n[:], uint16(len(out)))
				if _, err := server.Write(append(n[:], out...)); err != nil {
					return
				}
			}
		}()
		return client, nil
	}}
}

func dnsAnswer(q []byte, names map[string][]netip.Addr) ([]byte, error) {
	var p dnsmessage.Parser
	h, err := p.Start(q)
	if err != nil {
		return nil, err
	}
	question, err := p.Question()
	if err != nil {
		return nil, err
	}
	name := strings.TrimSuffix(strings.ToLower(question.Name.String()), ".")
	addrs, known := names[name]
	rh := dnsmessage.Header{ID: h.ID, Response: true, Authoritative: true, RecursionAvailable: true}
	if !known {
		rh.RCode = dnsmessage.RCodeNameError
	}
	b := dnsmessage.NewBuilder(nil, rh)
	if err := b.StartQuestions(); err != nil {
		return nil, err
	}
	if err := b.Question(question); err != nil {
		return nil, err
	}
	if err := b.StartAnswers(); err != nil {
		return nil, err
	}
	rr := dnsmessage.ResourceHeader{Name: question.Name, Class: dnsmessage.ClassINET, TTL: 60}
	for _, a := range addrs {
		switch {
		case a.Is4() && question.Type == dnsmessage.TypeA:
			err = b.AResource(rr, dnsmessage.AResource{A: a.As4()})
		case a.Is6() && question.Type == dnsmessage.TypeAAAA:
			err = b.AAAAResource(rr, dnsmessage.AAAAResource{AAAA: a.As16()})
		}
		if err != nil {
			return nil, err
		}
	}
	return b.Finish()
}

// guardedDialer is NewDialer with the fake resolver and, after its own
// Control, a guard of the test's: an address Control lets through that is
// not loopback fails the test and is refused there, so that even a broken
// Control never lets this test connect anywhere but loopback.
func guardedDialer(t *testing.T, names map[string][]netip.Addr) (*net.Dialer, func() []string) {
	d := NewDialer()
	if d.ControlContext != nil {
		t.Fatal("NewDialer sets ControlContext, which the guard does not wrap")
	}
	var mu sync.Mutex
	var seen []string
	inner := d.Control
	d.Control = func(network, address string, c syscall.RawConn) error {
		mu.Lock()
		seen = append(seen, address)
		mu.Unlock()
		var err error
		if inner != nil {
			err = inner(network, address, c)
		}
		if err == nil {
			if ap, perr := netip.ParseAddrPort(address); perr != nil || !ap.Addr().Unmap().IsLoopback() {
				t.Errorf("the dialer's Control let %s through", address)
				return errors.New("test guard: only loopback is dialled in tests")
			}
		}
		return err
	}
	d.Resolver = fakeDNS(t, names)
	return d, func() []string { mu.Lock(); defer mu.Unlock(); return append([]string(nil), seen...) }
}

// TestClientRefusesMetadataAtConnect: the client's dialer refuses a
// metadata address whether the URL names it or a host name resolves to it,
// before connecting; a name that resolves to loopback is reached through
// the same resolver, so the refusals are not failed look-ups.
func TestClientRefusesMetadataAtConnect(t *testing.T) {
	var hits atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		w.WriteHeader(http.StatusNoContent)
	}))
	defer srv.Close()
	port := srv.Listener.Addr().(*net.TCPAddr).Port
	d, seen := guardedDialer(t, map[string][]netip.Addr{
		"vendor.test":    {netip.MustParseAddr("127.0.0.1")},
		"metadata.test":  {netip.MustParseAddr("169.254.169.254")},
		"metadata6.test": {netip.MustParseAddr("fd00:ec2::254")},
		"alibaba.test":   {netip.MustParseAddr("100.100.100.200")},
		"rebind.test":    {netip.MustParseAddr("169.254.169.254"), netip.MustParseAddr("fe80::1")},
		"mapped.test":    {netip.MustParseAddr("::ffff:169.254.169.254")},
	})
	c := newClient(d)
	c.Timeout = 10 * time.Second
	get := func(u string) error {
		resp, err := c.Get(u)
		if err == nil {
			resp.Body.Close()
		}
		return err
	}
	if err := get("http://vendor.test:" + strconv.Itoa(port) + "/"); err != nil || hits.Load() != 1 {
		t.Fatalf("a name resolving to loopback: %v, %d requests", err, hits.Load())
	}
	for _, u := range []string{
		"http://169.254.169.254/latest/meta-data/",
		"http://[fd00:ec2::254]/latest/meta-data/",
		"http://100.100.100.200/latest/meta-data/",
		"http://metadata.test/computeMetadata/v1/",
		"http://metadata6.test/latest/meta-data/",
		"http://alibaba.test/latest/meta-data/",
		"http://rebind.test/",
		"http://mapped.test/",
	} {
		before := len(seen())
		err := get(u)
		if !errors.Is(err, ErrRefusedAddress) {
			t.Errorf("GET %s: %v, want ErrRefusedAddress", u, err)
		}
		if len(seen()) == before {
			t.Errorf("GET %s: Control never saw an address, so the refusal did not come from it", u)
		}
	}
	for _, a := range seen() {
		ap, err := netip.ParseAddrPort(a)
		if err != nil || (!ap.Addr().IsLoopback() && refused(ap.Addr()) == "") {
			t.Errorf("Control was asked about %s, neither loopback nor refused", a)
		}
	}
}

// TestClientNeverFollowsRedirects: every 3xx comes back as the answer,
// and the server its Location names sees nothing.
func TestClientNeverFollowsRedirects(t *testing.T) {
	var elsewhere atomic.Int32
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { elsewhere.Add(1) }))
	defer other.Close()
	for _, code := range []int{301, 302, 303, 307, 308} {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			http.Redirect(w, r, other.URL+"/stolen", code)
		}))
		req, _ := http.NewRequest(http.MethodPost, srv.URL, strings.NewReader(`{"x":1}`))
		resp, err := NewClient().Do(req)
		srv.Close()
		if err != nil {
			t.Fatalf("%d: %v", code, err)
		}
		resp.Body.Close()
		if resp.StatusCode != code || !strings.Contains(Redirect(resp.StatusCode, resp.Header), other.URL+"/stolen") {
			t.Errorf("%d: answer %d, %q", code, resp.StatusCode, Redirect(resp.StatusCode, resp.Header))
		}
	}
	if n := elsewhere.Load(); n != 0 {
		t.Errorf("the Location's server got %d requests", n)
	}
}
