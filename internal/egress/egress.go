// Package egress is how payintake speaks HTTP to the URLs an operator
// configures: the payroll vendor's batch API (dispatch) and partners'
// notification receivers (notify). One policy for both:
//
//   - A URL is parsed and normalised once, when it is set (ParseURL): http
//     or https, no user name or password, a valid host and port, nothing
//     that is not a URL character.
//   - Redirects are never followed. A 3xx is an answer like any other, to
//     be handled by the caller's "any other status": a request only ever
//     goes to the host of the configured URL, and a 302 can never turn a
//     payment into a body-less GET whose 200 would count as paid.
//   - No proxy from the environment: a proxy connects on our behalf, past
//     the address check below.
//   - Link-local and cloud metadata addresses are refused at connect time,
//     by the dialer's Control, which runs after name resolution and before
//     the connect system call: a name that resolves to one (today, or after
//     its DNS changes) reaches nothing.
//
// Private and loopback addresses are allowed: only operators set these
// URLs, and payroll vendors and partners' receivers often sit on private
// networks or behind a local relay. The metadata services are refused
// because no vendor lives there and a request to one hands out the
// machine's cloud credentials.
package egress

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"syscall"
	"time"
)

var (
	// ErrBadURL is returned by ParseURL for a URL payintake will not send to.
	ErrBadURL = errors.New("not a usable outbound URL")
	// ErrRefusedAddress is returned when a connection would go to a
	// link-local or cloud metadata address.
	ErrRefusedAddress = errors.New("refused address")
)

// refusedPrefixes are the addresses payintake never connects to, and why.
var refusedPrefixes = []struct {
	prefix netip.Prefix
	why    string
}{
	{netip.MustParsePrefix("169.254.0.0/16"), "link-local (the cloud metadata services of AWS, GCP, Azure, Oracle, DigitalOcean and OpenStack answer at 169.254.169.254)"},
	{netip.MustParsePrefix("fe80::/10"), "IPv6 link-local"},
	{netip.MustParsePrefix("fd00:ec2::254/128"), "the AWS instance metadata service (IPv6)"},
	{netip.MustParsePrefix("100.100.100.200/32"), "the Alibaba Cloud metadata service"},
	{netip.MustParsePrefix("168.63.129.16/32"), "the Azure platform endpoint (WireServer)"},
}

// nat64 is the well-known NAT64 prefix (RFC 6052): 64:ff9b::a9fe:a9fe is
// 169.254.169.254 on a network with a NAT64 gateway.
var nat64 = netip.MustParsePrefix("64:ff9b::/96")

// refused says why payintake never connects to ip ("": it may).
func refused(ip netip.Addr) string {
	ip = ip.Unmap().WithZone("")
	if nat64.Contains(ip) {
		b := ip.As16()
		ip = netip.AddrFrom4([4]byte(b[12:]))
	}
	for _, p := range refusedPrefixes {
		if p.prefix.Contains(ip) {
			return p.why
		}
	}
	return ""
}

// Control is the dialer's check of the address it is about to connect
// to, an IP address and port (net.Dialer.Control: called after the name
// is resolved and before the connect system call, for every address
// tried). Anything that is not an IP address and port is refused too.
func Control(network, address string, _ syscall.RawConn) error {
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return fmt.Errorf("%w %s (%s): not an IP address and port", ErrRefusedAddress, address, network)
	}
	if why := refused(ap.Addr()); why != "" {
		return fmt.Errorf("%w %s: %s; payintake never connects to link-local or cloud metadata addresses: point the URL at the receiver's own address", ErrRefusedAddress, address, why)
	}
	return nil
}

// Timeouts of the client's own steps. A whole request is bounded by its
// caller's context (a target's --timeout, notify's Timeout).
const (
	DialTimeout         = 10 * time.Second
	TLSHandshakeTimeout = 10 * time.Second
	IdleConnTimeout     = 90 * time.Second
)

// NewDialer returns the dialer of NewClient: Control, DialTimeout, TCP
// keep-alives.
func NewDialer() *net.Dialer {
	return &net.Dialer{Timeout: DialTimeout, KeepAlive: 30 * time.Second, Control: Control}
}

// NewClient returns an HTTP client for operator-configured URLs: no
// redirects followed (the 3xx is returned as the answer), no proxy, every
// connection checked by Control, idle connections kept for reuse.
func NewClient() *http.Client { return newClient(NewDialer()) }

