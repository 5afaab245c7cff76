package cli_test

import (
	"context"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/better-compute/better-compute/gateway/gatewaytest"
	"github.com/better-compute/better-compute/internal/daemon"
	"github.com/better-compute/better-compute/internal/database"
	"github.com/better-compute/better-compute/internal/dbtest"
	"github.com/better-compute/better-compute/internal/poll"
)

// TestGatewayKilledTakesItsNodesOffline: liveness is not written per heartbeat, the gateway
// holding a session vouches for its node (docs/scaling.md, "Liveness"). A gateway process
// killed with SIGKILL, which cleans nothing up, still takes its nodes offline within the
// liveness threshold: its own heartbeat stops, and so does its vouch.
func TestGatewayKilledTakesItsNodesOffline(t *testing.T) {
	t.Parallel()
	url := dbtest.URL(t)
	pool, err := database.Open(t.Context(), url)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	e := gatewaytest.NewSealed(t, pool, gatewaytest.Secret)
	addr := freeAddr(t)
	env := append(os.Environ(), "BETTER_COMPUTE_RUN_MAIN=1", "BETTER_COMPUTE_DATABASE_URL="+url,
		"BETTER_COMPUTE_SECRET="+gatewaytest.Secret, "BETTER_COMPUTE_CONFIG=")
	// start runs serve with roles; its log is read back from a file, which the process writes
	// while the test reads.
	start := func(roles string, extra ...string) (*exec.Cmd, func() string) {
		cmd := exec.Command(os.Args[0], "serve", "--roles", roles, "--no-migrate")
		cmd.Env = append(append([]string(nil), env...), extra...)
		name := filepath.Join(t.TempDir(), "stderr")
		f, err := os.Create(name)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		cmd.Stderr = f
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
		return cmd, func() string { b, _ := os.ReadFile(name); return string(b) }
	}
	_, workersLog := start("controllers")
	gw, gwLog := start("gateway", "BETTER_COMPUTE_GATEWAY_LISTEN="+addr,
		"BETTER_COMPUTE_GATEWAY_CONTROL_LISTEN="+freeAddr(t), "BETTER_COMPUTE_METRICS_LISTEN=")
	poll.Until(t, 60*time.Second, "the gateway listens", func() bool {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			_ = c.Close()
		}
		return err == nil
	}, poll.Report(gwLog))

	const nodes = 3
	token := e.Token(nodes, time.Now().Add(time.Hour))
	for i := range nodes {
		f, err := daemon.JoinFake(t.Context(), e.Bundle.RootPEM(), token, "kill-"+strconv.Itoa(i), daemon.FakeOptions{Dialer: daemon.Dialer{Gateway: addr}})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { defer close(done); _ = f.Run(ctx) }()
		t.Cleanup(func() { cancel(); <-done })
	}
	count := func(q string) int {
		var n int
		if err := pool.QueryRow(context.Background(), q).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	poll.Until(t, 60*time.Second, "the nodes come online", func() bool {
		return count("SELECT count(*) FROM nodes WHERE online") == nodes
	}, poll.Every(100*time.Millisecond), poll.Report(func() string { return workersLog() + gwLog() }))
	if n := count("SELECT count(*) FROM node_liveness WHERE gateway_id IS NOT NULL"); n != nodes {
		t.Fatalf("%d nodes vouched for, want %d", n, nodes)
	}

	if err := gw.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	killed := time.Now()
	// The threshold (30 s by default), a liveness round (5 s), and slack for a loaded machine.
	poll.Until(t, 50*time.Second, "the killed gateway's nodes go offline", func() bool {
		return count("SELECT count(*) FROM nodes WHERE online") == 0
	}, poll.Every(100*time.Millisecond), poll.Report(workersLog))
	took := time.Since(killed)
	// Nothing cleaned up after the gateway: its vouches are still there, and expired with its
	// heartbeat.
	if n := count("SELECT count(*) FROM node_liveness WHERE gateway_id IS NOT NULL"); n != nodes {
		t.Errorf("%d vouches left, want %d: the killed gateway cleaned up after itself?", n, nodes)
	}
	if took < 15*time.Second {
		t.Errorf("offline %v after the kill: sooner than a gateway heartbeat and the threshold allow", took)
	}
	t.Logf("offline %v after the gateway was killed", took)
}

// freeAddr is a free loopback address for a subprocess to listen on.
func freeAddr(t *testing.T) string {
	t.Helper()
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(freePort(t)))
}
