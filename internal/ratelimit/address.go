package ratelimit

import (
	"net/http"
	"net/netip"
	"strings"
)

// maxForwardedHops bounds how many X-Forwarded-For entries are read, from the right: a chain of
// trusted proxies is short, and a longer header is the client's own invention.
const maxForwardedHops = 16

// Proxies are the reverse proxies whose X-Forwarded-For the API believes. The zero value trusts
// none: the client is the connection's remote address.
type Proxies struct {
	trusted []netip.Prefix
}

// NewProxies trusts the proxies in prefixes.
func NewProxies(prefixes []netip.Prefix) Proxies {
	out := make([]netip.Prefix, len(prefixes))
	for i, p := range prefixes {
		out[i] = p.Masked()
	}
	return Proxies{trusted: out}
}

// ParsePrefix reads a trusted proxy: a CIDR prefix (10.0.0.0/8, fd00::/8) or a single address.
func ParsePrefix(s string) (netip.Prefix, error) {
	if strings.Contains(s, "/") {
		return netip.ParsePrefix(s)
	}
	a, err := netip.ParseAddr(s)
	if err != nil {
		return netip.Prefix{}, err
	}
	a = a.Unmap()
	return netip.PrefixFrom(a, a.BitLen()), nil
}

func (p Proxies) trusts(a netip.Addr) bool {
	for _, t := range p.trusted {
		if t.Contains(a) {
			return true
		}
	}
	return false
}

// Client returns the address a call came from: remoteAddr (the connection's "host:port"), or,
// when that is a trusted proxy, the rightmost address in X-Forwarded-For that is not a trusted
// proxy (entries to its left are whatever the client chose to send). It returns the zero Addr
// when remoteAddr cannot be parsed.
func (p Proxies) Client(remoteAddr string, h http.Header) netip.Addr {
	client := parseAddr(remoteAddr)
	if !client.IsValid() || len(p.trusted) == 0 || !p.trusts(client) {
		return client
	}
	values := h.Values("X-Forwarded-For")
	hops := 0
	for i := len(values) - 1; i >= 0; i-- {
		entries := strings.Split(values[i], ",")
		for j := len(entries) - 1; j >= 0; j-- {
			if hops++; hops > maxForwardedHops {
				return client
			}
			a := parseAddr(strings.TrimSpace(entries[j]))
			if !a.IsValid() {
				return client // a malformed hop: keep the last address a trusted proxy vouched for
			}
			client = a
			if !p.trusts(a) {
				return client
			}
		}
	}
	return client
}

// parseAddr reads "ip", "ip:port" or "[ipv6]:port", IPv4-mapped IPv6 unmapped and zones
// dropped; the zero Addr when s is none of those.
func parseAddr(s string) netip.Addr {
	if ap, err := netip.ParseAddrPort(s); err == nil {
		return ap.Addr().Unmap().WithZone("")
	}
	if a, err := netip.ParseAddr(strings.TrimSuffix(strings.TrimPrefix(s, "["), "]")); err == nil {
		return a.Unmap().WithZone("")
	}
	return netip.Addr{}
}