func newClient(d *net.Dialer) *http.Client {
	return &http.Client{
		Transport: &http.Transport{
			Proxy:                 nil,
			DialContext:           d.DialContext,
			ForceAttemptHTTP2:     true,
			MaxIdleConns:          100,
			MaxIdleConnsPerHost:   16,
			IdleConnTimeout:       IdleConnTimeout,
			TLSHandshakeTimeout:   TLSHandshakeTimeout,
			ExpectContinueTimeout: time.Second,
		},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}

// Redirect describes a 3xx answer for a log or a dead letter's detail:
// "redirect to LOCATION not followed" ("" for any other status).
func Redirect(status int, h http.Header) string {
	if status < 300 || status > 399 {
		return ""
	}
	loc := h.Get("Location")
	if loc == "" {
		loc = "(no Location)"
	}
	if len(loc) > 256 {
		loc = loc[:256] + "…"
	}
	return fmt.Sprintf("redirect to %s not followed (payintake never follows redirects: configure the final URL)", strings.ToValidUTF8(loc, "?"))
}

// urlChars are the characters a URL may hold (RFC 3986: unreserved,
// reserved and '%'); anything else (spaces, quotes, '<', '\', controls,
// non-ASCII) is refused rather than guessed at.
func urlChar(c byte) bool {
	switch {
	case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		return true
	}
	return strings.IndexByte("-._~:/?#[]@!$&'()*+,;=%", c) >= 0
}

// ParseURL checks an outbound URL as an operator gives it and returns it
// normalised (scheme and host in lower case), or an error wrapping
// ErrBadURL that says what is wrong.
func ParseURL(raw string) (string, error) {
	shown := raw // the URL as the message quotes it: a password is masked
	bad := func(why string) (string, error) {
		return "", fmt.Errorf("%w: %q %s; give an absolute http:// or https:// URL such as https://vendor.example/batches", ErrBadURL, shown, why)
	}
	if raw == "" {
		return bad("is empty")
	}
	for i := 0; i < len(raw); i++ {
		if !urlChar(raw[i]) {
			what := fmt.Sprintf("%q", raw[i:i+1])
			if raw[i] >= 0x80 {
				what = "a non-ASCII character (write a domain name in its xn-- form, percent-encode a path)"
			} else if raw[i] == ' ' {
				what = "a space"
			}
			return bad(fmt.Sprintf("holds %s at byte %d", what, i+1))
		}
	}
	u, err := url.Parse(raw)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return bad(fmt.Sprintf("cannot be parsed (%v)", err))
	}
	switch {
	case u.Scheme != "http" && u.Scheme != "https":
		return bad("is not http or https")
	case u.Opaque != "" || u.Host == "":
		return bad("has no host (it must start with http:// or https:// and a host name)")
	case u.User != nil:
		shown = u.Redacted()
		return bad("holds a user name or password (user@host): payintake sends none in URLs")
	case u.Fragment != "" || strings.HasSuffix(raw, "#"):
		return bad("has a #fragment, which is never sent")
	}
	host := strings.ToLower(u.Hostname())
	if ip, err := netip.ParseAddr(host); err == nil {
		if ip.Zone() != "" {
			return bad("names an IPv6 zone")
		}
		if why := refused(ip); why != "" {
			return bad("is " + why + ": payintake never connects there")
		}
	} else if why := badHostName(host); why != "" {
		return bad(why)
	}
	if p := u.Port(); p != "" {
		if n, err := strconv.Atoi(p); err != nil || n < 1 || n > 65535 {
			return bad("has port " + p + ", not 1 to 65535")
		}
	} else if strings.HasSuffix(u.Host, ":") {
		return bad("has an empty port")
	}
	u.Host = strings.ToLower(u.Host)
	return u.String(), nil
}

// badHostName says what is wrong with a DNS host name ("" nothing): labels
// of letters, digits and '-' (not first or last), 1 to 63 characters, at
// most 253 in all, and a last label that is not all digits (a name such as
// 10.1 or 0x7f.1 that some resolvers read as an address).
func badHostName(h string) string {
	name := strings.TrimSuffix(h, ".")
	if name == "" || len(name) > 253 {
		return "has no valid host name"
	}
	labels := strings.Split(name, ".")
	for _, l := range labels {
		if l == "" || len(l) > 63 || l[0] == '-' || l[len(l)-1] == '-' {
			return fmt.Sprintf("has an invalid host name %q", h)
		}
		for i := 0; i < len(l); i++ {
			c := l[i]
			if !('a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '-') {
				return fmt.Sprintf("has an invalid host name %q (letters, digits, '-' and '.' only)", h)
			}
		}
	}
	last := labels[len(labels)-1]
	if strings.Trim(last, "0123456789") == "" || strings.HasPrefix(last, "0x") {
		return fmt.Sprintf("has host %q, neither an IP address nor a host name", h)
	}
	return ""
}
