package main_test

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/better-compute/better-compute/client"
	"github.com/better-compute/better-compute/client/tunnel"
	"github.com/better-compute/better-compute/gateway/gatewaytest"
	jointokensv1 "github.com/better-compute/better-compute/gen/go/bettercompute/jointokens/v1"
	nodesv1 "github.com/better-compute/better-compute/gen/go/bettercompute/nodes/v1"
	"github.com/better-compute/better-compute/internal/daemon/state"
	"github.com/better-compute/better-compute/internal/poll"
	"github.com/better-compute/better-compute/internal/tunnelhop"
	"github.com/better-compute/better-compute/internal/tunnelhop/tunneltest"
	"github.com/better-compute/better-compute/server"
	"github.com/better-compute/better-compute/server/servertest"
)

// TestTunnelEndToEnd runs tunnels through the real bcd binary, joined to the real gateway, from
// the Go SDK through the real API: 1 GiB (16 MiB under the race detector, with bcd built with it
// too) goes to an echo port on the machine and comes back with the SHA-256 it was sent with, and
// the port's last bytes after the client's half-close arrive; a port the node's spec allows but
// bcd's --tunnel-port list does not is refused with 4003 and never dialled, and a port where
// nothing listens ends with 4005. (internal/e2e/tunnels runs the refusals, lifetimes and load with a
// FakeDaemon, which shares bcd's tunnel code.)
func TestTunnelEndToEnd(t *testing.T) {
	t.Parallel()
	bcd := buildBcd(t, "tunnel-e2e")[0]
	size := int64(1 << 30)
	if raceEnabled {
		size = 16 << 20
	}

	env := gatewaytest.New(t)
	dialer, err := tunnelhop.NewDialer(env.Bundle)
	if err != nil {
		t.Fatal(err)
	}
	api := servertest.Start(t, env.Pool, func(o *server.Options) { o.Tunnels = server.TunnelOptions{Dialer: dialer} })
	c := client.New(api.URL, client.WithAPIKey(api.AdminKey))
	gw := startGateway(t, env, "127.0.0.1:0")

	work := t.TempDir()
	caFile := filepath.Join(work, "root-ca.pem")
	if err := os.WriteFile(caFile, env.Bundle.RootPEM(), 0o644); err != nil {
		t.Fatal(err)
	}
	stateDir := filepath.Join(work, "state")
	tok, err := c.JoinTokens.Create(ctx, &jointokensv1.CreateRequest{})
	if err != nil {
		t.Fatal(err)
	}
	runBcd(t, bcd, 0, "join", "--state-dir", stateDir, "--token", tok.GetToken(), "--gateway", gw.addr, "--ca-file", caFile)
	dir, _ := state.New(stateDir)
	joined, err := dir.ReadNode()
	if err != nil {
		t.Fatal(err)
	}
	nodeID := joined.NodeID

	// The machine's ports: an echo bcd allows, one only the spec allows, and one where nothing
	// listens.
	allowed := tunneltest.EchoPort(t, farewell)
	refused, refusedAccepted := refusedPort(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	d := startBcd(t, bcd, work, "run", "--state-dir", stateDir, "--max-backoff", "1s",
		"--tunnel-port", fmt.Sprintf("%d,%d", allowed, closed))
	poll.Until(t, 15*time.Second, "bcd connects", func() bool {
		res, err := c.Nodes.Get(ctx, &nodesv1.GetRequest{Id: nodeID})
		return err == nil && res.GetNode().GetConnected()
	}, poll.Every(25*time.Millisecond), d.logReport())
	if _, err := c.Nodes.UpdateSpec(ctx, &nodesv1.UpdateSpecRequest{Id: nodeID, Spec: &nodesv1.NodeSpec{
		TunnelPorts: []int32{int32(allowed), int32(refused), int32(closed)},
	}}); err != nil {
		t.Fatal(err)
	}

	conn, err := c.Tunnel(ctx, nodeID, allowed)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	start := time.Now()
	sent, echoed, trailer, err := echoTransfer(conn, size)
	took := time.Since(start)
	if err != nil || echoed != sent || trailer != farewell {
		t.Fatalf("%d MiB each way: sent SHA-256 %s, echoed %s, then %q (%v)", size>>20, sent, echoed, trailer, err)
	}
	t.Logf("%d MiB each way through bcd in %v: %.0f MiB/s each way", size>>20, took.Round(time.Millisecond), float64(size)/(1<<20)/took.Seconds())
	if err := conn.Close(); err != nil {
		t.Errorf("close after both sides closed: %v", err)
	}

	for _, tc := range []struct {
		what string
		port int
		code tunnel.Code
	}{
		{"a port bcd does not allow", refused, tunnel.CodePortRefused},
		{"a port where nothing listens", closed, tunnel.CodeDialFailed},
	} {
		conn, err := c.Tunnel(ctx, nodeID, tc.port)
		if err != nil {
			t.Fatalf("%s: %v", tc.what, err)
		}
		_, err = conn.Read(make([]byte, 1))
		var ae *client.TunnelAbortError
		if !errors.As(err, &ae) || ae.Code != tc.code {
			t.Errorf("%s: %v, want close code %d", tc.what, err, tc.code)
		}
		_ = conn.Close()
	}
	if n := refusedAccepted.Load(); n != 0 {
		t.Errorf("the port bcd does not allow accepted %d connections", n)
	}
}

// refusedPort listens on a loopback port until the test ends and counts the connections it
// accepts, for a port no tunnel may reach.
func refusedPort(t *testing.T) (int, *atomic.Int64) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	var accepted atomic.Int64
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			accepted.Add(1)
			c.Close()
		}
	}()
	return ln.Addr().(*net.TCPAddr).Port, &accepted
}

// farewell is what the echo port writes after the client's half-close.
const farewell = "the port's last bytes"

// echoTransfer sends n bytes of a PRNG stream to an echo port and half-closes, reading the echo
// meanwhile; it returns the SHA-256 (hex) of what it sent and of what came back, and the bytes
// after the echo.
func echoTransfer(conn *client.TunnelConn, n int64) (sent, echoed, trailer string, err error) {
	var werr error
	var wg sync.WaitGroup
	wg.Go(func() {
		h := sha256.New()
		src := io.LimitReader(rand.NewChaCha8([32]byte{1}), n)
		if _, werr = io.CopyBuffer(io.MultiWriter(conn, h), src, make([]byte, tunnel.MaxPayload)); werr == nil {
			werr = conn.CloseWrite()
		}
		sent = hex.EncodeToString(h.Sum(nil))
	})
	h := sha256.New()
	_, err = io.CopyBuffer(h, io.LimitReader(conn, n), make([]byte, tunnel.MaxPayload))
	echoed = hex.EncodeToString(h.Sum(nil))
	if err == nil {
		var b []byte
		b, err = io.ReadAll(io.LimitReader(conn, 1024))
		trailer = strings.TrimSpace(string(b))
	}
	wg.Wait()
	return sent, echoed, trailer, errors.Join(err, werr)
}
