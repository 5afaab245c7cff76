// Package process runs the roles of one better-compute process, as its configuration names them:
// `serve` and `dev` both end here, so a role runs the same way in production and on a laptop.
package process

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/better-compute/better-compute/gateway"
	"github.com/better-compute/better-compute/internal/auth"
	"github.com/better-compute/better-compute/internal/config"
	"github.com/better-compute/better-compute/internal/metrics"
	"github.com/better-compute/better-compute/internal/moduleset"
	"github.com/better-compute/better-compute/internal/pki"
	"github.com/better-compute/better-compute/internal/reconcile"
	"github.com/better-compute/better-compute/internal/secret"
	"github.com/better-compute/better-compute/internal/tracing"
	"github.com/better-compute/better-compute/internal/tunnelhop"
	"github.com/better-compute/better-compute/module"
	"github.com/better-compute/better-compute/server"
	"github.com/better-compute/better-compute/workers"
)

// Options configure a process.
type Options struct {
	Config *config.Config
	// Pool is the migrated database.
	Pool   *pgxpool.Pool
	Logger *slog.Logger
	// Reconcilers are the domain's reconcilers, run by the controllers and scheduler roles.
	Reconcilers []reconcile.Registration
	// OnListen, when set, is called once the API and the gateway accept connections, with
	// where they listen.
	OnListen func(Listening)
	// Metrics is the process's metrics registry; one is made when nil.
	Metrics *metrics.Registry
	// Modules are the enabled modules (moduleset.Registry.Enable of the configuration's
	// modules), whose migrations the caller has applied.
	Modules moduleset.Set
	// Prefix is server.Options.Prefix: where an embedding program mounts the API's handler.
	Prefix string
	// Wrap, when set, wraps the API's handler before it is served: the embedding program's own
	// routes beside it.
	Wrap func(http.Handler) http.Handler
	// Embed, when set, receives the API's (wrapped) handler once it is built, instead of the
	// process serving it on host:port: the embedding program serves it in its own server.
	Embed func(http.Handler)
}

