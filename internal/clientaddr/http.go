package clientaddr

import (
	"context"
	"net"
	"net/http"
	"net/netip"
	"strings"
)

type ctxKey struct{}

// request is what Middleware learnt of a request's client.
type request struct {
	client netip.Addr
	proxy  netip.AddrPort // the trusted proxy it came through (zero: direct)
	https  bool
}

// Middleware sets each request's client: r.RemoteAddr becomes the client's
// address (with the proxy's port, or port 0, when it came through a trusted
// proxy), so code that reads RemoteAddr counts and logs the client; From,
// Proxy and HTTPS give the same to handlers.
func (p Proxies) Middleware(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		peer, err := netip.ParseAddrPort(r.RemoteAddr)
		if err != nil {
			next.ServeHTTP(w, r)
			return
		}
		peer = netip.AddrPortFrom(peer.Addr().Unmap(), peer.Port())
		req := &request{client: peer.Addr(), https: r.TLS != nil}
		if p.Trusted(peer.Addr()) {
			req.proxy = peer
			switch p.header {
			case Forwarded:
				req.client, req.https = p.fromForwarded(r.Header.Values("Forwarded"), peer.Addr(), req.https)
			default:
				req.client = p.rightmost(splitList(r.Header.Values("X-Forwarded-For")), peer.Addr())
				if proto := splitList(r.Header.Values("X-Forwarded-Proto")); len(proto) > 0 {
					req.https = strings.EqualFold(proto[len(proto)-1], "https")
				}
			}
		}
		r2 := r.WithContext(context.WithValue(r.Context(), ctxKey{}, req))
		r2.RemoteAddr = netip.AddrPortFrom(req.client, 0).String()
		if req.client == peer.Addr() {
			r2.RemoteAddr = r.RemoteAddr
		}
		next.ServeHTTP(w, r2)
	})
}

// From returns the request's client address: Middleware's, or the peer's
// when the request did not pass through it.
func From(r *http.Request) netip.Addr {
	if req, ok := r.Context().Value(ctxKey{}).(*request); ok {
		return req.client
	}
	ap, err := netip.ParseAddrPort(r.RemoteAddr)
	if err != nil {
		if host, _, err := net.SplitHostPort(r.RemoteAddr); err == nil {
			a, _ := netip.ParseAddr(host)
			return a.Unmap()
		}
		return netip.Addr{}
	}
	return ap.Addr().Unmap()
}

// Proxy returns the trusted proxy the request came through (zero: direct).
func Proxy(r *http.Request) netip.AddrPort {
	if req, ok := r.Context().Value(ctxKey{}).(*request); ok {
		return req.proxy
	}
	return netip.AddrPort{}
}

// HTTPS reports whether the client's connection is HTTPS: this server's
// TLS, or a trusted proxy's per its header.
func HTTPS(r *http.Request) bool {
	if req, ok := r.Context().Value(ctxKey{}).(*request); ok {
		return req.https
	}
	return r.TLS != nil
}

// splitList splits comma-separated header values into their trimmed items.
func splitList(values []string) []string {
	var out []string
	for _, v := range values {
		for item := range strings.SplitSeq(v, ",") {
			if item = strings.TrimSpace(item); item != "" {
				out = append(out, item)
			}
		}
	}
	return out
}

// rightmost walks addresses from the right, past trusted proxies, and
// returns the first that is not one: the client. An entry that is not an
// address ends the walk at the last address read (it was written by
// whoever is left of a proxy: not to be believed). No entry: the peer.
func (p Proxies) rightmost(addrs []string, peer netip.Addr) netip.Addr {
	client := peer
	for i := len(addrs) - 1; i >= 0; i-- {
		a, ok := parseNode(addrs[i])
		if !ok {
			break
		}
		client = a
		if !p.Trusted(a) {
			break
		}
	}
	return client
}

// parseNode reads an address as X-Forwarded-For and Forwarded's for= write
// it: 192.0.2.1, 2001:db8::1, [2001:db8::1], 192.0.2.1:4711,
// "[2001:db8::1]:4711".
func parseNode(s string) (netip.Addr, bool) {
	s = strings.Trim(strings.TrimSpace(s), `"`)
	if a, err := netip.ParseAddr(strings.Trim(s, "[]")); err == nil {
		return a.Unmap(), true
	}
	if ap, err := netip.ParseAddrPort(s); err == nil {
		return ap.Addr().Unmap(), true
	}
	return netip.Addr{}, false
}

// fromForwarded reads RFC 7239 elements: the client is the rightmost for=
// that is not a trusted proxy, and its element's proto says whether its
// connection was HTTPS (https unchanged when that element has no proto).
func (p Proxies) fromForwarded(values []string, peer netip.Addr, https bool) (netip.Addr, bool) {
	elems := splitElements(values)
	client := peer
	for i := len(elems) - 1; i >= 0; i-- {
		a, ok := parseNode(elems[i]["for"])
		if !ok {
			break
		}
		client = a
		if proto, ok := elems[i]["proto"]; ok {
			https = strings.EqualFold(proto, "https")
		}
		if !p.Trusted(a) {
			break
		}
	}
	return client, https
}

// splitElements parses Forwarded header values into their elements'
// parameters (names lower-cased, quoted values unquoted; commas and
// semicolons inside quotes are part of the value).
func splitElements(values []string) []map[string]string {
	var out []map[string]string
	for _, v := range values {
		elem := map[string]string{}
		var tok strings.Builder
		quoted := false
		pair := func() {
			k, val, ok := strings.Cut(tok.String(), "=")
			if ok {
				elem[strings.ToLower(strings.TrimSpace(k))] = strings.Trim(strings.TrimSpace(val), `"`)
			}
			tok.Reset()
		}
		for i := 0; i < len(v); i++ {
			c := v[i]
			switch {
			case c == '"':
				quoted = !quoted
				tok.WriteByte(c)
			case c == '\\' && quoted && i+1 < len(v):
				i++
				tok.WriteByte(v[i])
			case c == ';' && !quoted:
				pair()
			case c == ',' && !quoted:
				pair()
				out = append(out, elem)
				elem = map[string]string{}
			default:
				tok.WriteByte(c)
			}
		}
		pair()
		out = append(out, elem)
	}
	return out
}
