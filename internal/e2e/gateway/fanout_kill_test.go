package gateway_test

import (
	"context"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/better-compute/better-compute/gateway"
	commandsv1 "github.com/better-compute/better-compute/gen/go/bettercompute/commands/v1"
	"github.com/better-compute/better-compute/gen/go/bettercompute/commands/v1/commandsv1connect"
	daemonv1 "github.com/better-compute/better-compute/gen/go/bettercompute/daemon/v1"
	jointokensv1 "github.com/better-compute/better-compute/gen/go/bettercompute/jointokens/v1"
	"github.com/better-compute/better-compute/gen/go/bettercompute/jointokens/v1/jointokensv1connect"
	"github.com/better-compute/better-compute/internal/config"
	"github.com/better-compute/better-compute/internal/daemon"
	"github.com/better-compute/better-compute/internal/guard"
	"github.com/better-compute/better-compute/internal/locks"
	"github.com/better-compute/better-compute/internal/poll"
	"github.com/better-compute/better-compute/internal/quota"
	"github.com/better-compute/better-compute/internal/sim"
	"github.com/better-compute/better-compute/server"
	"github.com/better-compute/better-compute/server/servertest"
	"github.com/better-compute/better-compute/workers/workerstest"
)

// TestFanOutSurvivesAGatewayKilled fans out to nodes on two gateways and kills one of them while
// the fan-out runs: its nodes reconnect to the other (through the L4 forwarder in front of them),
// the CommandSweeper re-queues what was sent and not acked, and every node's command runs
// exactly once, within max_in_flight, and the fan-out ends all succeeded.
func TestFanOutSurvivesAGatewayKilled(t *testing.T) {
	t.Parallel()
	const perGateway, inFlight = 15, 6
	e := newEnv(t)
	notifier, err := gateway.NewNotifier(e.pool, e.bundle, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(notifier.Wait)
	api := servertest.Start(t, e.pool, func(o *server.Options) {
		o.Notifier = notifier
		o.RateLimits = guard.RateLimits{Tenant: quota.Limits{CommandsPerMinute: 1 << 30}}
	})
	client := api.HTTPClient(api.AdminKey)
	tok, err := jointokensv1connect.NewJoinTokensServiceClient(client, api.URL).Create(ctx, &jointokensv1.CreateRequest{
		Labels: map[string]string{"fleet": "fan"}, MaxUses: 2 * perGateway,
	})
	if err != nil {
		t.Fatal(err)
	}
	workerstest.Run(t, workerstest.Options{Pool: e.pool, Roles: []string{config.RoleControllers}, Jobs: map[string][]locks.Job{
		config.RoleControllers: {workerstest.CommandSweeper(e.pool, workerstest.CommandSweeperOptions{Interval: 200 * time.Millisecond, AckTimeout: 2 * time.Second})},
	}})
	gwA := e.StartGateway("gw-a", func(o *gateway.Options) { o.DispatchInterval = 500 * time.Millisecond })
	gwB := e.StartGateway("gw-b", func(o *gateway.Options) { o.DispatchInterval = 500 * time.Millisecond })
	fwd := newForwarder(t, gwB.Addr)
	s := &fanOutSystem{commands: commandsv1connect.NewCommandsServiceClient(client, api.URL), runs: map[string]int{}, work: 100 * time.Millisecond}
	for _, side := range []struct{ prefix, addr string }{{"a", gwA.Addr}, {"b", fwd.addr()}} {
		fleet, err := sim.New(sim.Options{
			Gateway: side.addr, RootPEM: e.bundle.RootPEM(), Token: tok.GetToken(), N: perGateway, Seed: 41, Prefix: side.prefix,
			Handlers: map[string]daemon.Handler{"echo": s.echo},
		})
		if err != nil {
			t.Fatal(err)
		}
		fctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { defer close(done); _ = fleet.Run(fctx) }()
		t.Cleanup(func() { cancel(); <-done })
		if st, err := fleet.WaitConnected(fctx); err != nil || st.Joined() != perGateway {
			t.Fatalf("fleet %s: %+v, %v (%v)", side.prefix, st, err, fleet.JoinErrors())
		}
	}

	res, err := s.commands.FanOut(ctx, &commandsv1.FanOutRequest{
		Selector: &commandsv1.FanOutSelector{Labels: map[string]string{"fleet": "fan"}}, MaxInFlight: inFlight,
		Payload: &commandsv1.FanOutRequest_Echo{Echo: &daemonv1.EchoPayload{}},
	})
	if err != nil || res.GetFanOut().GetTotal() != 2*perGateway {
		t.Fatalf("fan-out: %v, %v", res, err)
	}
	id := res.GetFanOut().GetId()
	var before *commandsv1.GetFanOutResponse
	poll.Until(t, 30*time.Second, "a third of the fan-out succeeds", func() bool {
		before, err = s.commands.GetFanOut(ctx, &commandsv1.GetFanOutRequest{Id: id})
		return err == nil && before.GetCounts().GetSucceeded() >= 2*perGateway/3
	})
	if before.GetDone() {
		t.Fatalf("the fan-out ended before the kill (%v): make the echo slower", before.GetCounts())
	}
	// gw-b dies; its machines find gw-a behind the same address.
	fwd.switchTo(gwA.Addr)
	gwB.Stop()
	var sum *commandsv1.GetFanOutResponse
	poll.Until(t, 60*time.Second, "the fan-out is done", func() bool {
		sum, err = s.commands.GetFanOut(ctx, &commandsv1.GetFanOutRequest{Id: id})
		return err == nil && sum.GetDone()
	})
	if want := (&commandsv1.FanOutCounts{Succeeded: 2 * perGateway}); !proto.Equal(sum.GetCounts(), want) {
		t.Errorf("summary %v, want %v", sum.GetCounts(), want)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.runs) != 2*perGateway {
		t.Errorf("%d commands ran, want %d", len(s.runs), 2*perGateway)
	}
	for cmd, k := range s.runs {
		if k != 1 {
			t.Errorf("command %s ran %d times", cmd, k)
		}
	}
	if p := s.peak.Load(); p > inFlight {
		t.Errorf("%d commands ran at once, want at most %d", p, inFlight)
	}
}

// forwarder is an L4 forwarder on loopback, like a balancer in front of gateways: it forwards
// each connection to its current target; switchTo changes the target and drops every
// connection, as a balancer does when its backend dies.
type forwarder struct {
	ln     net.Listener
	target atomic.Value // string
	mu     sync.Mutex
	conns  []net.Conn
}

func newForwarder(t *testing.T, target string) *forwarder {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f := &forwarder{ln: ln}
	f.target.Store(target)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go f.serve(c)
		}
	}()
	t.Cleanup(func() { _ = ln.Close(); f.closeAll() })
	return f
}

func (f *forwarder) addr() string { return f.ln.Addr().String() }

func (f *forwarder) serve(c net.Conn) {
	u, err := net.Dial("tcp", f.target.Load().(string))
	if err != nil {
		_ = c.Close()
		return
	}
	f.mu.Lock()
	f.conns = append(f.conns, c, u)
	f.mu.Unlock()
	go func() { _, _ = io.Copy(u, c); _ = u.Close() }()
	_, _ = io.Copy(c, u)
	_ = c.Close()
}

func (f *forwarder) switchTo(target string) {
	f.target.Store(target)
	f.closeAll()
}

func (f *forwarder) closeAll() {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, c := range f.conns {
		_ = c.Close()
	}
	f.conns = nil
}
