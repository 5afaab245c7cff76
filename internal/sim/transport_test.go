package sim_test

import (
	"net"
	"testing"
	"time"

	"github.com/better-compute/better-compute/gateway/gatewaytest"
	"github.com/better-compute/better-compute/internal/daemon"
	"github.com/better-compute/better-compute/internal/fleet"
	"github.com/better-compute/better-compute/internal/sim"
)

// TestFleetOverWebSocket: machines of the websocket transport hold their sessions through the
// gateway's WebSocket listener (outer TLS trusted through the fleet's root), and those of auto
// fall back to it when the direct address refuses them; the sessions record it.
func TestFleetOverWebSocket(t *testing.T) {
	t.Parallel()
	e := gatewaytest.New(t)
	gw := e.StartGateway("gw1", gatewaytest.WebSocket(t, true))
	refused := closedPort(t)
	for _, tc := range []struct {
		transport daemon.Transport
		gateway   string
	}{{daemon.TransportWebSocket, gw.Addr}, {daemon.TransportAuto, refused}} {
		f := runFleet(t, sim.Options{
			Gateway: tc.gateway, RootPEM: e.Bundle.RootPEM(), Token: e.Token(2, time.Now().Add(time.Hour)),
			N: 2, Prefix: string(tc.transport), Transport: tc.transport, WebSocketURL: gw.WebSocketURL,
		})
		if s := waitConnected(t, f); s.Connected != 2 {
			t.Fatalf("%s: stats %+v", tc.transport, s)
		}
		for i := range 2 {
			var via string
			if err := e.Pool.QueryRow(ctx, "SELECT transport FROM node_sessions WHERE node_id = $1", f.Machine(i).NodeID).Scan(&via); err != nil {
				t.Fatal(err)
			}
			if via != string(fleet.TransportWebSocket) {
				t.Errorf("%s machine %d: session transport %q, want websocket", tc.transport, i, via)
			}
		}
	}
	if _, err := sim.New(sim.Options{Gateway: gw.Addr, RootPEM: e.Bundle.RootPEM(), N: 1, Transport: "quic"}); err == nil {
		t.Error("sim.New accepted transport quic")
	}
}

// closedPort is a loopback address nothing listens on: connections to it are refused.
func closedPort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	if err := ln.Close(); err != nil {
		t.Fatal(err)
	}
	return addr
}
