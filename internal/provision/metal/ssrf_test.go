package metal

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/better-compute/better-compute/internal/provision"
	"github.com/better-compute/better-compute/internal/webhook"
)

// secret is what the internal services of these tests answer: it must never come back in an
// error.
const secret = "SECRET-internal-7f3a"

// newRedfish makes a pxe class's provider of endpoint, allowing private endpoints or not.
func newRedfish(endpoint string, allowPrivate bool) (provision.Provider, error) {
	params, err := json.Marshal(map[string]any{"endpoints": []string{endpoint}, "boot": map[string]string{"mode": "pxe"}, "timeout": "5s"})
	if err != nil {
		return nil, err
	}
	return Factory(params, testCredentials, provision.Egress{AllowPrivate: allowPrivate})
}

// secretServer is an internal service on loopback that answers every request with status and
// the secret, counting the requests it gets.
func secretServer(t *testing.T, status int) (*httptest.Server, *atomic.Int32) {
	t.Helper()
	var hits atomic.Int32
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		hits.Add(1)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_, _ = w.Write([]byte(`{"error": {"code": "Base.1.0.GeneralError", "message": "` + secret + `"}}`))
	}))
	t.Cleanup(s.Close)
	return s, &hits
}

// TestPrivateEndpointRefused: a class whose endpoint is a loopback service is refused when the
// deployment does not allow private endpoints, and the service is never asked.
func TestPrivateEndpointRefused(t *testing.T) {
	t.Parallel()
	s, hits := secretServer(t, http.StatusOK)
	for _, endpoint := range []string{s.URL, "http://localhost:9", "http://169.254.169.254", "http://[::1]:9", "http://10.0.0.1", "http://2130706433"} {
		if _, err := newRedfish(endpoint, false); err == nil || !strings.Contains(err.Error(), "endpoints[0]") {
			t.Errorf("endpoint %s: got %v, want a refusal naming endpoints[0]", endpoint, err)
		}
	}
	if n := hits.Load(); n != 0 {
		t.Fatalf("the internal service was asked %d times", n)
	}
}

// TestRedirectNotFollowed: a BMC that redirects to an internal service (the cloud metadata
// address, here a loopback server) does not lead the provider there, and the error says only
// the status.
func TestRedirectNotFollowed(t *testing.T) {
	t.Parallel()
	internal, hits := secretServer(t, http.StatusInternalServerError)
	bmc := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, internal.URL+"/latest/meta-data/iam/security-credentials/", http.StatusFound)
	}))
	t.Cleanup(bmc.Close)
	p, err := newRedfish(bmc.URL, true)
	if err != nil {
		t.Fatal(err)
	}
	_, err = p.List(t.Context())
	if err == nil {
		t.Fatal("List through a redirecting BMC succeeded")
	}
	if strings.Contains(err.Error(), secret) {
		t.Errorf("the error carries the internal service's answer: %v", err)
	}
	if n := hits.Load(); n != 0 {
		t.Errorf("the redirect was followed: the internal service was asked %d times (error %v)", n, err)
	}
}

// TestErrorBodyNotReported: a BMC (or anything posing as one) that fails with a body has its
// failure reported as the status alone: the body never reaches the error, which becomes the
// machine's reason and goes to the logs.
func TestErrorBodyNotReported(t *testing.T) {
	t.Parallel()
	for _, status := range []int{http.StatusInternalServerError, http.StatusUnauthorized, http.StatusNotFound} {
		s, _ := secretServer(t, status)
		p, err := newRedfish(s.URL, true)
		if err != nil {
			t.Fatal(err)
		}
		_, err = p.List(t.Context())
		if err == nil {
			t.Fatalf("status %d: List succeeded", status)
		}
		t.Logf("status %d: %v", status, err)
		if strings.Contains(err.Error(), secret) {
			t.Errorf("status %d: the error carries the answer's body: %v", status, err)
		}
		if want := http.StatusText(status); !strings.Contains(err.Error(), want) {
			t.Errorf("status %d: the error %q does not say %q", status, err, want)
		}
		for _, call := range []func() error{
			func() error { _, err := p.Get(t.Context(), s.URL+"/redfish/v1/Systems/1#m"); return err },
			func() error { return p.Power(t.Context(), s.URL+"/redfish/v1/Systems/1#m", provision.PowerOn) },
			func() error { return p.Delete(t.Context(), s.URL+"/redfish/v1/Systems/1#m") },
			func() error {
				_, err := p.Create(t.Context(), createRequest("0192f7a0-0000-7000-8000-00000000000a", "d.example"))
				return err
			},
		} {
			if err := call(); err != nil && strings.Contains(err.Error(), secret) {
				t.Errorf("status %d: the error carries the answer's body: %v", status, err)
			}
		}
	}
}

// FuzzEndpoint: a class's endpoint never panics the factory and, with private endpoints not
// allowed, an accepted endpoint's host is neither localhost nor a literal non-public address.
func FuzzEndpoint(f *testing.F) {
	for _, s := range []string{"https://bmc.example", "http://127.0.0.1:8000", "http://[::1]", "http://169.254.169.254", "http://[::ffff:10.0.0.1]", "http://0177.0.0.1", "http://LOCALHOST."} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, endpoint string) {
		p, err := newRedfish(endpoint, false)
		if err != nil {
			return
		}
		for _, e := range p.(*provider).params.Endpoints {
			u, err := url.Parse(e)
			if err != nil {
				t.Fatalf("accepted %q as %q, which does not parse: %v", endpoint, e, err)
			}
			host := strings.ToLower(strings.TrimSuffix(u.Hostname(), "."))
			if host == "localhost" || strings.HasSuffix(host, ".localhost") {
				t.Fatalf("accepted %q: localhost", endpoint)
			}
			if ip, err := netip.ParseAddr(host); err == nil && webhook.PrivateAddr(ip) {
				t.Fatalf("accepted %q: %s is not public", endpoint, ip)
			}
		}
	})
}