// Run starts the configured roles and blocks until ctx ends and they have all stopped. If a role
// fails, the others are stopped and its error returned.
func Run(ctx context.Context, opts Options) error {
	cfg, log := opts.Config, opts.Logger
	roles := cfg.RoleSet()
	setMemoryLimit(cfg, roles, log)
	if _, err := auth.EnsureRootTenant(ctx, opts.Pool); err != nil {
		return err
	}
	bundle, err := pki.Load(ctx, opts.Pool, cfg.Secret)
	switch {
	case errors.Is(err, pki.ErrNotInitialized):
		if roles[config.RoleGateway] {
			return fmt.Errorf("the gateway role needs the machine PKI: run `better-compute pki init --trust-domain <domain>` first")
		}
		log.Warn("the machine PKI is not initialised: nodes cannot join until `better-compute pki init` runs")
		bundle = nil
	case err != nil:
		return err
	}

	// Observability first, so every role reports from its start; tracing stops (flushing the
	// spans in flight) only after every role has stopped.
	instance := workers.NewHolderID()
	reg := opts.Metrics
	if reg == nil {
		reg = metrics.NewRegistry()
	}
	metrics.RegisterPool(reg, opts.Pool)
	// The series by tenant only where /metrics is off the API's port (docs/security.md).
	metrics.RegisterDatabase(reg, opts.Pool, metrics.DatabaseOptions{Logger: log, ByTenant: cfg.Metrics.Listen != ""})
	roleNames := keys(roles)
	slices.Sort(roleNames)
	stopTracing, err := tracing.Setup(ctx, tracing.Options{
		Endpoint: cfg.Otel.Endpoint, SampleRatio: cfg.Otel.SampleRatio, Roles: roleNames, InstanceID: instance,
	})
	if err != nil {
		return err
	}
	defer func() {
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := stopTracing(sctx); err != nil {
			log.Warn("flush traces", "err", err)
		}
	}()
	if tracing.Enabled() {
		log.Info("tracing on", "endpoint", cfg.Otel.Endpoint, "sample_ratio", cfg.Otel.SampleRatio)
	}

	var wg sync.WaitGroup
	defer wg.Wait()
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	fail := func(role string, err error) {
		if err != nil {
			cancel(fmt.Errorf("%s: %w", role, err))
		}
	}
	var listening Listening
	var api *server.Server
	// The waker is made once the worker runtime it pokes in-process exists; a gateway made
	// before it reaches it through this (a hello before then waits for the liveness round).
	var wakerRef atomic.Pointer[reconcile.Waker]
	wake := func(kind string) {
		if w := wakerRef.Load(); w != nil {
			w.Wake(kind)
		}
	}

	if roles[config.RoleGateway] {
		gpool, err := rolePool(ctx, cfg, opts.Pool, "gateway", cfg.Database.GatewayMaxConns, defaultGatewayConns)
		if err != nil {
			return err
		}
		defer closeOwn(gpool, opts.Pool)
		gw, ln, control, err := newGateway(cfg, gpool, bundle, reg, wake, log)
		if err != nil {
			return err
		}
		listening.Gateway, listening.GatewayWebSocket = ln.Addr().String(), gw.WebSocketURL()
		wg.Go(func() { fail("gateway", gw.Serve(ctx, ln)) })
		wg.Go(func() { fail("gateway control API", gw.ServeControl(ctx, control, bundle, hostOf(control.Addr()))) })
	}
	// The notifier lets the API and the reconcilers poke gateways after a commit, with a pool of
	// its own (pools.go).
	var notifier *gateway.Notifier
	if bundle != nil {
		npool, err := rolePool(ctx, cfg, opts.Pool, "notifier", cfg.Database.NotifierMaxConns, defaultNotifierConns)
		if err != nil {
			return err
		}
		defer closeOwn(npool, opts.Pool)
		if notifier, err = gateway.NewNotifier(npool, bundle, log); err != nil {
			return err
		}
		defer notifier.Wait()
	}
	var local *reconcile.Runtime
	if workerRoles := workerRoles(roles); len(workerRoles) > 0 {
		wpool, err := rolePool(ctx, cfg, opts.Pool, "workers", cfg.Database.WorkersMaxConns, defaultWorkersConns)
		if err != nil {
			return err
		}
		defer closeOwn(wpool, opts.Pool)
		mw, err := opts.Modules.Workers(module.Worker{
			Pool: wpool, Logger: log, Metrics: reg, Secret: cfg.Secret, GatewayEndpoint: cfg.Gateway.PublicEndpoint,
			APIURL: publicAPIURL(cfg),
		})
		if err != nil {
			return err
		}
		wopts := workers.Options{
			Pool: wpool, Roles: workerRoles, Logger: log, HolderID: instance, Secret: cfg.Secret,
			Retention: cfg.Retention, Webhooks: cfg.Webhooks,
			Reconcilers: slices.Concat(opts.Reconcilers, mw.Reconcilers), Jobs: mw.Jobs, Sinks: mw.Sinks,
			PowerCycle: mw.PowerCycle, Replace: mw.Replace,
		}
		if notifier != nil {
			wopts.Notifier = notifier
		}
		w, err := workers.New(wopts)
		if err != nil {
			return err
		}
		local = w.Local()
		wg.Go(func() { w.Run(ctx) })
	}
	waker := reconcile.NewWaker(opts.Pool, local, log)
	wakerRef.Store(waker)
	wg.Go(func() { waker.Run(ctx) })
	if roles[config.RoleAPI] {
		var n server.Notifier
		if notifier != nil {
			n = notifier
		}
		if api, err = newAPI(cfg, opts.Pool, bundle, n, waker, reg, log, instance, opts.Prefix, opts.Modules.Services()); err != nil {
			return err
		}
		var h http.Handler = api
		if opts.Wrap != nil {
			h = opts.Wrap(h)
		}
		if opts.Embed != nil {
			opts.Embed(h)
			log.Info("api embedded", "base_path", api.BasePath(), "methods", len(api.Registry().Methods()))
		} else {
			ln, err := net.Listen("tcp", net.JoinHostPort(cfg.Host, strconv.Itoa(cfg.Port)))
			if err != nil {
				return fmt.Errorf("api: listen: %w", err)
			}
			listening.APIURL = "http://" + displayAddr(ln.Addr()) + api.BasePath()
			log.Info("api listening", "url", listening.APIURL, "methods", len(api.Registry().Methods()))
			wg.Go(func() { fail("api", server.Serve(ctx, ln, h, log, httpLimits(cfg.Limits))) })
		}
	}
	// With metrics.listen set, the metrics are served there only, off the API's port.
	if cfg.Metrics.Listen != "" {
		ln, err := net.Listen("tcp", cfg.Metrics.Listen)
		if err != nil {
			return fmt.Errorf("metrics: listen: %w", err)
		}
		log.Info("metrics listening", "url", "http://"+displayAddr(ln.Addr())+"/metrics")
		wg.Go(func() { fail("metrics", server.Serve(ctx, ln, metricsHandler(reg), log, httpLimits(cfg.Limits))) })
	}
	if opts.OnListen != nil {
		opts.OnListen(listening)
	}
	<-ctx.Done()
	if api != nil {
		// WebSockets are hijacked connections, which the API's drain does not cover.
		sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		api.CloseTunnels(sctx)
		cancel()
	}
	wg.Wait()
	if err := context.Cause(ctx); err != nil && !errors.Is(err, context.Canceled) {
		return err
	}
	return nil
}

