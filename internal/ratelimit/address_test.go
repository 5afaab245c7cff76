package ratelimit

import (
	"net/http"
	"net/netip"
	"testing"
)

func TestClientAddress(t *testing.T) {
	t.Parallel()
	trusted := NewProxies([]netip.Prefix{netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("fd00::/8")})
	xff := func(vs ...string) http.Header {
		h := http.Header{}
		for _, v := range vs {
			h.Add("X-Forwarded-For", v)
		}
		return h
	}
	many := "198.51.100.1"
	for range 40 {
		many += ", 10.0.0.9"
	}
	for _, tc := range []struct {
		name    string
		proxies Proxies
		remote  string
		h       http.Header
		want    string
	}{
		{"no proxies: header ignored", Proxies{}, "203.0.113.5:4000", xff("198.51.100.1"), "203.0.113.5"},
		{"untrusted remote: header ignored", trusted, "203.0.113.5:4000", xff("198.51.100.1"), "203.0.113.5"},
		{"trusted remote: rightmost entry", trusted, "10.1.2.3:4000", xff("198.51.100.1"), "198.51.100.1"},
		{"client-sent entries to the left are ignored", trusted, "10.1.2.3:4000", xff("1.1.1.1, 198.51.100.1"), "198.51.100.1"},
		{"chain of trusted proxies", trusted, "10.1.2.3:4000", xff("198.51.100.1, 10.9.9.9", "10.8.8.8"), "198.51.100.1"},
		{"all trusted: the leftmost", trusted, "10.1.2.3:4000", xff("10.9.9.9"), "10.9.9.9"},
		{"no header: the proxy", trusted, "10.1.2.3:4000", http.Header{}, "10.1.2.3"},
		{"malformed hop: the last vouched-for address", trusted, "10.1.2.3:4000", xff("198.51.100.1, bogus"), "10.1.2.3"},
		{"entry with a port", trusted, "10.1.2.3:4000", xff("198.51.100.1:5555"), "198.51.100.1"},
		{"too many hops: the last read", trusted, "10.1.2.3:4000", xff(many), "10.0.0.9"},
		{"IPv6 remote", Proxies{}, "[2001:db8::1]:4000", nil, "2001:db8::1"},
		{"IPv4-mapped remote", Proxies{}, "[::ffff:203.0.113.5]:4000", nil, "203.0.113.5"},
		{"unparsable remote", trusted, "pipe", nil, "invalid IP"},
	} {
		got := tc.proxies.Client(tc.remote, tc.h)
		if got.String() != tc.want {
			t.Errorf("%s: Client = %s, want %s", tc.name, got, tc.want)
		}
	}
}

func TestParsePrefix(t *testing.T) {
	t.Parallel()
	for s, want := range map[string]string{"10.0.0.0/8": "10.0.0.0/8", "10.1.2.3": "10.1.2.3/32", "::1": "::1/128", "::ffff:10.1.2.3": "10.1.2.3/32"} {
		p, err := ParsePrefix(s)
		if err != nil || p.String() != want {
			t.Errorf("ParsePrefix(%q) = %s, %v; want %s", s, p, err, want)
		}
	}
	for _, s := range []string{"", "10.0.0.0/33", "host.example.com", "10.0.0.0/8/8"} {
		if _, err := ParsePrefix(s); err == nil {
			t.Errorf("ParsePrefix(%q) accepted", s)
		}
	}
}
