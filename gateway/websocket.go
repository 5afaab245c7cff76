package gateway

import (
	"context"
	"crypto/tls"
	"log/slog"
	"net"
	"net/http"

	"github.com/better-compute/better-compute/internal/fleet"
	"github.com/better-compute/better-compute/internal/wsnet"
)

// WebSocket configures the gateway's WebSocket listener, the daemons' way in through HTTP
// proxies (gateway.websocket). Each WebSocket carries a daemon's own TLS session to the same
// HTTP/2 server as the direct listener, so identity (the node certificate), revocation,
// dispatch and tunnels are those of a direct connection; only the outer layer differs.
type WebSocket struct {
	// Listener accepts the listener's TCP connections (gateway.websocket.listen).
	Listener net.Listener
	// Path is where upgrades are accepted; wsnet.DefaultPath when empty.
	Path string
	// TLS, when set, is the outer TLS; nil serves plain HTTP, for a load balancer or reverse
	// proxy that terminates TLS in front of the listener.
	TLS *tls.Config
}

// WebSocketURL is where the WebSocket listener accepts daemons, with the listener's own address
// (ws:// when plain, else wss://); "" without one.
func (g *Gateway) WebSocketURL() string {
	o := g.opts.WebSocket
	if o == nil {
		return ""
	}
	scheme, path := "wss://", o.Path
	if o.TLS == nil {
		scheme = "ws://"
	}
	if path == "" {
		path = wsnet.DefaultPath
	}
	return scheme + o.Listener.Addr().String() + path
}

// transportKey holds a connection's fleet.Transport in its requests' contexts.
type transportKey struct{}

// connTransport is the http.Server's ConnContext: it tells each connection's requests whether
// the connection came over a WebSocket.
func connTransport(ctx context.Context, c net.Conn) context.Context {
	t := fleet.TransportH2
	if wsnet.Over(c) {
		t = fleet.TransportWebSocket
	}
	return context.WithValue(ctx, transportKey{}, t)
}

// transportOf is the transport of the connection a request came over.
func transportOf(ctx context.Context) fleet.Transport {
	if t, ok := ctx.Value(transportKey{}).(fleet.Transport); ok {
		return t
	}
	return fleet.TransportH2
}

// webSocketServer is the outer HTTP/1.1 server of the WebSocket listener: it upgrades at the
// path and hands the connections to ws, which the daemons' HTTP/2 server serves.
func (g *Gateway) webSocketServer(o *WebSocket, ws *wsnet.Listener) *http.Server {
	path := o.Path
	if path == "" {
		path = wsnet.DefaultPath
	}
	mux := http.NewServeMux()
	mux.Handle("GET "+path, ws)
	srv := &http.Server{
		Handler:           mux,
		ReadHeaderTimeout: g.opts.Limits.ReadHeaderTimeout,
		IdleTimeout:       g.opts.Limits.IdleTimeout,
		MaxHeaderBytes:    g.opts.Limits.HeaderBytes,
		ErrorLog:          slog.NewLogLogger(g.log.Handler(), slog.LevelDebug),
	}
	if o.TLS != nil {
		srv.TLSConfig = o.TLS.Clone()
		// The upgrade is HTTP/1.1; offering h2 here would invite clients to an HTTP/2 that
		// cannot carry it.
		srv.TLSConfig.NextProtos = []string{"http/1.1"}
	}
	return srv
}

// serveWebSocket serves the outer server on its listener until it is shut down.
func serveWebSocket(srv *http.Server, ln net.Listener) error {
	if srv.TLSConfig != nil {
		return srv.ServeTLS(ln, "", "")
	}
	return srv.Serve(ln)
}