// httpLimits are the limits of the API's and the metrics listener's http.Server.
func httpLimits(l config.Limits) server.HTTPLimits {
	return server.HTTPLimits{
		ReadHeaderTimeout: l.ReadHeaderTimeout, ReadTimeout: l.ReadTimeout,
		IdleTimeout: l.IdleTimeout, MaxHeaderBytes: l.HeaderBytes,
	}
}

// metricsHandler serves metrics.listen: /metrics, and /healthz for probes.
func metricsHandler(reg *metrics.Registry) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", reg.Handler())
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		_, _ = io.WriteString(w, "ok\n")
	})
	return mux
}

func newAPI(cfg *config.Config, pool *pgxpool.Pool, bundle *pki.Bundle, notifier server.Notifier, waker *reconcile.Waker, reg *metrics.Registry, log *slog.Logger, instance, prefix string, services []module.Service) (*server.Server, error) {
	var gateways []string
	if cfg.Gateway.PublicEndpoint != "" {
		gateways = []string{cfg.Gateway.PublicEndpoint}
	}
	trustDomain := cfg.TrustDomain
	tunnelOpts := server.TunnelOptions{Instance: instance, IdleTimeout: cfg.Tunnels.IdleTimeout, PerNode: cfg.Tunnels.PerNode, PerTenant: cfg.Tunnels.PerTenant}
	if bundle != nil {
		trustDomain = bundle.TrustDomain()
		// Tunnels stream to the gateways' control API with a client certificate of the internal
		// CA, as the notifier pokes it.
		dialer, err := tunnelhop.NewDialer(bundle)
		if err != nil {
			return nil, fmt.Errorf("api: %w", err)
		}
		tunnelOpts.Dialer = dialer
	}
	return server.New(server.Options{
		Pool: pool, Secret: cfg.Secret, BasePath: cfg.BasePath, Prefix: prefix, BaseURL: cfg.BaseURL,
		TrustDomain: trustDomain, GatewayEndpoints: gateways, Logger: log, Notifier: notifier,
		WebhooksAllowPrivate: cfg.Webhooks.AllowPrivate, Metrics: reg, Waker: waker,
		Auth: server.AuthOptions{
			Sessions: auth.SessionLifetimes{Idle: cfg.Auth.Sessions.IdleTimeout, Absolute: cfg.Auth.Sessions.AbsoluteTimeout},
			TokenTTL: cfg.Auth.TokenTTL, JWKSCooldown: cfg.Auth.JWKSCooldown, AllowPrivateIssuers: cfg.Auth.AllowPrivateIssuers,
			Flows: server.FlowLimits{PerAddress: cfg.Auth.Flows.PerAddress, PerMethod: cfg.Auth.Flows.PerMethod, CountedFor: cfg.Auth.Flows.CountedFor},
		},
		MetricsElsewhere: cfg.Metrics.Listen != "", MaxRequestBytes: cfg.Limits.RequestBytes, RateLimits: rateLimits(cfg.RateLimits),
		CORS:    server.CORSOptions{AllowedOrigins: cfg.CORS.AllowedOrigins, AllowCredentials: cfg.CORS.AllowCredentials},
		Tunnels: tunnelOpts, Services: services,
	})
}

