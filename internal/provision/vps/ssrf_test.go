package vps

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/better-compute/better-compute/internal/provision"
)

// secret is what the internal services of these tests answer: it must never come back in an
// error.
const secret = "SECRET-internal-7f3a"

// newEC2 makes a class's provider against endpoint, allowing private endpoints or not.
func newEC2(t *testing.T, endpoint string, allowPrivate bool) (provision.Provider, error) {
	t.Helper()
	raw, err := json.Marshal(testParams(t, endpoint))
	if err != nil {
		t.Fatal(err)
	}
	return Factory(raw, testCredentials, provision.Egress{AllowPrivate: allowPrivate})
}

// secretServer is an internal service on loopback that answers every request with status and
// body (the secret in it), counting the requests it gets.
func secretServer(t *testing.T, status int, body string) (*httptest.Server, *atomic.Int32) {
	t.Helper()
	var hits atomic.Int32
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		hits.Add(1)
		w.Header().Set("Content-Type", "text/xml")
		w.WriteHeader(status)
		_, _ = w.Write([]byte(body))
	}))
	t.Cleanup(s.Close)
	return s, &hits
}

// ec2Error is an EC2 error answer whose message is the secret.
const ec2Error = `<?xml version="1.0" encoding="UTF-8"?><Response><Errors><Error><Code>AuthFailure</Code><Message>` + secret + `</Message></Error></Errors><RequestID>r</RequestID></Response>`

// TestPrivateEndpointRefused: a class whose EC2 endpoint is a loopback, link-local or private
// address is refused unless the deployment allows private endpoints.
func TestPrivateEndpointRefused(t *testing.T) {
	t.Parallel()
	s, hits := secretServer(t, http.StatusOK, secret)
	for _, endpoint := range []string{s.URL, "http://localhost:9", "http://169.254.169.254/latest", "http://[fd00::1]", "http://192.168.1.1"} {
		if _, err := newEC2(t, endpoint, false); err == nil || !strings.Contains(err.Error(), "endpoint") {
			t.Errorf("endpoint %s: got %v, want a refusal naming the endpoint", endpoint, err)
		}
	}
	if _, err := newEC2(t, s.URL, true); err != nil {
		t.Errorf("a loopback endpoint allowed by the deployment: %v", err)
	}
	if n := hits.Load(); n != 0 {
		t.Fatalf("the internal service was asked %d times", n)
	}
}

// TestRedirectNotFollowed: an endpoint that redirects the signed POST elsewhere (the cloud
// metadata address, here a loopback server) does not lead the provider there.
func TestRedirectNotFollowed(t *testing.T) {
	t.Parallel()
	for _, status := range []int{http.StatusFound, http.StatusTemporaryRedirect, http.StatusPermanentRedirect} {
		internal, hits := secretServer(t, http.StatusBadRequest, ec2Error)
		front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			http.Redirect(w, r, internal.URL+"/latest/meta-data/", status)
		}))
		t.Cleanup(front.Close)
		p, err := newEC2(t, front.URL, true)
		if err != nil {
			t.Fatal(err)
		}
		_, err = p.List(t.Context())
		if err == nil {
			t.Fatalf("%d: List through a redirecting endpoint succeeded", status)
		}
		if strings.Contains(err.Error(), secret) {
			t.Errorf("%d: the error carries the internal service's answer: %v", status, err)
		}
		if n := hits.Load(); n != 0 {
			t.Errorf("%d: the redirect was followed: the internal service was asked %d times (error %v)", status, n, err)
		}
	}
}

// TestErrorBodyNotReported: an endpoint that fails with a body (an EC2 error whose message is
// the secret, or anything else) is reported by status and error code alone.
func TestErrorBodyNotReported(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		status int
		body   string
		want   string
	}{
		{http.StatusBadRequest, ec2Error, "AuthFailure"},
		{http.StatusForbidden, "<html>" + secret + "</html>", "403"},
	} {
		s, _ := secretServer(t, tc.status, tc.body)
		p, err := newEC2(t, s.URL, true)
		if err != nil {
			t.Fatal(err)
		}
		_, err = p.List(t.Context())
		if err == nil {
			t.Fatalf("status %d: List succeeded", tc.status)
		}
		t.Logf("status %d: %v", tc.status, err)
		if strings.Contains(err.Error(), secret) {
			t.Errorf("status %d: the error carries the answer's body: %v", tc.status, err)
		}
		if !strings.Contains(err.Error(), tc.want) {
			t.Errorf("status %d: the error %q does not say %q", tc.status, err, tc.want)
		}
		if err := p.Delete(t.Context(), "i-0123456789abcdef0"); err != nil && strings.Contains(err.Error(), secret) {
			t.Errorf("status %d: the error carries the answer's body: %v", tc.status, err)
		}
	}
}
