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
	"os"
	"strconv"
	"strings"
	"sync"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/better-compute/better-compute/config"
	"github.com/better-compute/better-compute/gateway"
	"github.com/better-compute/better-compute/pki"
	"github.com/better-compute/better-compute/server"
	"github.com/better-compute/better-compute/server/iam"
	"github.com/better-compute/better-compute/workers"
	"github.com/better-compute/better-compute/workers/commands"
	"github.com/better-compute/better-compute/workers/iamjobs"
	"github.com/better-compute/better-compute/workers/lease"
	"github.com/better-compute/better-compute/workers/reconcile"
	"github.com/better-compute/better-compute/workers/retention"
	"github.com/better-compute/better-compute/workers/sinks"
)

// Options configure a process.
type Options struct {
	Config *config.Config
	// Pool is the migrated database.
	Pool   *pgxpool.Pool
	Logger *slog.Logger
	// Reconcilers are the domain's reconcilers, run by the controllers and scheduler roles.
	Reconcilers []reconcile.Registration
	// OnListen, when set, is called once the API and the gateway accept connections, with the
	// API's base URL and the gateway's address ("" when the role does not run).
	OnListen func(apiURL, gatewayAddr string)
}

// Run starts the configured roles and blocks until ctx ends and they have all stopped. If a role
// fails, the others are stopped and its error returned.
func Run(ctx context.Context, opts Options) error {
	cfg, log := opts.Config, opts.Logger
	roles := cfg.RoleSet()
	if _, err := iam.EnsureRootTenant(ctx, opts.Pool); err != nil {
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

	var wg sync.WaitGroup
	defer wg.Wait()
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	fail := func(role string, err error) {
		if err != nil {
			cancel(fmt.Errorf("%s: %w", role, err))
		}
	}
	var apiURL, gatewayAddr string

	if roles[config.RoleGateway] {
		gw, ln, control, err := newGateway(cfg, opts.Pool, bundle, log)
		if err != nil {
			return err
		}
		gatewayAddr = ln.Addr().String()
		wg.Go(func() { fail("gateway", gw.Serve(ctx, ln)) })
		wg.Go(func() { fail("gateway control API", gw.ServeControl(ctx, control, bundle, hostOf(control.Addr()))) })
	}
	if workerRoles := workerRoles(roles); len(workerRoles) > 0 {
		rt := workers.New(workers.Options{
			Pool: opts.Pool, Roles: workerRoles, Reconcilers: opts.Reconcilers, Logger: log,
			Jobs:  jobs(cfg, opts.Pool, log),
			Loops: loops(cfg, opts.Pool, log),
		})
		log.Info("worker roles starting", "roles", strings.Join(keys(workerRoles), ","), "holder", rt.Holder().ID)
		wg.Go(func() { rt.Run(ctx) })
	}
	if roles[config.RoleAPI] {
		var notifier server.Notifier
		if bundle != nil {
			n, err := gateway.NewNotifier(opts.Pool, bundle, log)
			if err != nil {
				return err
			}
			defer n.Wait()
			notifier = n
		}
		api, err := newAPI(cfg, opts.Pool, bundle, notifier, log)
		if err != nil {
			return err
		}
		ln, err := net.Listen("tcp", net.JoinHostPort(cfg.Host, strconv.Itoa(cfg.Port)))
		if err != nil {
			return fmt.Errorf("api: listen: %w", err)
		}
		apiURL = "http://" + displayAddr(ln.Addr()) + api.BasePath()
		log.Info("api listening", "url", apiURL, "methods", len(api.Registry().Methods()))
		wg.Go(func() { fail("api", server.Serve(ctx, ln, api, log)) })
	}
	if opts.OnListen != nil {
		opts.OnListen(apiURL, gatewayAddr)
	}
	<-ctx.Done()
	wg.Wait()
	if err := context.Cause(ctx); err != nil && !errors.Is(err, context.Canceled) {
		return err
	}
	return nil
}

func newAPI(cfg *config.Config, pool *pgxpool.Pool, bundle *pki.Bundle, notifier server.Notifier, log *slog.Logger) (*server.Server, error) {
	var gateways []string
	if cfg.Gateway.PublicEndpoint != "" {
		gateways = []string{cfg.Gateway.PublicEndpoint}
	}
	trustDomain := cfg.TrustDomain
	if bundle != nil {
		trustDomain = bundle.TrustDomain()
	}
	return server.New(server.Options{
		Pool: pool, Secret: cfg.Secret, BasePath: cfg.BasePath, BaseURL: cfg.BaseURL,
		TrustDomain: trustDomain, GatewayEndpoints: gateways, Logger: log, Notifier: notifier,
		WebhooksAllowPrivate: cfg.Webhooks.AllowPrivate,
		CORS:                 server.CORSOptions{AllowedOrigins: cfg.CORS.AllowedOrigins, AllowCredentials: cfg.CORS.AllowCredentials},
	})
}

// newGateway prepares the gateway role: its listeners, and a serving certificate issued from the
// PKI for the gateway's names (every process holds the deployment secret, so it can).
func newGateway(cfg *config.Config, pool *pgxpool.Pool, bundle *pki.Bundle, log *slog.Logger) (*gateway.Gateway, net.Listener, net.Listener, error) {
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
	gw := gateway.New(gateway.Options{
		Pool: pool, Authority: bundle, ID: id, Region: cfg.Gateway.Region, Certificate: tlsCert,
		ControlURL: "https://" + net.JoinHostPort(hostOf(control.Addr()), strconv.Itoa(control.Addr().(*net.TCPAddr).Port)),
		Logger:     log,
	})
	return gw, ln, control, nil
}

// jobs are the singleton jobs of the worker roles.
func jobs(cfg *config.Config, pool *pgxpool.Pool, log *slog.Logger) map[string][]lease.Job {
	return map[string][]lease.Job{
		workers.RoleControllers: {
			commands.Sweeper(pool, commands.SweeperOptions{Logger: log}),
			retention.Job(pool, retention.Options{Retention: cfg.Retention, Logger: log}),
		},
		workers.RoleIAM: iamjobs.Jobs(pool, iamjobs.Options{Logger: log}),
	}
}

// loops are the worker roles' long-running parts that manage their own leases.
func loops(cfg *config.Config, pool *pgxpool.Pool, log *slog.Logger) map[string][]func(context.Context, *lease.Holder) {
	return map[string][]func(context.Context, *lease.Holder){
		workers.RoleSinks: {func(ctx context.Context, h *lease.Holder) {
			sealer, err := sinks.NewSealer(cfg.Secret)
			if err == nil {
				err = sinks.Run(ctx, h, pool, sinks.Options{Sealer: sealer, AllowPrivate: cfg.Webhooks.AllowPrivate, Logger: log})
			}
			if err != nil {
				log.Error("sinks role stopped", "err", err)
			}
		}},
	}
}

func workerRoles(roles map[string]bool) map[string]bool {
	out := map[string]bool{}
	for _, r := range []string{workers.RoleControllers, workers.RoleScheduler, workers.RoleSinks, workers.RoleIAM} {
		if roles[r] {
			out[r] = true
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

// NewLogger builds the process logger from the configuration: JSON or text, at its level.
func NewLogger(c config.Log, w io.Writer) *slog.Logger {
	var level slog.Level
	_ = level.UnmarshalText([]byte(strings.ToUpper(c.Level))) // validated by config
	opts := &slog.HandlerOptions{Level: level}
	if c.Format == "text" {
		return slog.New(slog.NewTextHandler(w, opts))
	}
	return slog.New(slog.NewJSONHandler(w, opts))
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
