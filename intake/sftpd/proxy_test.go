package sftpd_test

import (
	"fmt"
	"net"
	"net/netip"
	"regexp"
	"strings"
	"testing"
	"time"

	proxyproto "github.com/pires/go-proxyproto"
	"github.com/pkg/sftp"
	"golang.org/x/crypto/ssh"

	"github.com/payintake/payintake/internal/clientaddr"
	"github.com/payintake/payintake/internal/eventually"
	"github.com/payintake/payintake/records"
)

// proxyHeader is a PROXY header (v1 or v2) naming client.
func proxyHeader(t *testing.T, version byte, client string) []byte {
	t.Helper()
	h := proxyproto.HeaderProxyFromAddrs(version, net.TCPAddrFromAddrPort(netip.MustParseAddrPort(client)),
		net.TCPAddrFromAddrPort(netip.MustParseAddrPort("127.0.0.1:2022")))
	b, err := h.Format()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// loginVia logs in from the local address from, sending header first (nil:
// none), as a balancer's connection does.
func (z *dropZone) loginVia(from string, header []byte, user string, key ssh.Signer) (*sftp.Client, error) {
	z.t.Helper()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}, Timeout: 10 * time.Second}
	c, err := d.Dial("tcp", z.addr)
	if err != nil {
		z.t.Fatal(err)
	}
	if header != nil {
		if _, err := c.Write(header); err != nil {
			c.Close()
			return nil, err
		}
	}
	sc, chans, reqs, err := ssh.NewClientConn(c, z.addr, z.clientConfig(user, key))
	if err != nil {
		c.Close()
		return nil, err
	}
	conn := ssh.NewClient(sc, chans, reqs)
	cl, err := sftp.NewClient(conn)
	if err != nil {
		conn.Close()
		return nil, err
	}
	z.t.Cleanup(func() { cl.Close(); conn.Close() })
	return cl, nil
}

// waitLog waits until a log line matches re and returns it.
func (z *dropZone) waitLog(re string) string {
	z.t.Helper()
	rx := regexp.MustCompile(re)
	var found string
	eventually.NoError(z.t, 10*time.Second, func() error {
		for line := range strings.SplitSeq(z.logs.String(), "\n") {
			if rx.MatchString(line) {
				found = line
				return nil
			}
		}
		return fmt.Errorf("no log line matches %s", re)
	})
	return found
}

func (z *dropZone) waitMetric(want float64, name string, labels ...string) {
	z.t.Helper()
	eventually.NoError(z.t, 10*time.Second, func() error {
		if got := z.metric(name, labels...); got != want {
			return fmt.Errorf("%s%v = %v, want %v", name, labels, got, want)
		}
		return nil
	})
}

