// Package gateway is the gateway role: it terminates the daemons' mutual-TLS HTTP/2
// connections and serves DaemonService. It holds one Session stream per connected node, writes
// liveness in batches, delivers pending commands (from a 1-second loop, or at once when the API
// pokes it through the internal control API), records acks, results and events, and ends the
// sessions of revoked or superseded nodes. It relays tunnels between the API and the daemons
// (tunnel.go).
//
// PostgreSQL is the only source of truth: a gateway keeps nothing that another gateway could not
// rebuild from the database when a node reconnects there.
package gateway

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"connectrpc.com/connect"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/better-compute/better-compute/client/tunnel"
	"github.com/better-compute/better-compute/gen/db"
	"github.com/better-compute/better-compute/gen/go/bettercompute/daemon/v1/daemonv1connect"
	"github.com/better-compute/better-compute/internal/limit"
	"github.com/better-compute/better-compute/internal/metrics"
	"github.com/better-compute/better-compute/internal/secret"
	"github.com/better-compute/better-compute/internal/tunnelhop"
	"github.com/better-compute/better-compute/internal/wsnet"
)

// Authority is what the gateway needs of the machine PKI (*pki.Bundle provides it).
type Authority interface {
	TrustDomain() string
	// IssueNode signs a node certificate for a CSR, chained to the node CA.
	IssueNode(csrDER []byte, nodeID string, ttl time.Duration) (chainPEM []byte, notAfter time.Time, err error)
	// IssueNodeChecked is IssueNode for a CSR already parsed and its signature checked.
	IssueNodeChecked(csr *x509.CertificateRequest, nodeID string, ttl time.Duration) (chainPEM []byte, notAfter time.Time, err error)
	// RootPEM is the root CA daemons verify gateways with.
	RootPEM() []byte
	// NodeCAPoolUntil holds every node CA currently accepted, and when that set next changes
	// (zero when it will not).
	NodeCAPoolUntil() (*x509.CertPool, time.Time)
}

// Options configure a gateway.
type Options struct {
	Pool      *pgxpool.Pool
	Authority Authority
	// ID names this gateway process; Region is where it runs.
	ID, Region string
	// Certificate is the gateway's serving certificate, chained to the PKI root.
	Certificate tls.Certificate
	// ControlURL is where this gateway's internal control API answers, recorded so the API can
	// poke it; empty when it has none.
	ControlURL string
	// HeartbeatInterval is how often daemons send heartbeats (10s by default).
	HeartbeatInterval time.Duration
	// DispatchInterval is the period of the dispatch loop (1s by default).
	DispatchInterval time.Duration
	// CertTTL is the lifetime of node certificates (24h by default).
	CertTTL time.Duration
	// Secrets opens the node secrets the Secret call hands out: secret.NewSealer of the
	// deployment secret, the same the API seals them with. Without it, Secret is unavailable.
	Secrets *secret.Sealer
	Logger  *slog.Logger
	// Metrics, when set, receives the gateway's sessions and dispatch latency.
	Metrics *metrics.Registry
	// Limits bound requests, connections and session messages; zero fields take defaults.
	Limits Limits
	// TenantNodes caps each tenant's live nodes, checked at join (config
	// rateLimits.tenant.nodes); quota.DefaultNodes when zero.
	TenantNodes int
	// TunnelOpenTimeout bounds the wait for a daemon's stream after a TunnelOpen
	// (tunnelhop.OpenTimeout when zero; tests shorten it).
	TunnelOpenTimeout time.Duration
	// Wake, when set, wakes the workers of a kind in every process (a reconcile.Waker's Wake):
	// the gateway wakes fleet.KindLiveness at each session's hello, so the node is online as
	// its session starts.
	Wake func(kind string)
	// WebSocket, when set, also serves daemons over WebSockets (websocket.go).
	WebSocket *WebSocket
}

// Gateway serves daemons.
type Gateway struct {
	opts    Options
	log     *slog.Logger
	metrics *metrics.Gateway // nil when not measured

	mu       sync.Mutex
	sessions map[uuid.UUID]*session

	live *liveness // heartbeats and vouches (liveness.go)

	acksMu   sync.Mutex
	acks     []ackRef      // acks not yet written (acks.go)
	acksFull chan struct{} // wakes ackLoop when ackFlushAt wait

	results chan pendingResult // results not yet written (results.go)

	due *dueNodes // nodes to dispatch for at once (due.go)

	handshake atomic.Pointer[handshake] // built by handshakeConfig

	// Tunnels pending or relayed here, by tunnel id (tunnel.go); tunnelsClosing is closed, and
	// tunnelsClosed set, when the gateway stops taking them.
	tunnelsMu      sync.Mutex
	tunnels        map[uuid.UUID]*pendingTunnel
	tunnelsClosed  bool
	tunnelsClosing chan struct{}
	openTunnels    atomic.Int64

	seats atomic.Int64 // sessions opening or held (seats.go)

	admission *admission // what anonymous traffic may hold (anonymous.go)
	refusals  sync.Map   // reason → *atomic.Int64: anonymous refusals since start
}