// newGateway prepares the gateway role: its listeners, and a serving certificate issued from the
// PKI for the gateway's names (every process holds the deployment secret, so it can).
func newGateway(cfg *config.Config, pool *pgxpool.Pool, bundle *pki.Bundle, reg *metrics.Registry, wake func(kind string), log *slog.Logger) (*gateway.Gateway, net.Listener, net.Listener, error) {
	secretSealer, err := secret.NewSealer(cfg.Secret)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("gateway: %w", err)
	}
	id := workers.NewHolderID()
	ln, err := net.Listen("tcp", cfg.Gateway.Listen)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("gateway: listen: %w", err)
	}
	control, err := net.Listen("tcp", cfg.Gateway.ControlListen)
	if err != nil {
		ln.Close()
		return nil, nil, nil, fmt.Errorf("gateway control API: listen: %w", err)
	}
	var dns []string
	var ips []net.IP
	for _, h := range []string{hostOf(ln.Addr()), endpointHost(cfg.Gateway.PublicEndpoint)} {
		if ip := net.ParseIP(h); ip != nil {
			ips = append(ips, ip)
		} else if h != "" {
			dns = append(dns, h)
		}
	}
	certPEM, keyPEM, err := bundle.IssueGateway(cfg.Gateway.Region, id, dns, ips)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("gateway: issue serving certificate: %w", err)
	}
	tlsCert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("gateway: serving certificate: %w", err)
	}
	ws, err := webSocketListener(cfg.Gateway.WebSocket, tlsCert)
	if err != nil {
		ln.Close()
		control.Close()
		return nil, nil, nil, err
	}
	gw := gateway.New(gateway.Options{
		Pool: pool, Authority: bundle, ID: id, Region: cfg.Gateway.Region, Certificate: tlsCert, Secrets: secretSealer,
		WebSocket:  ws,
		ControlURL: "https://" + net.JoinHostPort(hostOf(control.Addr()), strconv.Itoa(control.Addr().(*net.TCPAddr).Port)),
		Logger:     log, Metrics: reg, Wake: wake,
		TenantNodes: cfg.RateLimits.Tenant.Nodes,
		Limits: gateway.Limits{
			RequestBytes: cfg.Limits.DaemonRequestBytes, HelloBytes: cfg.Limits.DaemonHelloBytes,
			ResultBytes: cfg.Limits.DaemonResultBytes, EventBytes: cfg.Limits.DaemonEventBytes,
			HeaderBytes: cfg.Limits.HeaderBytes, ReadHeaderTimeout: cfg.Limits.ReadHeaderTimeout,
			IdleTimeout: cfg.Limits.IdleTimeout, Sessions: cfg.Limits.GatewaySessions,
			AnonymousConns: cfg.Limits.GatewayAnonymousConns, AnonymousConnsPerAddress: cfg.Limits.GatewayAnonymousConnsPerAddress,
			JoinsInFlight: cfg.Limits.GatewayJoinsInFlight, JoinsInFlightPerAddress: cfg.Limits.GatewayJoinsInFlightPerAddress,
			JoinStreams: cfg.Limits.GatewayJoinStreams, JoinWindowBytes: cfg.Limits.GatewayJoinWindowBytes,
			JoinReadTimeout: cfg.Limits.GatewayJoinReadTimeout,
			JoinRate:        cfg.Limits.GatewayJoinRate, JoinBurst: cfg.Limits.GatewayJoinBurst,
		},
	})
	return gw, ln, control, nil
}

func workerRoles(roles map[string]bool) []string {
	var out []string
	for _, r := range workers.Roles {
		if roles[r] {
			out = append(out, r)
		}
	}
	return out
}

func keys(m map[string]bool) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

// NewLogger builds the process logger from the configuration: JSON or text, at its level. A
// line logged inside a span carries its trace_id and span_id.
func NewLogger(c config.Log, w io.Writer) *slog.Logger {
	var level slog.Level
	_ = level.UnmarshalText([]byte(strings.ToUpper(c.Level))) // validated by config
	opts := &slog.HandlerOptions{Level: level}
	var h slog.Handler = slog.NewJSONHandler(w, opts)
	if c.Format == "text" {
		h = slog.NewTextHandler(w, opts)
	}
	return slog.New(tracing.LogHandler(h))
}

// displayAddr turns a listener address into one a browser can open: an unspecified host
// becomes loopback.
func displayAddr(a net.Addr) string {
	return net.JoinHostPort(hostOf(a), strconv.Itoa(a.(*net.TCPAddr).Port))
}

// hostOf is the host other processes reach a listener at: an unspecified address becomes this
// machine's name, loopback stays loopback.
func hostOf(a net.Addr) string {
	tcp, ok := a.(*net.TCPAddr)
	if !ok {
		return ""
	}
	if tcp.IP.IsUnspecified() {
		if h, err := os.Hostname(); err == nil {
			return h
		}
		return "127.0.0.1"
	}
	return tcp.IP.String()
}

func endpointHost(endpoint string) string {
	h, _, err := net.SplitHostPort(endpoint)
	if err != nil {
		return endpoint
	}
	return h
}

// publicAPIURL is the API's public URL with its base path, empty when baseURL is not set.
func publicAPIURL(cfg *config.Config) string {
	if cfg.BaseURL == "" {
		return ""
	}
	return strings.TrimSuffix(cfg.BaseURL, "/") + cfg.BasePath
}
