package gateway_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/coder/websocket"
	"github.com/google/uuid"

	"github.com/better-compute/better-compute/gateway/gatewaytest"
	"github.com/better-compute/better-compute/internal/daemon"
	"github.com/better-compute/better-compute/internal/fleet"
	"github.com/better-compute/better-compute/internal/poll"
)

// sessionTransport is the transport the node's session is recorded with; "" without one.
func (e *env) sessionTransport(node string) string {
	e.t.Helper()
	var t string
	_ = e.pool.QueryRow(ctx, "SELECT transport FROM node_sessions WHERE node_id = $1", node).Scan(&t)
	return t
}

func TestWebSocketCarriesTheSession(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	gw := e.StartGateway("gw1", gatewaytest.WebSocket(t, true))
	f := e.startFakeVia(daemon.Dialer{Gateway: gw.Addr, Transport: daemon.TransportWebSocket, WebSocketURL: gw.WebSocketURL},
		e.token(1, time.Now().Add(time.Hour)))
	node := f.Status().NodeID
	if got := e.sessionTransport(node); got != string(fleet.TransportWebSocket) {
		t.Errorf("session recorded over %q, want websocket", got)
	}
	if got := f.Status().Transport; got != fleet.TransportWebSocket {
		t.Errorf("the daemon says it is over %q", got)
	}
	id := e.command(node, "echo", `{"data":{"over":"websocket"}}`, "k1")
	gw.Poke(uuid.MustParse(node))
	poll.Until(t, 5*time.Second, "the command succeeds", func() bool { s, _ := e.commandState(id); return s == "succeeded" })

	// A direct daemon beside it is recorded as such.
	direct := e.startFake(gw.Addr, e.token(1, time.Now().Add(time.Hour)))
	if got := e.sessionTransport(direct.Status().NodeID); got != string(fleet.TransportH2) {
		t.Errorf("direct session recorded over %q", got)
	}

	// Revocation ends the WebSocket session as it ends a direct one.
	sessions := f.Status().Sessions
	if _, err := e.pool.Exec(ctx, "UPDATE nodes SET revoked_at = now() WHERE id = $1", node); err != nil {
		t.Fatal(err)
	}
	took := poll.Until(t, 2*time.Second, "the revoked node's session ends", func() bool { return !f.Status().Connected })
	t.Logf("revocation ended the WebSocket session after %v", took)
	poll.Until(t, 10*time.Second, "a reconnect is refused", func() bool {
		return connect.CodeOf(f.Status().LastError) == connect.CodePermissionDenied
	})
	if s := f.Status().Sessions; s != sessions {
		t.Errorf("the revoked node opened %d more sessions", s-sessions)
	}
}

func TestWebSocketRefusesAnotherSubprotocolAndPath(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	gw := e.StartGateway("gw1", gatewaytest.WebSocket(t, false))
	base := strings.Replace(gw.WebSocketURL, "ws://", "http://", 1)
	res, err := http.Get(base) // no upgrade
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusBadRequest && res.StatusCode != http.StatusUpgradeRequired {
		t.Errorf("a plain GET answered %d", res.StatusCode)
	}
	res, err = http.Get(base + "x")
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusNotFound {
		t.Errorf("another path answered %d", res.StatusCode)
	}
	// A WebSocket upgrade of another subprotocol, or of none, is refused before it is answered.
	for _, protocols := range [][]string{{"chat"}, nil} {
		ws, res, err := websocket.Dial(ctx, gw.WebSocketURL, &websocket.DialOptions{Subprotocols: protocols})
		if res != nil && res.Body != nil {
			_ = res.Body.Close()
		}
		if err == nil {
			_ = ws.CloseNow()
			t.Errorf("subprotocols %q: upgraded (101), want 400", protocols)
		} else if res == nil || res.StatusCode != http.StatusBadRequest {
			t.Errorf("subprotocols %q: %v, want 400", protocols, err)
		}
	}
}

// TestAutoFallsBackAndComesBack: with TransportAuto, a direct endpoint that answers like an HTTP
// proxy (plain HTTP, no TLS) makes the daemon join and hold its session over the WebSocket;
// once the direct path works again, the daemon's next try finds it and reconnects over it.
func TestAutoFallsBackAndComesBack(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	gw := e.StartGateway("gw1", gatewaytest.WebSocket(t, false))
	proxyLike := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, "proxy: bad request", http.StatusBadRequest)
	}))
	t.Cleanup(proxyLike.Close)
	lb := newBalancer(t, proxyLike.Listener.Addr().String())
	choice := &daemon.Choice{RetryDirect: 300 * time.Millisecond}
	f := e.startFakeVia(daemon.Dialer{Gateway: lb.addr, Transport: daemon.TransportAuto, WebSocketURL: gw.WebSocketURL, Choice: choice},
		e.token(1, time.Now().Add(time.Hour)))
	node := f.Status().NodeID
	if got := e.sessionTransport(node); got != string(fleet.TransportWebSocket) {
		t.Fatalf("session recorded over %q, want the WebSocket fallback", got)
	}
	if got, _ := choice.Current(); got != fleet.TransportWebSocket {
		t.Errorf("choice %q after the fallback", got)
	}
	// The retries of the direct path keep failing while it answers as a proxy.
	sessions := f.Status().Sessions
	lb.target.Store(gw.Addr)
	poll.Until(t, 10*time.Second, "the daemon reconnects directly", func() bool {
		return e.sessionTransport(node) == string(fleet.TransportH2) && f.Status().Connected
	})
	if got := f.Status().Transport; got != fleet.TransportH2 {
		t.Errorf("the daemon says it is over %q", got)
	}
	if s := f.Status().Sessions; s != sessions+1 {
		t.Errorf("%d sessions opened to come back, want 1", s-sessions)
	}
}
