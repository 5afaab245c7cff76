package gateway_test

import (
	"bytes"
	"context"
	"io"
	"os"
	"os/exec"
	"strconv"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/structpb"

	"github.com/better-compute/better-compute/gateway/gatewaytest"
	daemonv1 "github.com/better-compute/better-compute/gen/go/bettercompute/daemon/v1"
	"github.com/better-compute/better-compute/internal/daemon"
	"github.com/better-compute/better-compute/internal/poll"
	"github.com/better-compute/better-compute/internal/sim"
)

// The child fleet's settings, from startChildFleet to TestFanOutFleetChild.
const (
	childFleetAddr  = "BC_FANOUT_FLEET_ADDR"
	childFleetRoot  = "BC_FANOUT_FLEET_ROOT_CA"
	childFleetToken = "BC_FANOUT_FLEET_TOKEN"
	childFleetN     = "BC_FANOUT_FLEET_N"
)

// startChildFleet runs n simulated machines with an echo handler in a child process (this test
// binary again, TestFanOutFleetChild), joined to gw with token, until the test ends; it returns
// once every one holds a session, with the nodes' ids. The fleet's output is logged if the test
// fails.
func startChildFleet(tb testing.TB, e *env, gw *gatewaytest.Gateway, token string, n int) []string {
	tb.Helper()
	root := tb.TempDir() + "/root.pem"
	if err := os.WriteFile(root, e.bundle.RootPEM(), 0o600); err != nil {
		tb.Fatal(err)
	}
	cctx, stop := context.WithCancel(context.Background())
	child := exec.CommandContext(cctx, os.Args[0], "-test.run=^TestFanOutFleetChild$", "-test.v")
	child.Env = append(os.Environ(), childFleetAddr+"="+gw.Addr, childFleetRoot+"="+root,
		childFleetToken+"="+token, childFleetN+"="+strconv.Itoa(n))
	var out bytes.Buffer
	var w io.Writer = &out
	if os.Getenv("BENCH_FANOUT_TIMELINE") != "" {
		w = io.MultiWriter(&out, os.Stderr) // the child's join progress, as it comes
	}
	child.Stdout, child.Stderr = w, w // one writer for both: exec calls it from one goroutine at a time
	if err := child.Start(); err != nil {
		tb.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { _ = child.Wait(); close(exited) }()
	tb.Cleanup(func() {
		stop()
		<-exited
		if tb.Failed() {
			tb.Log(out.String()) // the child has exited: nothing writes to out any more
		}
	})
	poll.Until(tb, 20*time.Minute, "the child's machines hold their sessions", func() bool {
		select {
		case <-exited:
			tb.Fatal("the child fleet exited")
		default:
		}
		return gw.Sessions() >= n
	}, poll.Every(100*time.Millisecond))
	rows, err := e.pool.Query(ctx, `SELECT id::text FROM nodes ORDER BY id`)
	if err != nil {
		tb.Fatal(err)
	}
	defer rows.Close()
	var nodes []string
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			tb.Fatal(err)
		}
		nodes = append(nodes, id)
	}
	return nodes
}

// TestFanOutFleetChild is startChildFleet's child: BC_FANOUT_FLEET_N simulated machines that
// answer echo, joined through BC_FANOUT_FLEET_ADDR, run until the process is killed.
//
//nolint:paralleltest // a child process of BenchmarkFanOut
func TestFanOutFleetChild(t *testing.T) {
	addr := os.Getenv(childFleetAddr)
	if addr == "" {
		t.Skip("run by startChildFleet")
	}
	n, err := strconv.Atoi(os.Getenv(childFleetN))
	if err != nil {
		t.Fatal(err)
	}
	rootPEM, err := os.ReadFile(os.Getenv(childFleetRoot))
	if err != nil {
		t.Fatal(err)
	}
	echo := func(_ context.Context, c *daemonv1.Command) (*structpb.Struct, error) {
		return c.GetEcho().GetData(), nil
	}
	fleet, err := sim.New(sim.Options{
		Gateway: addr, RootPEM: rootPEM, Token: os.Getenv(childFleetToken), N: n, Seed: 37,
		Handlers: map[string]daemon.Handler{"echo": echo},
	})
	if err != nil {
		t.Fatal(err)
	}
	if os.Getenv("BENCH_FANOUT_TIMELINE") != "" {
		go reportJoins(ctx, fleet)
	}
	if err := fleet.Run(ctx); err != nil {
		t.Fatal(err)
	}
}
