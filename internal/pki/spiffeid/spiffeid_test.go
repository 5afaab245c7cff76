package spiffeid_test

import (
	"crypto/x509"
	"errors"
	"net/url"
	"testing"

	"github.com/better-compute/better-compute/internal/pki/spiffeid"
)

func certWith(t *testing.T, uris ...string) *x509.Certificate {
	t.Helper()
	c := &x509.Certificate{}
	for _, s := range uris {
		u, err := url.Parse(s)
		if err != nil {
			t.Fatal(err)
		}
		c.URIs = append(c.URIs, u)
	}
	return c
}

func TestGatewayOf(t *testing.T) {
	t.Parallel()
	gw := certWith(t, "spiffe://example.com/gateway/eu-west/gw-1")
	for _, td := range []string{"example.com", ""} {
		got, err := spiffeid.GatewayOf(gw, td)
		if err != nil || got != (spiffeid.Gateway{TrustDomain: "example.com", Region: "eu-west", ID: "gw-1"}) {
			t.Errorf("GatewayOf(%q): %+v, %v", td, got, err)
		}
	}
	for _, bad := range []*x509.Certificate{
		certWith(t, "spiffe://other.example/gateway/eu/gw-1"),
		certWith(t, "spiffe://example.com/node/n1"),
		certWith(t, "spiffe://example.com/internal/api"),
		certWith(t, "spiffe://example.com/gateway/gw-1"),
		certWith(t, "spiffe://example.com/gateway/eu/gw-1/x"),
		certWith(t, "spiffe://example.com/gateway/eu/gw-1", "spiffe://example.com/gateway/eu/gw-2"),
		certWith(t, "https://example.com/gateway/eu/gw-1"),
		certWith(t, "spiffe://example.com/gateway/eu/.."),
		certWith(t),
	} {
		if got, err := spiffeid.GatewayOf(bad, "example.com"); !errors.Is(err, spiffeid.ErrNotGateway) {
			t.Errorf("GatewayOf(%v): %+v, %v; want ErrNotGateway", bad.URIs, got, err)
		}
	}
	if _, err := spiffeid.GatewayOf(certWith(t, "spiffe://example.com/node/n1"), ""); !errors.Is(err, spiffeid.ErrNotGateway) {
		t.Error("GatewayOf of any trust domain accepts a node identity")
	}
}
