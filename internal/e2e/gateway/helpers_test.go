// Package gateway_test runs the gateway with the API (and, for retirement, the node
// controllers) in front of it: what a node sees when an operator acts through the API.
package gateway_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"net/http"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/better-compute/better-compute/gateway"
	"github.com/better-compute/better-compute/gateway/gatewaytest"
	"github.com/better-compute/better-compute/gen/go/bettercompute/daemon/v1/daemonv1connect"
	"github.com/better-compute/better-compute/internal/daemon"
	"github.com/better-compute/better-compute/internal/dbtest"
	"github.com/better-compute/better-compute/internal/pki"
	"github.com/better-compute/better-compute/internal/poll"
)

func TestMain(m *testing.M) { dbtest.Main(m) }

var ctx = context.Background()

// env is a gatewaytest environment with the helpers these tests share.
type env struct {
	*gatewaytest.Env
	t      *testing.T
	pool   *pgxpool.Pool
	bundle *pki.Bundle
	tenant uuid.UUID
}

func newEnv(t *testing.T) *env {
	t.Helper()
	e := gatewaytest.New(t)
	return &env{Env: e, t: t, pool: e.Pool, bundle: e.Bundle, tenant: e.Tenant}
}

// runningGateway is a gateway serving on a loopback port.
type runningGateway struct {
	*gateway.Gateway
	addr string
	stop func()
}

func (e *env) startGateway(id string) *runningGateway {
	e.t.Helper()
	return e.startGatewayWith(id, time.Second)
}

// startGatewayWith starts a gateway whose dispatch loop runs every dispatch.
func (e *env) startGatewayWith(id string, dispatch time.Duration) *runningGateway {
	e.t.Helper()
	g := e.StartGateway(id, func(o *gateway.Options) { o.DispatchInterval = dispatch })
	return &runningGateway{Gateway: g.Gateway, addr: g.Addr, stop: g.Stop}
}

// token makes a join token with max uses and expiry.
func (e *env) token(maxUses int32, expires time.Time) string { return e.Token(maxUses, expires) }

// startFake joins through addr and runs the daemon until the test ends.
func (e *env) startFake(addr, token string) *daemon.Fake {
	e.t.Helper()
	f, err := daemon.JoinFake(ctx, e.bundle.RootPEM(), token, "host-"+uuid.NewString()[:8], daemon.FakeOptions{Dialer: daemon.Dialer{Gateway: addr}})
	if err != nil {
		e.t.Fatal(err)
	}
	fctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); _ = f.Run(fctx) }()
	e.t.Cleanup(func() { cancel(); <-done })
	poll.Until(e.t, 10*time.Second, "the daemon connects", func() bool { return f.Status().Connected })
	return f
}

// anonymous is a DaemonService client without a client certificate.
func anonymous(addr string, rootPEM []byte) daemonv1connect.DaemonServiceClient {
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(rootPEM)
	tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots}, Protocols: new(http.Protocols)}
	tr.Protocols.SetHTTP2(true)
	return connectClient(&http.Client{Transport: tr}, addr)
}

func connectClient(c *http.Client, addr string) daemonv1connect.DaemonServiceClient {
	return daemonv1connect.NewDaemonServiceClient(c, "https://"+addr, connect.WithGRPC())
}
