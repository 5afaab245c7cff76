// Package gatewaytest runs real gateways on loopback TLS over a fresh database with a machine
// PKI, for tests of the gateway, the daemon and the simulator. The test package's TestMain must
// call dbtest.Main.
package gatewaytest

import (
	"context"
	"crypto/tls"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/better-compute/better-compute/gateway"
	"github.com/better-compute/better-compute/gen/db"
	"github.com/better-compute/better-compute/internal/auth"
	"github.com/better-compute/better-compute/internal/dbtest"
	"github.com/better-compute/better-compute/internal/pki"
	"github.com/better-compute/better-compute/internal/secret"
)

// Secret is the deployment secret the PKI and node secrets are sealed under.
const Secret = "gateway-test-secret-0123456789abcdef"

// TrustDomain is the PKI's trust domain.
const TrustDomain = "test.local"

// Env is a fresh database with the root tenant and an initialised machine PKI.
type Env struct {
	T      testing.TB
	Pool   *pgxpool.Pool
	Bundle *pki.Bundle
	// Tenant is the root tenant's id.
	Tenant uuid.UUID
	// Secret is the deployment secret the PKI and node secrets are sealed under.
	Secret string
}

// New makes an Env on a fresh database.
func New(t testing.TB) *Env {
	t.Helper()
	return NewOn(t, dbtest.Pool(t))
}

// NewOn makes an Env on a migrated database.
func NewOn(t testing.TB, pool *pgxpool.Pool) *Env {
	t.Helper()
	return NewSealed(t, pool, Secret)
}

// NewSealed makes an Env on a migrated database whose PKI is sealed under secret, for tests
// whose API server (servertest) opens the same PKI under its own deployment secret.
func NewSealed(t testing.TB, pool *pgxpool.Pool, secret string) *Env {
	t.Helper()
	ctx := context.Background()
	root, err := auth.EnsureRootTenant(ctx, pool)
	if err != nil {
		t.Fatal(err)
	}
	b, err := pki.Init(ctx, pool, secret, TrustDomain)
	if err != nil {
		t.Fatal(err)
	}
	return &Env{T: t, Pool: pool, Bundle: b, Tenant: root.ID, Secret: secret}
}

// Gateway is a gateway serving on a loopback port until the test ends.
type Gateway struct {
	*gateway.Gateway
	// Addr is where it listens, "127.0.0.1:port".
	Addr string
	// ControlURL is its internal control API, "https://127.0.0.1:port".
	ControlURL string
	// WebSocketURL is its WebSocket listener (ws:// or wss://), when configure gave it one.
	WebSocketURL string
	// Stop stops it and waits (the test's cleanup does too; more calls do nothing).
	Stop func()
}

// StartGateway starts gateway id, with its internal control API, 1-second heartbeats and
// dispatch; configure, when not nil, adjusts its options first.
func (e *Env) StartGateway(id string, configure func(*gateway.Options)) *Gateway {
	e.T.Helper()
	certPEM, keyPEM, err := e.Bundle.IssueGateway("test", id, nil, []net.IP{net.ParseIP("127.0.0.1")})
	if err != nil {
		e.T.Fatal(err)
	}
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		e.T.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		e.T.Fatal(err)
	}
	control, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		e.T.Fatal(err)
	}
	sealer, err := secret.NewSealer(e.Secret)
	if err != nil {
		e.T.Fatal(err)
	}
	opts := gateway.Options{
		Pool: e.Pool, Authority: e.Bundle, ID: id, Region: "test", Certificate: cert, Secrets: sealer,
		HeartbeatInterval: time.Second, DispatchInterval: time.Second,
		ControlURL: "https://" + control.Addr().String(),
	}
	if configure != nil {
		configure(&opts)
	}
	g := gateway.New(opts)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() {
		if err := g.Serve(ctx, ln); err != nil {
			e.T.Errorf("gateway %s: %v", id, err)
		}
	})
	wg.Go(func() {
		if err := g.ServeControl(ctx, control, e.Bundle, "127.0.0.1"); err != nil {
			e.T.Errorf("gateway %s control API: %v", id, err)
		}
	})
	stop := sync.OnceFunc(func() { cancel(); wg.Wait() })
	e.T.Cleanup(stop)
	return &Gateway{Gateway: g, Addr: ln.Addr().String(), ControlURL: "https://" + control.Addr().String(), WebSocketURL: g.WebSocketURL(), Stop: stop}
}

// WebSocket configures a WebSocket listener on a loopback port, with the gateway's own
// certificate as its outer TLS when outerTLS (else plain HTTP, as behind a proxy that
// terminates TLS): pass it, or call it from, StartGateway's configure.
func WebSocket(t testing.TB, outerTLS bool) func(*gateway.Options) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ln.Close() })
	return func(o *gateway.Options) {
		o.WebSocket = &gateway.WebSocket{Listener: ln}
		if outerTLS {
			o.WebSocket.TLS = &tls.Config{MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{o.Certificate}}
		}
	}
}

// Token makes a join token of the root tenant with labels {"zone": "a"}.
func (e *Env) Token(maxUses int32, expires time.Time) string {
	e.T.Helper()
	k := auth.NewJoinToken()
	if _, err := db.New(e.Pool).CreateJoinToken(context.Background(), db.CreateJoinTokenParams{
		ID: k.ID, TenantID: e.Tenant, Labels: []byte(`{"zone":"a"}`), SecretHash: k.Hash(), MaxUses: maxUses, ExpiresAt: expires,
	}); err != nil {
		e.T.Fatal(err)
	}
	return k.String()
}
