package nodecontrol_test

import (
	"context"
	"crypto/tls"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/better-compute/better-compute/gateway"
	daemonv1 "github.com/better-compute/better-compute/gen/go/bettercompute/daemon/v1"
	jointokensv1 "github.com/better-compute/better-compute/gen/go/bettercompute/jointokens/v1"
	"github.com/better-compute/better-compute/gen/go/bettercompute/jointokens/v1/jointokensv1connect"
	nodesv1 "github.com/better-compute/better-compute/gen/go/bettercompute/nodes/v1"
	cmdtype "github.com/better-compute/better-compute/internal/command"
	"github.com/better-compute/better-compute/internal/daemon"
	"github.com/better-compute/better-compute/internal/fleet"
	"github.com/better-compute/better-compute/internal/pki"
	"github.com/better-compute/better-compute/internal/poll"
	"github.com/better-compute/better-compute/workers/internal/nodecontrol"
)

// TestWithGatewayAndDaemon drives a real FakeDaemon through a real gateway: its hello records
// one inventory, heartbeats bring it online, a spec's config reaches its "configure" handler and
// is then observed, a drain reaches its "drain" handler, and when it stops it goes offline.
func TestWithGatewayAndDaemon(t *testing.T) {
	t.Parallel()
	f := newFleet(t)
	bundle, err := pki.Init(ctx, f.Pool, "nodes-test-secret-0123456789abcdef", "test.local")
	if err != nil {
		t.Fatal(err)
	}
	var offline sync.Map
	runWorkers(t, f.Pool, nodecontrol.Options{CommandPoll: 100 * time.Millisecond}, nodecontrol.LivenessJob(f.Pool, nodecontrol.LivenessOptions{
		Interval: 100 * time.Millisecond, Threshold: 3 * time.Second,
		OnOffline: func(_ context.Context, _ pgx.Tx, ids []uuid.UUID) error {
			for _, id := range ids {
				offline.Store(id, true)
			}
			return nil
		},
	}))

	// A gateway on loopback TLS.
	certPEM, keyPEM, err := bundle.IssueGateway("test", "gw1", nil, []net.IP{net.ParseIP("127.0.0.1")})
	if err != nil {
		t.Fatal(err)
	}
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gw := gateway.New(gateway.Options{
		Pool: f.Pool, Authority: bundle, ID: "gw1", Region: "test", Certificate: cert,
		HeartbeatInterval: time.Second, DispatchInterval: 100 * time.Millisecond,
	})
	gctx, stopGateway := context.WithCancel(ctx)
	var gwg sync.WaitGroup
	gwg.Go(func() {
		if err := gw.Serve(gctx, ln); err != nil {
			t.Errorf("gateway: %v", err)
		}
	})
	t.Cleanup(func() { stopGateway(); gwg.Wait() })

	// A FakeDaemon that handles "configure" and "drain".
	tok, err := jointokensv1connect.NewJoinTokensServiceClient(f.HTTPClient(f.AdminKey), f.URL).Create(ctx, &jointokensv1.CreateRequest{})
	if err != nil {
		t.Fatal(err)
	}
	configured := make(chan *daemonv1.ConfigurePayload, 10)
	var drained sync.WaitGroup
	drained.Add(1)
	drainOnce := sync.OnceFunc(drained.Done)
	fake, err := daemon.JoinFake(ctx, bundle.RootPEM(), tok.GetToken(), "host-a", daemon.FakeOptions{
		Dialer: daemon.Dialer{Gateway: ln.Addr().String()},
		Handlers: map[string]daemon.Handler{
			cmdtype.Configure: func(_ context.Context, c *daemonv1.Command) (*structpb.Struct, error) {
				configured <- c.GetConfigure()
				return &structpb.Struct{}, nil
			},
			cmdtype.Drain: func(context.Context, *daemonv1.Command) (*structpb.Struct, error) {
				drainOnce()
				return &structpb.Struct{}, nil
			},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	fctx, stopDaemon := context.WithCancel(ctx)
	fdone := make(chan struct{})
	go func() { defer close(fdone); _ = fake.Run(fctx) }()
	t.Cleanup(func() { stopDaemon(); <-fdone })
	id := uuid.MustParse(fake.Status().NodeID)

	poll.Until(t, 20*time.Second, "the node is online and schedulable", func() bool {
		n := node(t, f.Pool, id)
		return n.Online && n.State == "ready" && condition(t, n, fleet.ConditionSchedulable).Status == fleet.StatusTrue
	})
	if got := count(t, f.Pool, `SELECT count(*) FROM node_inventory_history WHERE node_id = $1 AND inventory->>'cpuModel' = 'Fake CPU'`, id); got != 1 {
		t.Errorf("%d inventory history rows after the first hello, want 1", got)
	}
	if got := events(t, f.Pool, "node.inventory.changed", id); got != 1 {
		t.Errorf("%d node.inventory.changed events, want 1", got)
	}

	config, _ := structpb.NewStruct(map[string]any{"logLevel": "debug"})
	res, err := f.nodes.UpdateSpec(ctx, &nodesv1.UpdateSpecRequest{Id: id.String(), Spec: &nodesv1.NodeSpec{
		DaemonVersion: daemon.FakeVersion, Config: config,
	}})
	if err != nil {
		t.Fatal(err)
	}
	select {
	case p := <-configured:
		if p.GetConfig().GetFields()["logLevel"].GetStringValue() != "debug" {
			t.Errorf("configure payload %v", p)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the daemon was not configured")
	}
	poll.Until(t, 10*time.Second, "the spec is observed", func() bool {
		n := node(t, f.Pool, id)
		return n.ObservedGeneration == res.GetNode().GetSpecGeneration() && condition(t, n, fleet.ConditionSpecApplied).Status == fleet.StatusTrue
	})

	if _, err := f.nodes.Drain(ctx, &nodesv1.DrainRequest{Id: id.String()}); err != nil {
		t.Fatal(err)
	}
	waitGroup(t, &drained, 20*time.Second, "the daemon runs the drain command")
	poll.Until(t, 10*time.Second, "the node is drained", func() bool { return node(t, f.Pool, id).State == "drained" })

	stopDaemon()
	<-fdone
	took := poll.Until(t, 20*time.Second, "the stopped daemon's node goes offline", func() bool {
		_, ok := offline.Load(id)
		return ok && !node(t, f.Pool, id).Online
	})
	t.Logf("offline %v after the daemon stopped (threshold 3s)", took)
}

func waitGroup(t *testing.T, wg *sync.WaitGroup, within time.Duration, what string) {
	t.Helper()
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(within):
		t.Fatalf("%s: not within %v", what, within)
	}
}