// New returns a gateway; Serve runs it.
func New(opts Options) *Gateway {
	if opts.HeartbeatInterval == 0 {
		opts.HeartbeatInterval = 10 * time.Second
	}
	if opts.DispatchInterval == 0 {
		opts.DispatchInterval = time.Second
	}
	if opts.CertTTL == 0 {
		opts.CertTTL = 24 * time.Hour
	}
	if opts.TunnelOpenTimeout == 0 {
		opts.TunnelOpenTimeout = tunnelhop.OpenTimeout
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	opts.Limits = opts.Limits.withDefaults()
	g := &Gateway{
		opts:     opts,
		log:      opts.Logger.With("gateway", opts.ID),
		metrics:  metrics.NewGateway(opts.Metrics),
		sessions: map[uuid.UUID]*session{},
		live:     newLiveness(),
		acksFull: make(chan struct{}, 1),
		results:  make(chan pendingResult, resultQueue),
		due:      newDueNodes(),

		tunnels:        map[uuid.UUID]*pendingTunnel{},
		tunnelsClosing: make(chan struct{}),
	}
	g.admission = newAdmission(opts.Limits, g.countRefusal)
	g.metrics.CountSessions(g.Sessions)
	g.metrics.CountTunnels(g.Tunnels)
	return g
}

// TLSConfig is the daemons' side: TLS 1.3, HTTP/2 only, a client certificate from an accepted
// node CA verified when given (Join is the one call made without one; the handlers require it
// for everything else).
func (g *Gateway) TLSConfig() *tls.Config {
	return &tls.Config{
		MinVersion:   tls.VersionTLS13,
		Certificates: []tls.Certificate{g.opts.Certificate},
		NextProtos:   []string{"h2"},
		ClientAuth:   tls.VerifyClientCertIfGiven,
		// The accepted node CAs change when a rotated-out one's overlap ends: the handshakes
		// after that use a configuration without it.
		GetConfigForClient: func(*tls.ClientHelloInfo) (*tls.Config, error) { return g.handshakeConfig(), nil },
	}
}

// handshake is the daemons' TLS configuration with the node CAs accepted until until.
type handshake struct {
	config *tls.Config
	until  time.Time // zero: for as long as the authority lasts
}

// handshakeConfig is the configuration of a handshake, built once per change of the accepted
// node CAs rather than per handshake: every connection keeps its configuration, so one shared
// configuration is both less work per join and less memory per session.
func (g *Gateway) handshakeConfig() *tls.Config {
	if h := g.handshake.Load(); h != nil && (h.until.IsZero() || time.Now().Before(h.until)) {
		return h.config
	}
	pool, until := g.opts.Authority.NodeCAPoolUntil()
	h := &handshake{config: &tls.Config{
		MinVersion:   tls.VersionTLS13,
		Certificates: []tls.Certificate{g.opts.Certificate},
		NextProtos:   []string{"h2"},
		ClientAuth:   tls.VerifyClientCertIfGiven,
		ClientCAs:    pool,
	}, until: until}
	g.handshake.Store(h)
	return h.config
}

// anonymousFrameSize is the largest HTTP/2 frame a connection without a certificate may send.
const anonymousFrameSize = 16 << 10

// compressMinBytes is the smallest answer the gateway compresses. Its answers are small (a
// command, a welcome; a join's two certificates and root, about 2 KB of PEM): gzip saved a few
// hundred bytes of each at the cost of a compressor's reset and deflate per message, 4 % of a
// join's CPU.
const compressMinBytes = 4 << 10

// Handler serves DaemonService, with the caller's node identity taken from its certificate.
// The unary calls (Join, Renew, Secret) read one small message from a body bounded to it; the
// session stream reads messages of at most the largest session limit each, and holds each kind
// to its own limit once read. It also serves the daemons' tunnel streams (POST
// tunnelhop.DataPlanePath + tunnel id, serveDataPlane), whose bodies are flow-controlled byte
// streams with no bound on their length.
func (g *Gateway) Handler() http.Handler {
	l := g.opts.Limits
	svc := &service{g: g}
	mux := http.NewServeMux()
	path, unary := daemonv1connect.NewDaemonServiceHandler(svc, append(limit.HandlerOptions(l.RequestBytes),
		connect.WithInterceptors(errorLog{g.log, g}), connect.WithCompressMinBytes(compressMinBytes))...)
	mux.Handle(path, limit.Body(l.RequestBytes, g.identify(unary)))
	_, session := daemonv1connect.NewDaemonServiceHandler(svc, append(limit.HandlerOptions(l.sessionMessageBytes()),
		connect.WithInterceptors(errorLog{g.log, g}), connect.WithCompressMinBytes(compressMinBytes))...)
	mux.Handle(daemonv1connect.DaemonServiceSessionProcedure, g.identify(session))
	mux.Handle("POST "+tunnelhop.DataPlanePath+"{id}", g.identify(http.HandlerFunc(g.serveDataPlane)))
	return mux
}

// Serve serves daemons on ln (plain TCP: TLS is added here) and runs the gateway's loops until
// ctx ends; then it ends its sessions and stops.
func (g *Gateway) Serve(ctx context.Context, ln net.Listener) error {
	if err := g.releaseVouches(ctx); err != nil {
		return fmt.Errorf("gateway %s: end the vouches of a previous run: %w", g.opts.ID, err)
	}
	if err := g.register(ctx); err != nil {
		return err
	}
	var protocols http.Protocols
	protocols.SetHTTP2(true)
	l := g.opts.Limits
	connContext := func(ctx context.Context, c net.Conn) context.Context {
		if key, ok := keyOf(c); ok {
			ctx = context.WithValue(ctx, clientKey{}, key)
		}
		return connTransport(ctx, c)
	}
	handler := g.Handler()
	// The daemons' server: connections with a verified node certificate.
	srv := &http.Server{
		Handler:           handler,
		TLSConfig:         g.TLSConfig(), // the handshake is done before; this turns HTTP/2 on
		Protocols:         &protocols,
		ReadHeaderTimeout: l.ReadHeaderTimeout,
		IdleTimeout:       l.IdleTimeout,
		MaxHeaderBytes:    l.HeaderBytes,
		// No read or write timeouts: they would cut the long-lived session and tunnel streams.
		// HTTP/2 pings find dead peers instead; the bodies of the unary calls are bounded in
		// Handler. The receive windows are the tunnels' (tunnelhop.StreamWindow, ConnWindow): a
		// window is what a peer may send before it is read, so they also bound what any stream
		// may make the gateway buffer. Only certificate-bearing connections get here.
		HTTP2: &http.HTTP2Config{
			SendPingTimeout:               30 * time.Second,
			PingTimeout:                   15 * time.Second,
			MaxReceiveBufferPerStream:     tunnelhop.StreamWindow,
			MaxReceiveBufferPerConnection: tunnelhop.ConnWindow,
			MaxReadFrameSize:              tunnelhop.MaxFrameSize,
		},
		ErrorLog:    slog.NewLogLogger(g.log.Handler(), slog.LevelDebug),
		ConnContext: connContext,
	}
	// The anonymous server: connections without a certificate, which can only Join. Small
	// windows and few streams bound what each may make the gateway buffer; anonymousRequests
	// bounds the requests in flight and how long each may take to arrive.
	anonSrv := &http.Server{
		Handler:           g.anonymousRequests(handler),
		TLSConfig:         g.TLSConfig(),
		Protocols:         &protocols,
		ReadHeaderTimeout: l.ReadHeaderTimeout,
		IdleTimeout:       l.IdleTimeout,
		MaxHeaderBytes:    l.HeaderBytes,
		HTTP2: &http.HTTP2Config{
			MaxConcurrentStreams:          l.JoinStreams,
			MaxReceiveBufferPerStream:     l.JoinWindowBytes,
			MaxReceiveBufferPerConnection: l.JoinWindowBytes,
			// HTTP/2's smallest: each connection keeps a read buffer of the largest frame its
			// peer may send (the default, 1 MiB, let every connection grow one of 64 KiB).
			MaxReadFrameSize: anonymousFrameSize,
			SendPingTimeout:  30 * time.Second,
			PingTimeout:      15 * time.Second,
		},
		ErrorLog:    slog.NewLogLogger(g.log.Handler(), slog.LevelDebug),
		ConnContext: connContext,
	}
	nodes, anonymous := newConnQueue(ln.Addr()), newConnQueue(ln.Addr())
	loopsCtx, stopLoops := context.WithCancel(context.WithoutCancel(ctx))
	var wg sync.WaitGroup
	wg.Go(func() { g.dispatchLoop(loopsCtx) })
	wg.Go(func() { g.livenessLoop(loopsCtx) })
	wg.Go(func() { g.ackLoop(loopsCtx) })
	for range resultWriters {
		wg.Go(func() { g.resultLoop(loopsCtx) })
	}
	wg.Go(func() { g.watchLoop(loopsCtx) })

	errc := make(chan error, 5)
	go func() { errc <- srv.Serve(nodes) }()
	go func() { errc <- anonSrv.Serve(anonymous) }()
	go func() { errc <- g.acceptLoop(ctx, ln, true, nodes, anonymous) }()
	g.log.Info("gateway serving daemons", "addr", ln.Addr().String(), "region", g.opts.Region)
	// The WebSocket listener: its outer server upgrades, and the daemons' servers serve the
	// connections inside like the direct ones. Behind a proxy that terminates the outer TLS the
	// peer is the proxy, so only the totals bound anonymous connections there.
	var wsOuter *http.Server
	var wsConns *wsnet.Listener
	if o := g.opts.WebSocket; o != nil {
		wsConns = wsnet.NewListener(o.Listener.Addr(), 0)
		wsOuter = g.webSocketServer(o, wsConns)
		go func() { errc <- g.acceptLoop(ctx, wsConns, o.TLS != nil, nodes, anonymous) }()
		go func() { errc <- serveWebSocket(wsOuter, o.Listener) }()
		g.log.Info("gateway serving daemons over WebSockets", "addr", o.Listener.Addr().String(), "outer_tls", o.TLS != nil)
	}
	var err error
	select {
	case err = <-errc:
	case <-ctx.Done():
	}
	// Refuse new connections and new streams first (Shutdown closes the listener and sends
	// every connection an HTTP/2 GOAWAY), so the daemons whose sessions end here reconnect to
	// another gateway rather than to this one again; ending the sessions and the tunnels lets
	// Shutdown drain. The tunnels end first, so that they end as going away rather than as
	// their sessions'.
	_ = ln.Close()
	if wsOuter != nil {
		// Upgrades stop; the WebSockets already accepted are the daemons' server's to drain.
		_ = wsConns.Close()
		_ = wsOuter.Close()
	}
	g.closeTunnels(tunnel.CodeGoingAway, "the gateway is shutting down")
	sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	drained := make(chan struct{})
	go func() {
		defer close(drained)
		var wg sync.WaitGroup
		wg.Go(func() { _ = srv.Shutdown(sctx) })
		wg.Go(func() { _ = anonSrv.Shutdown(sctx) })
		wg.Wait()
	}()
	g.endAll("gateway shutting down")
	<-drained
	if wsConns != nil {
		wsConns.Shutdown()
	}
	stopLoops()
	wg.Wait()
	g.flushLiveness(sctx)
	g.unregister(sctx)
	if err != nil && !errors.Is(err, http.ErrServerClosed) && !errors.Is(err, net.ErrClosed) {
		return fmt.Errorf("gateway: %w", err)
	}
	return nil
}

// register records the gateway so the API can find its control API.
func (g *Gateway) register(ctx context.Context) error {
	err := db.New(g.opts.Pool).UpsertGateway(ctx, db.UpsertGatewayParams{ID: g.opts.ID, Region: g.opts.Region, ControlUrl: g.opts.ControlURL})
	if err != nil {
		return fmt.Errorf("register gateway %s: %w", g.opts.ID, err)
	}
	return nil
}

func (g *Gateway) unregister(ctx context.Context) {
	q := db.New(g.opts.Pool)
	if err := q.EndGatewaySessions(ctx, g.opts.ID); err != nil {
		g.log.Warn("clear sessions", "err", err)
	}
	if err := g.releaseVouches(ctx); err != nil {
		g.log.Warn("end vouches", "err", err)
	}
	if err := q.DeleteGateway(ctx, g.opts.ID); err != nil {
		g.log.Warn("unregister gateway", "err", err)
	}
}

// Sessions is the number of connected nodes.
func (g *Gateway) Sessions() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return len(g.sessions)
}

// Revoke ends the nodes' sessions now; their reconnects are refused by the database check.
func (g *Gateway) Revoke(nodeIDs ...uuid.UUID) {
	for _, id := range nodeIDs {
		g.end(id, "", "node revoked")
	}
}
