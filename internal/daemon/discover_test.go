package daemon_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"testing"
	"time"

	"github.com/better-compute/better-compute/internal/daemon"
	"github.com/better-compute/better-compute/internal/pki/cahash"
)

// TestFetchRoot: with only the root's pin, a daemon takes the root from the gateway's handshake
// (the gateway sends it after its certificate) when it matches the pin and the gateway's
// certificate verifies against it. A wrong pin, a chain without the root, a root that only
// matches but did not sign the certificate, or a server that is not a gateway is refused in the
// handshake: no call reaches the server.
func TestFetchRoot(t *testing.T) {
	t.Parallel()
	ca, other := newCA(t), newCA(t)
	pin := cahash.Of(ca.cert)
	withRoot := func(c tls.Certificate, root *x509.Certificate) tls.Certificate {
		c.Certificate = append(c.Certificate, root.Raw)
		return c
	}
	gwID := "spiffe://" + td + "/gateway/eu/gw-1"
	gw, _, _ := ca.issue(t, gwID, x509.ExtKeyUsageServerAuth)
	otherGW, _, _ := other.issue(t, gwID, x509.ExtKeyUsageServerAuth)
	internal, _, _ := ca.issue(t, "spiffe://"+td+"/internal/api", x509.ExtKeyUsageServerAuth)
	for _, tc := range []struct {
		name string
		cert tls.Certificate
		pins []string
		ok   bool
	}{
		{"the pinned root", withRoot(gw, ca.cert), []string{cahash.Of(other.cert), pin}, true},
		{"a wrong pin", withRoot(gw, ca.cert), []string{cahash.Of(other.cert)}, false},
		{"no root in the chain", gw, []string{pin}, false},
		{"another deployment's gateway showing the pinned root", withRoot(otherGW, ca.cert), []string{pin}, false},
		{"not a gateway", withRoot(internal, ca.cert), []string{pin}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			g := &fakeGateway{trustDomain: td, root: ca.pem}
			addr := serve(t, g, tc.cert)
			ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
			defer cancel()
			root, err := daemon.Dialer{Gateway: addr}.FetchRoot(ctx, tc.pins)
			if tc.ok {
				if err != nil || string(root) != string(ca.pem) {
					t.Fatalf("FetchRoot = %q, %v; want the root", root, err)
				}
			} else if err == nil || root != nil {
				t.Fatalf("FetchRoot = %q, %v; want a refusal", root, err)
			} else if tc.name != "not a gateway" && !errors.Is(err, daemon.ErrRootNotPinned) {
				t.Errorf("FetchRoot: %v; want ErrRootNotPinned", err)
			}
			if g.calls.Load() != 0 {
				t.Errorf("%d calls reached the server", g.calls.Load())
			}
			t.Logf("FetchRoot: %v", err)
		})
	}
	if _, err := (daemon.Dialer{Gateway: "127.0.0.1:1"}).FetchRoot(context.Background(), nil); err == nil {
		t.Error("FetchRoot without a pin: no error")
	}
}

// TestOuterPinned: while the root is being fetched, the WebSocket's outer TLS passes with the
// system's roots or with the pinned root in the chain (a listener serving the gateway's own
// certificate), and with nothing else.
func TestOuterPinned(t *testing.T) {
	t.Parallel()
	ca, other := newCA(t), newCA(t)
	gw, _, _ := ca.issue(t, "spiffe://"+td+"/gateway/eu/gw-1", x509.ExtKeyUsageServerAuth)
	leaf, err := x509.ParseCertificate(gw.Certificate[0])
	if err != nil {
		t.Fatal(err)
	}
	state := tls.ConnectionState{ServerName: "127.0.0.1", PeerCertificates: []*x509.Certificate{leaf, ca.cert}}
	pinned := daemon.OuterPinned(&tls.Config{}, x509.NewCertPool(), []string{cahash.Of(ca.cert)})
	if err := pinned.VerifyConnection(state); err != nil {
		t.Errorf("the pinned root in the chain: %v", err)
	}
	if err := daemon.OuterPinned(&tls.Config{}, x509.NewCertPool(), []string{cahash.Of(other.cert)}).VerifyConnection(state); !errors.Is(err, daemon.ErrRootNotPinned) {
		t.Errorf("another pin: %v", err)
	}
	sys := x509.NewCertPool()
	sys.AddCert(ca.cert)
	alone := tls.ConnectionState{ServerName: "127.0.0.1", PeerCertificates: []*x509.Certificate{leaf}}
	if err := daemon.OuterPinned(&tls.Config{}, sys, []string{cahash.Of(other.cert)}).VerifyConnection(alone); err != nil {
		t.Errorf("a certificate the system's roots sign: %v", err)
	}
	if !pinned.InsecureSkipVerify || pinned.VerifyConnection == nil {
		t.Error("the outer TLS is not verified in VerifyConnection")
	}
}
