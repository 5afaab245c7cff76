package daemon_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"io"
	"log"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"connectrpc.com/connect"

	daemonv1 "github.com/better-compute/better-compute/gen/go/bettercompute/daemon/v1"
	"github.com/better-compute/better-compute/gen/go/bettercompute/daemon/v1/daemonv1connect"
	"github.com/better-compute/better-compute/internal/daemon"
)

const td = "example.com"

// testCA is a root CA made here, so that certificates of any identity chain to the root a
// daemon trusts: what a gateway, an internal service or another deployment could present.
type testCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pem  []byte
}

func newCA(t *testing.T) *testCA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test root"},
		NotBefore: time.Now().Add(-time.Minute), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageCertSign, BasicConstraintsValid: true, IsCA: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	return &testCA{cert: cert, key: key, pem: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}
}

// issue signs a certificate for 127.0.0.1 carrying id (no URI SAN when empty) and returns it
// with its key; the chain PEM is the certificate alone.
func (ca *testCA) issue(t *testing.T, id string, usage x509.ExtKeyUsage) (tls.Certificate, []byte, *ecdsa.PrivateKey) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: "leaf"},
		NotBefore: time.Now().Add(-time.Minute), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{usage},
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")},
	}
	if id != "" {
		u, err := url.Parse(id)
		if err != nil {
			t.Fatal(err)
		}
		tmpl.URIs = []*url.URL{u}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), key
}

// fakeGateway answers Join with answer's trust domain, and counts the calls that reach it.
type fakeGateway struct {
	daemonv1connect.UnimplementedDaemonServiceHandler
	trustDomain string
	chain       []byte
	root        []byte
	calls       atomic.Int64
}

func (g *fakeGateway) Join(context.Context, *daemonv1.JoinRequest) (*daemonv1.JoinResponse, error) {
	g.calls.Add(1)
	return &daemonv1.JoinResponse{NodeId: "n1", TrustDomain: g.trustDomain, CertificateChain: g.chain, RootCa: g.root}, nil
}

func (g *fakeGateway) Session(context.Context, *connect.BidiStream[daemonv1.SessionRequest, daemonv1.SessionResponse]) error {
	g.calls.Add(1)
	return connect.NewError(connect.CodeUnavailable, errors.New("fake gateway"))
}

// serve runs g over TLS with cert, asking for (not checking) a client certificate.
func serve(t *testing.T, g *fakeGateway, cert tls.Certificate) string {
	t.Helper()
	_, h := daemonv1connect.NewDaemonServiceHandler(g)
	mux := http.NewServeMux()
	mux.Handle("/", h)
	srv := httptest.NewUnstartedServer(mux)
	srv.EnableHTTP2 = true
	srv.Config.ErrorLog = log.New(io.Discard, "", 0) // the refused handshakes
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{cert}, ClientAuth: tls.RequestClientCert}
	srv.StartTLS()
	t.Cleanup(srv.Close)
	return srv.Listener.Addr().String()
}

// TestGatewayIdentity checks that a daemon talks only to a gateway of its trust domain: a
// server whose certificate chains to the daemon's root but names an internal service, a node,
// another trust domain's gateway or nothing is refused in the handshake, before any call, for
// a join as for a session.
func TestGatewayIdentity(t *testing.T) {
	t.Parallel()
	ca := newCA(t)
	serverAuth := x509.ExtKeyUsageServerAuth
	for _, tc := range []struct {
		name, id string
		ok       bool
		// joinAnswered: a join learns its trust domain from the gateway, so one of another
		// trust domain gets the call, and its answer (naming td) is not believed.
		joinAnswered bool
	}{
		{"gateway", "spiffe://" + td + "/gateway/eu/gw-1", true, true},
		{"internal service", "spiffe://" + td + "/internal/api", false, false},
		{"node", "spiffe://" + td + "/node/n2", false, false},
		{"other trust domain", "spiffe://other.example/gateway/eu/gw-1", false, true},
		{"gateway path too short", "spiffe://" + td + "/gateway/gw-1", false, false},
		{"no SPIFFE ID", "", false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			cert, _, _ := ca.issue(t, tc.id, serverAuth)
			_, nodeChain, nodeKey := ca.issue(t, "spiffe://"+td+"/node/n1", x509.ExtKeyUsageClientAuth)
			g := &fakeGateway{trustDomain: td, chain: nodeChain, root: ca.pem}
			addr := serve(t, g, cert)
			ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
			defer cancel()

			// A join with a gateway of another trust domain is also refused, below.
			_, err := daemon.Dialer{Gateway: addr}.Join(ctx, ca.pem, "bcj_x_y", "host")
			switch {
			case tc.ok != (err == nil):
				t.Fatalf("join: %v", err)
			case !tc.ok && !tc.joinAnswered && (!errors.Is(err, daemon.ErrNotGateway) || g.calls.Load() != 0):
				t.Fatalf("join: %v (%d calls reached the server)", err, g.calls.Load())
			case !tc.ok && tc.joinAnswered && !strings.Contains(err.Error(), "but the gateway is of"):
				t.Fatalf("join: %v", err)
			}

			// A session, with an identity of trust domain td.
			calls := g.calls.Load()
			a, err := daemon.NewAgent(daemon.Options{
				Dialer:   daemon.Dialer{Gateway: addr},
				Identity: &daemon.Identity{NodeID: "n1", TrustDomain: td, Key: nodeKey, ChainPEM: nodeChain, RootPEM: ca.pem},
			})
			if err != nil {
				t.Fatal(err)
			}
			rctx, stop := context.WithCancel(ctx)
			done := make(chan struct{})
			go func() { defer close(done); _ = a.Run(rctx) }()
			for a.Status().LastError == nil && ctx.Err() == nil {
				select {
				case <-ctx.Done():
				case <-time.After(10 * time.Millisecond):
				}
			}
			stop()
			<-done
			lastErr := a.Status().LastError
			t.Logf("session: %v", lastErr)
			if tc.ok {
				if g.calls.Load() == calls {
					t.Errorf("session: no call reached the gateway (%v)", lastErr)
				}
				return
			}
			if !strings.Contains(lastErr.Error(), daemon.ErrNotGateway.Error()) || g.calls.Load() != calls {
				t.Errorf("session: %v (%d calls reached the server)", lastErr, g.calls.Load()-calls)
			}
		})
	}

	// A gateway of td that answers a join with another trust domain is not believed.
	cert, _, _ := ca.issue(t, "spiffe://"+td+"/gateway/eu/gw-1", serverAuth)
	_, nodeChain, _ := ca.issue(t, "spiffe://other.example/node/n1", x509.ExtKeyUsageClientAuth)
	addr := serve(t, &fakeGateway{trustDomain: "other.example", chain: nodeChain, root: ca.pem}, cert)
	if _, err := (daemon.Dialer{Gateway: addr}).Join(t.Context(), ca.pem, "bcj_x_y", "host"); err == nil || !strings.Contains(err.Error(), `trust domain "other.example"`) {
		t.Errorf("join answered with another trust domain: %v", err)
	}

	// An identity without a trust domain cannot make an agent: it could check no gateway.
	_, nodeChain, nodeKey := ca.issue(t, "spiffe://"+td+"/node/n1", x509.ExtKeyUsageClientAuth)
	if _, err := daemon.NewAgent(daemon.Options{Identity: &daemon.Identity{NodeID: "n1", Key: nodeKey, ChainPEM: nodeChain, RootPEM: ca.pem}}); err == nil {
		t.Error("an agent without a trust domain")
	}
}
