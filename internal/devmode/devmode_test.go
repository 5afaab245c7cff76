package devmode_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"time"

	nodesv1 "github.com/better-compute/better-compute/gen/go/bettercompute/nodes/v1"
	"github.com/better-compute/better-compute/gen/go/bettercompute/nodes/v1/nodesv1connect"
	"github.com/better-compute/better-compute/internal/config"
	"github.com/better-compute/better-compute/internal/daemon"
	"github.com/better-compute/better-compute/internal/dbtest"
	"github.com/better-compute/better-compute/internal/devmode"
	"github.com/better-compute/better-compute/internal/fleet"
	provisionmod "github.com/better-compute/better-compute/internal/modules/provision"
	"github.com/better-compute/better-compute/internal/moduleset"
	"github.com/better-compute/better-compute/internal/sim"
)

func TestMain(m *testing.M) { dbtest.Main(m) }

// startDev runs dev on a fresh database with two simulated machines of transport t until the
// test ends, and returns the lines it printed up to "Simulated machines: 2 joined".
func startDev(t *testing.T, tr daemon.Transport) map[string]string {
	t.Helper()
	cfg := config.Default()
	cfg.Host, cfg.Port, cfg.Secret = "127.0.0.1", 0, strings.Repeat("ab", 32)
	cfg.Database.URL = dbtest.URL(t)
	ctx, cancel := context.WithCancel(context.Background())
	pr, pw := io.Pipe()
	done := make(chan error, 1)
	go func() {
		done <- devmode.Run(ctx, devmode.Options{
			Config: cfg, ClusterDir: filepath.Join(t.TempDir(), "postgres"), Sim: 2, SimTransport: tr,
			Out: pw, Logger: slog.New(slog.DiscardHandler),
		})
		pw.Close()
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("dev: %v", err)
		}
	})
	deadline := time.AfterFunc(time.Minute, func() { pw.CloseWithError(fmt.Errorf("dev did not start in a minute")) })
	defer deadline.Stop()
	printed := map[string]string{}
	for lines := bufio.NewScanner(pr); lines.Scan(); {
		line := lines.Text()
		if k, v, ok := strings.Cut(line, ": "); ok {
			printed[k] = v
		}
		switch {
		case line == "Simulated machines: 2 joined":
			go func() { _, _ = io.Copy(io.Discard, pr) }()
			return printed
		case strings.HasPrefix(line, "Simulated machines: "):
			t.Fatal(line)
		}
	}
	t.Fatalf("dev ended before its machines joined")
	return nil
}

// connectedVia lists the simulated nodes and checks that both are connected by transport want.
func connectedVia(t *testing.T, printed map[string]string, want fleet.Transport) {
	t.Helper()
	client := nodesv1connect.NewNodesServiceClient(sim.APIClient(printed["API key"]), printed["API"])
	res, err := client.List(t.Context(), &nodesv1.ListRequest{LabelSelector: map[string]string{"simulated": "true"}})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.GetNodes()) != 2 {
		t.Fatalf("%d simulated nodes, want 2", len(res.GetNodes()))
	}
	for _, n := range res.GetNodes() {
		got, err := client.Get(t.Context(), &nodesv1.GetRequest{Id: n.GetId()})
		if err != nil {
			t.Fatal(err)
		}
		if !got.GetNode().GetConnected() || got.GetNode().GetTransport() != string(want) {
			t.Errorf("node %s: connected %v, transport %q; want connected by %q", n.GetHostname(), got.GetNode().GetConnected(), got.GetNode().GetTransport(), want)
		}
	}
}

// TestSimOverWebSocket: with --sim-transport websocket, dev opens the gateway's WebSocket
// listener on loopback, prints it, and the simulated machines hold their sessions through it.
func TestSimOverWebSocket(t *testing.T) {
	t.Parallel()
	printed := startDev(t, daemon.TransportWebSocket)
	if u := printed["Gateway WebSocket"]; !strings.HasPrefix(u, "wss://127.0.0.1:") {
		t.Fatalf("Gateway WebSocket: %q, want wss://127.0.0.1:<port>/...", u)
	}
	connectedVia(t, printed, fleet.TransportWebSocket)
}

// TestSimAutoStaysDirect: with --sim-transport auto the WebSocket listener is open, but the
// direct path works, so the machines keep to it; with the default h2 there is no listener.
func TestSimAutoStaysDirect(t *testing.T) {
	t.Parallel()
	for _, tr := range []daemon.Transport{daemon.TransportAuto, daemon.TransportH2} {
		t.Run(string(tr), func(t *testing.T) {
			t.Parallel()
			printed := startDev(t, tr)
			if _, open := printed["Gateway WebSocket"]; open != (tr == daemon.TransportAuto) {
				t.Errorf("Gateway WebSocket printed %v with transport %s", open, tr)
			}
			connectedVia(t, printed, fleet.TransportH2)
		})
	}
}

// TestRefusesAnUnknownTransport: dev checks --sim-transport before it starts anything.
func TestRefusesAnUnknownTransport(t *testing.T) {
	t.Parallel()
	err := devmode.Run(t.Context(), devmode.Options{Config: config.Default(), Sim: 1, SimTransport: "quic", Out: io.Discard, Logger: slog.New(slog.DiscardHandler)})
	if err == nil || !strings.Contains(err.Error(), "--sim-transport") {
		t.Fatalf("err = %v", err)
	}
}

// TestRefusesTwoProvisionModules: --sim-provider-delay enables provision itself, so a
// configuration that enables it too is refused before anything starts (an empty database URL
// would otherwise start the private cluster).
func TestRefusesTwoProvisionModules(t *testing.T) {
	t.Parallel()
	configured := provisionmod.New(provisionmod.Providers{})
	err := devmode.Run(t.Context(), devmode.Options{
		Config: config.Default(), SimProviderDelay: time.Second, Modules: moduleset.Set{configured},
		ClusterDir: t.TempDir(), Out: io.Discard, Logger: slog.New(slog.DiscardHandler),
	})
	if err == nil || !strings.Contains(err.Error(), "--sim-provider-delay") {
		t.Fatalf("err = %v, want the refusal naming --sim-provider-delay", err)
	}
}