// TestSFTPBehindProxy: through a trusted proxy (127.0.0.2) sending PROXY
// v2 (or v1) headers, each client is logged and slowed as itself: failed
// logins of one client count against it, not against another behind the
// same proxy. A PROXY header from a source that is not trusted, and a
// trusted proxy's connection without one, are refused and counted.
func TestSFTPBehindProxy(t *testing.T) {
	proxies, err := clientaddr.Parse("127.0.0.2", "")
	if err != nil {
		t.Fatal(err)
	}
	z := newDropZone(t, zoneOpts{proxies: &proxies, loginDelay: time.Millisecond, workers: -1})
	key := z.partner("acme")
	wrong := newKey(t)

	for range 2 {
		if _, err := z.loginVia("127.0.0.2", proxyHeader(t, 2, "198.51.100.7:40000"), "acme", wrong); err == nil {
			t.Fatal("a wrong key logged in")
		}
	}
	z.waitLog(`msg="login failed" .*remote=198\.51\.100\.7:40000 proxy=127\.0\.0\.2:\d+ .*failures_from_address=2`)
	if _, err := z.loginVia("127.0.0.2", proxyHeader(t, 1, "198.51.100.8:40001"), "acme", wrong); err == nil {
		t.Fatal("a wrong key logged in")
	}
	z.waitLog(`msg="login failed" .*remote=198\.51\.100\.8:40001 proxy=127\.0\.0\.2:\d+ .*failures_from_address=1`)

	c, err := z.loginVia("127.0.0.2", proxyHeader(t, 2, "198.51.100.9:40002"), "acme", key)
	if err != nil {
		t.Fatalf("login through the proxy: %v", err)
	}
	put(t, c, "/inbox/via-proxy.csv", []byte("employee_ref,pay_period,component,amount,currency\nE1,2026-11,BASE,1.00,USD\n"))
	z.waitLog(`msg="logged in" .*remote=198\.51\.100\.9:40002 proxy=127\.0\.0\.2:\d+ .*partner=acme`)

	if _, err := z.loginVia("127.0.0.1", proxyHeader(t, 2, "198.51.100.10:40003"), "acme", key); err == nil {
		t.Fatal("a PROXY header from an untrusted source was served")
	}
	z.waitMetric(1, "payintake_sftp_prelogin_closed_total", "reason=proxy_header")
	z.waitLog(`msg="connection refused" .*remote=127\.0\.0\.1:\d+ .*not a trusted proxy`)
	if _, err := z.loginVia("127.0.0.2", nil, "acme", key); err == nil {
		t.Fatal("a trusted proxy's connection without a PROXY header was served")
	}
	z.waitMetric(2, "payintake_sftp_prelogin_closed_total", "reason=proxy_header")
	z.waitLog(`msg="connection refused" .*remote=127\.0\.0\.2:\d+ .*sent no PROXY header`)
	if strings.Contains(z.logs.String(), "198.51.100.10") {
		t.Error("the untrusted source's claimed address reached the log")
	}
	// Directly, without a header, a client is itself.
	if _, err := z.loginVia("127.0.0.1", nil, "acme", key); err != nil {
		t.Fatalf("a direct login: %v", err)
	}
}

// TestSFTPAllowFrom: a partner with an allowlist logs in only from its
// client addresses (behind a proxy, the PROXY header's). Another address
// with the right key gets the failure a wrong key gets, and the refusal is
// logged, audited with the address, and counted.
func TestSFTPAllowFrom(t *testing.T) {
	proxies, err := clientaddr.Parse("127.0.0.2", "")
	if err != nil {
		t.Fatal(err)
	}
	z := newDropZone(t, zoneOpts{proxies: &proxies, loginDelay: time.Millisecond, workers: -1})
	key := z.partner("acme")
	nets := []netip.Prefix{netip.MustParsePrefix("198.51.100.0/24")}
	if err := z.store.UpdatePartner(z.ctx, "acme", records.PartnerUpdate{AllowFrom: &nets}); err != nil {
		t.Fatal(err)
	}
	if _, err := z.loginVia("127.0.0.2", proxyHeader(t, 2, "198.51.100.7:40000"), "acme", key); err != nil {
		t.Fatalf("login from an allowed address: %v", err)
	}
	_, err = z.loginVia("127.0.0.2", proxyHeader(t, 2, "203.0.113.5:40001"), "acme", key)
	_, wrongErr := z.loginVia("127.0.0.2", proxyHeader(t, 2, "198.51.100.8:40002"), "acme", newKey(t))
	if err == nil || wrongErr == nil || !strings.Contains(err.Error(), "unable to authenticate") ||
		err.Error() != wrongErr.Error() {
		t.Fatalf("refused address: %v; wrong key: %v (want the same failure)", err, wrongErr)
	}
	if _, err := z.loginVia("127.0.0.1", nil, "acme", key); err == nil {
		t.Fatal("a direct login from 127.0.0.1, outside the allowlist, was served")
	}
	z.waitLog(`msg="login failed" .*remote=203\.0\.113\.5:40001 .*reason=.*allow-from: 203\.0\.113\.5`)
	z.waitMetric(2, "payintake_partner_refusals_total", "door=sftp", "reason=address_not_allowed")
	if n := z.count(`SELECT count(*) FROM review_audit WHERE via = 'sftp' AND action = 'address_refused' AND partner_id = 'acme'
		AND detail LIKE '%203.0.113.5 is not in allow-from 198.51.100.0/24%'`); n != 1 {
		t.Errorf("%d audit rows of the refusal of 203.0.113.5, want 1", n)
	}
}
