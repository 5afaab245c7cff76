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

	"github.com/better-compute/better-compute/gateway"
	daemonv1 "github.com/better-compute/better-compute/gen/go/bettercompute/daemon/v1"
	"github.com/better-compute/better-compute/gen/go/bettercompute/daemon/v1/daemonv1connect"
	nodesv1 "github.com/better-compute/better-compute/gen/go/bettercompute/nodes/v1"
	"github.com/better-compute/better-compute/gen/go/bettercompute/nodes/v1/nodesv1connect"
	"github.com/better-compute/better-compute/internal/daemon"
	"github.com/better-compute/better-compute/internal/poll"
	"github.com/better-compute/better-compute/server"
	"github.com/better-compute/better-compute/server/servertest"
	"github.com/better-compute/better-compute/workers"
	"github.com/better-compute/better-compute/workers/workerstest"
)

// TestRetireRevokesTheNodesIdentity drives a node through the API to retirement (drain, which
// the lifecycle reconciler completes, then retire): afterwards the gateway refuses the node's
// certificate renewal and secret fetches, and its session ends and does not come back.
func TestRetireRevokesTheNodesIdentity(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	notifier, err := gateway.NewNotifier(e.pool, e.bundle, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(notifier.Wait)
	api := servertest.Start(t, e.pool, func(o *server.Options) { o.Notifier = notifier })
	nodes := nodesv1connect.NewNodesServiceClient(api.HTTPClient(api.AdminKey), api.URL)
	workerstest.Run(t, workerstest.Options{
		Pool: e.pool, Roles: []string{workers.RoleControllers},
		Reconcilers: workerstest.NodeControl(e.pool, workerstest.NodeControlOptions{}),
	})

	gw := e.startGateway("gw1")
	id, err := daemon.Dialer{Gateway: gw.addr}.Join(ctx, e.bundle.RootPEM(), e.token(1, time.Now().Add(time.Hour)), "host-"+uuid.NewString()[:8])
	if err != nil {
		t.Fatal(err)
	}
	f, err := daemon.NewFake(id, daemon.FakeOptions{Dialer: daemon.Dialer{Gateway: gw.addr}})
	if err != nil {
		t.Fatal(err)
	}
	fctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); _ = f.Run(fctx) }()
	t.Cleanup(func() { cancel(); <-done })
	poll.Until(t, 10*time.Second, "the daemon connects", func() bool { return f.Status().Connected })

	renew := func() error {
		t.Helper()
		csr, err := daemon.NewCSR(id.Key, id.NodeID)
		if err != nil {
			t.Fatal(err)
		}
		_, err = nodeClient(t, gw.addr, id).Renew(ctx, &daemonv1.RenewRequest{Csr: csr})
		return err
	}
	if err := renew(); err != nil {
		t.Fatalf("renewal before retiring: %v", err)
	}

	if _, err := nodes.Drain(ctx, &nodesv1.DrainRequest{Id: id.NodeID}); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, 20*time.Second, "the node is drained", func() bool {
		n, err := nodes.Get(ctx, &nodesv1.GetRequest{Id: id.NodeID})
		return err == nil && n.GetNode().GetState() == "drained"
	})
	sessions := f.Status().Sessions
	r, err := nodes.Retire(ctx, &nodesv1.RetireRequest{Id: id.NodeID})
	if err != nil {
		t.Fatal(err)
	}
	if !r.GetNode().GetRevoked() {
		t.Errorf("retired node %v is not revoked", r.GetNode())
	}

	wantCode(t, renew(), connect.CodePermissionDenied)
	_, err = f.Secret(ctx, "anything")
	wantCode(t, err, connect.CodePermissionDenied)
	poll.Until(t, 10*time.Second, "the retired node's session ends", func() bool { return !f.Status().Connected })
	poll.Until(t, 10*time.Second, "the reconnect is refused", func() bool {
		return connect.CodeOf(f.Status().LastError) == connect.CodePermissionDenied
	})
	if f.Status().Sessions != sessions {
		t.Error("the retired node opened a new session")
	}
}

// nodeClient is a DaemonService client presenting the node's certificate, as its daemon does.
func nodeClient(t *testing.T, addr string, id *daemon.Identity) daemonv1connect.DaemonServiceClient {
	t.Helper()
	cert, err := id.Certificate()
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(id.RootPEM)
	tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots, Certificates: []tls.Certificate{cert}}, Protocols: new(http.Protocols)}
	tr.Protocols.SetHTTP2(true)
	t.Cleanup(tr.CloseIdleConnections)
	return connectClient(&http.Client{Transport: tr}, addr)
}
