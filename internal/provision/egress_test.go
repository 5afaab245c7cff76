package provision_test

import (
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/better-compute/better-compute/internal/provision"
	"github.com/better-compute/better-compute/internal/webhook"
)

// TestEgressDialRefusesPrivate: with private endpoints not allowed, the client refuses to
// connect to a loopback address after resolving the name, so a name that resolves to one (here
// localhost, which CheckEndpoint would have refused by name) does not get through either.
func TestEgressDialRefusesPrivate(t *testing.T) {
	t.Parallel()
	var hits atomic.Int32
	s := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { hits.Add(1) }))
	t.Cleanup(s.Close)
	_, port, err := net.SplitHostPort(strings.TrimPrefix(s.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	c := provision.Egress{}.Client(provision.ClientOptions{Timeout: 5 * time.Second})
	for _, u := range []string{s.URL, "http://localhost:" + port} {
		res, err := c.Get(u)
		if err == nil {
			_ = res.Body.Close()
			t.Fatalf("%s: connected", u)
		}
		if !errors.Is(err, provision.ErrPrivateEndpoint) {
			t.Errorf("%s: %v, want ErrPrivateEndpoint", u, err)
		}
	}
	if hits.Load() != 0 {
		t.Fatal("the loopback server was reached")
	}
	res, err := provision.Egress{AllowPrivate: true}.Client(provision.ClientOptions{}).Get(s.URL)
	if err != nil {
		t.Fatalf("allowed: %v", err)
	}
	_ = res.Body.Close()
}

// TestEgressNoRedirectsBoundedAnswers: a redirect is returned, not followed; an answer past
// the bound fails to read instead of filling memory.
func TestEgressNoRedirectsBoundedAnswers(t *testing.T) {
	t.Parallel()
	var hits atomic.Int32
	target := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { hits.Add(1) }))
	t.Cleanup(target.Close)
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/big" {
			_, _ = w.Write(make([]byte, 2<<20))
			return
		}
		http.Redirect(w, r, target.URL, http.StatusFound)
	}))
	t.Cleanup(s.Close)
	c := provision.Egress{AllowPrivate: true}.Client(provision.ClientOptions{MaxAnswerBytes: 1 << 20})
	res, err := c.Get(s.URL + "/redirect")
	if err != nil {
		t.Fatal(err)
	}
	_ = res.Body.Close()
	if res.StatusCode != http.StatusFound || hits.Load() != 0 {
		t.Fatalf("status %d, target asked %d times: the redirect was followed", res.StatusCode, hits.Load())
	}
	res, err = c.Get(s.URL + "/big")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = res.Body.Close() }()
	if b, err := io.ReadAll(res.Body); !errors.Is(err, provision.ErrAnswerTooLarge) || len(b) > 1<<20 {
		t.Fatalf("read %d bytes, %v; want at most 1 MiB and ErrAnswerTooLarge", len(b), err)
	}
}

// FuzzCheckEndpoint: CheckEndpoint never panics and, with private endpoints not allowed, never
// accepts an endpoint whose host is localhost or a literal loopback, link-local, private or
// other non-public address.
func FuzzCheckEndpoint(f *testing.F) {
	for _, s := range []string{
		"https://bmc.example", "http://127.0.0.1:8000", "http://[::1]", "http://169.254.169.254/latest",
		"http://[::ffff:127.0.0.1]", "http://[64:ff9b::a9fe:a9fe]", "http://0x7f.1", "http://localhost.",
		"http://[fe80::1%25eth0]", "https://10.0.0.1:443", "http://100.100.100.200", "http://u:p@host",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		if (provision.Egress{AllowPrivate: true}).CheckEndpoint(raw) != nil {
			return
		}
		if (provision.Egress{}).CheckEndpoint(raw) != nil {
			return
		}
		u, err := url.Parse(raw)
		if err != nil {
			t.Fatalf("accepted %q, which does not parse: %v", raw, err)
		}
		host := strings.ToLower(strings.TrimSuffix(u.Hostname(), "."))
		if host == "localhost" || strings.HasSuffix(host, ".localhost") {
			t.Fatalf("accepted %q: localhost", raw)
		}
		if ip, err := netip.ParseAddr(host); err == nil && webhook.PrivateAddr(ip) {
			t.Fatalf("accepted %q: %s is not public", raw, ip)
		}
	})
}
