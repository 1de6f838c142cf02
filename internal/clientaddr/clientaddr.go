// Package clientaddr says who a client is when the server stands behind a
// load balancer: the one place that decides a connection's or a request's
// client address, so that every per-address limit, lockout, allowlist, audit
// row and log line names the partner's or reviewer's machine, never the
// balancer's.
//
// Only the operator's proxies (serve --trusted-proxies) are believed:
//
//   - On the SFTP address (Listener), a connection from a trusted proxy must
//     open with a PROXY protocol header, v1 or v2 (HAProxy send-proxy-v2),
//     which gives the client's address; one without it is refused, and so is
//     a PROXY header from any other source (it would be a client choosing the
//     address it is counted under).
//   - On the HTTP address (Middleware), a request from a trusted proxy comes
//     from the address that proxy appended to X-Forwarded-For, or to
//     Forwarded (RFC 7239) — one of the two, chosen by the operator, because
//     a proxy passes the other header through as the client wrote it. The
//     client is the rightmost address not itself a trusted proxy: anything
//     left of it was written by the client. Whether the client's connection
//     is HTTPS comes from the same proxy (X-Forwarded-Proto, or the proto of
//     that Forwarded element).
package clientaddr

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strings"
)

// Header names the request header a trusted proxy writes the client's
// address to.
type Header string

// The headers a trusted proxy may append the client's address to.
const (
	XForwardedFor Header = "x-forwarded-for"
	Forwarded     Header = "forwarded"
)

// Proxies are the operator's trusted proxies and the header they write.
// The zero value trusts nobody.
type Proxies struct {
	nets   []netip.Prefix
	header Header
}

// Parse reads a comma-separated list of addresses and CIDR ranges
// ("10.0.0.0/8,192.0.2.7"; empty: none) and the header the proxies append
// the client's address to ("" means X-Forwarded-For).
func Parse(list string, header Header) (Proxies, error) {
	p := Proxies{header: header}
	switch header {
	case "":
		p.header = XForwardedFor
	case XForwardedFor, Forwarded:
	default:
		return Proxies{}, fmt.Errorf("proxy header %q: use %s or %s", header, XForwardedFor, Forwarded)
	}
	nets, err := ParsePrefixes(list)
	if err != nil {
		return Proxies{}, fmt.Errorf("trusted proxies: %w", err)
	}
	p.nets = nets
	return p, nil
}

// ParsePrefixes reads a comma-separated list of addresses and CIDR ranges
// ("10.0.0.0/8, 192.0.2.7, 2001:db8::/32"; empty: none); an address alone
// is a range of one.
func ParsePrefixes(list string) ([]netip.Prefix, error) {
	var nets []netip.Prefix
	for s := range strings.SplitSeq(list, ",") {
		s = strings.TrimSpace(s)
		if s == "" {
			continue
		}
		if !strings.Contains(s, "/") {
			a, err := netip.ParseAddr(s)
			if err != nil {
				return nil, fmt.Errorf("%q: give an IP address or a CIDR range such as 10.0.0.0/8", s)
			}
			a = a.Unmap()
			nets = append(nets, netip.PrefixFrom(a, a.BitLen()))
			continue
		}
		n, err := netip.ParsePrefix(s)
		if err != nil {
			return nil, fmt.Errorf("%q: give an IP address or a CIDR range such as 10.0.0.0/8", s)
		}
		if n != n.Masked() {
			return nil, fmt.Errorf("%q has host bits set: did you mean %s?", s, n.Masked())
		}
		nets = append(nets, n)
	}
	return nets, nil
}

// Trusted reports whether a is one of the proxies.
func (p Proxies) Trusted(a netip.Addr) bool {
	a = a.Unmap()
	for _, n := range p.nets {
		if n.Contains(a) {
			return true
		}
	}
	return false
}

// String lists the proxies as Parse reads them.
func (p Proxies) String() string {
	s := make([]string, len(p.nets))
	for i, n := range p.nets {
		s[i] = n.String()
	}
	return strings.Join(s, ",")
}

// addrPort reads a net.Addr as an address and port (zero when it is not an
// IP address, such as a pipe's).
func addrPort(a net.Addr) netip.AddrPort {
	if a == nil {
		return netip.AddrPort{}
	}
	if t, ok := a.(*net.TCPAddr); ok {
		ap := t.AddrPort()
		return netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port())
	}
	ap, err := netip.ParseAddrPort(a.String())
	if err != nil {
		return netip.AddrPort{}
	}
	return netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port())
}

// ErrRefused is every connection refused for its PROXY header: a trusted
// proxy's without one, or another source's with one.
var ErrRefused = errors.New("refused")
