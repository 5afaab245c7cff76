// Package server is the api role: the Connect API under the base path, with every method in the
// registry reachable both at its short route POST {basePath}/{group}/{name} (JSON for curl and
// browsers) and at its native procedure path (for generated clients and buf curl), behind the
// guard (CSRF header, IAM, error mapping, audit of failures, metrics), plus the health endpoints,
// the discovery document, the Prometheus metrics at GET /metrics (unless a listener of their own
// serves them), the web dashboard at GET /dashboard/, and the tunnel endpoint GET
// {basePath}/tunnels/{ticket} (package tunnels).
package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"

	"connectrpc.com/connect"
	"connectrpc.com/otelconnect"
	"github.com/jackc/pgx/v5/pgxpool"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/better-compute/better-compute/dashboard"
	"github.com/better-compute/better-compute/gen/go/bettercompute/audit/v1/auditv1connect"
	"github.com/better-compute/better-compute/gen/go/bettercompute/auth/v1/authv1connect"
	"github.com/better-compute/better-compute/gen/go/bettercompute/commands/v1/commandsv1connect"
	"github.com/better-compute/better-compute/gen/go/bettercompute/events/v1/eventsv1connect"
	"github.com/better-compute/better-compute/gen/go/bettercompute/gpus/v1/gpusv1connect"
	"github.com/better-compute/better-compute/gen/go/bettercompute/iam/v1/iamv1connect"
	"github.com/better-compute/better-compute/gen/go/bettercompute/jointokens/v1/jointokensv1connect"
	"github.com/better-compute/better-compute/gen/go/bettercompute/leases/v1/leasesv1connect"
	"github.com/better-compute/better-compute/gen/go/bettercompute/nodes/v1/nodesv1connect"
	"github.com/better-compute/better-compute/gen/go/bettercompute/pools/v1/poolsv1connect"
	"github.com/better-compute/better-compute/gen/go/bettercompute/remediations/v1/remediationsv1connect"
	"github.com/better-compute/better-compute/gen/go/bettercompute/reservations/v1/reservationsv1connect"
	"github.com/better-compute/better-compute/gen/go/bettercompute/secrets/v1/secretsv1connect"
	"github.com/better-compute/better-compute/gen/go/bettercompute/system/v1/systemv1connect"
	"github.com/better-compute/better-compute/gen/go/bettercompute/tunnels/v1/tunnelsv1connect"
	"github.com/better-compute/better-compute/gen/go/bettercompute/usage/v1/usagev1connect"
	"github.com/better-compute/better-compute/gen/go/bettercompute/webhooks/v1/webhooksv1connect"
	"github.com/better-compute/better-compute/gen/go/bettercompute/workflows/v1/workflowsv1connect"
	"github.com/better-compute/better-compute/internal/admission"
	"github.com/better-compute/better-compute/internal/apispec"
	"github.com/better-compute/better-compute/internal/auth"
	"github.com/better-compute/better-compute/internal/auth/sso"
	"github.com/better-compute/better-compute/internal/guard"
	"github.com/better-compute/better-compute/internal/limit"
	"github.com/better-compute/better-compute/internal/metrics"
	"github.com/better-compute/better-compute/internal/registry"
	"github.com/better-compute/better-compute/internal/requestid"
	"github.com/better-compute/better-compute/internal/seal"
	"github.com/better-compute/better-compute/internal/secret"
	"github.com/better-compute/better-compute/internal/tracing"
	"github.com/better-compute/better-compute/internal/webhook"
	"github.com/better-compute/better-compute/module"
	"github.com/better-compute/better-compute/server/internal/audit"
	"github.com/better-compute/better-compute/server/internal/authmethods"
	"github.com/better-compute/better-compute/server/internal/commands"
	"github.com/better-compute/better-compute/server/internal/events"
	"github.com/better-compute/better-compute/server/internal/gpus"
	"github.com/better-compute/better-compute/server/internal/iam"
	"github.com/better-compute/better-compute/server/internal/jointokens"
	"github.com/better-compute/better-compute/server/internal/leases"
	"github.com/better-compute/better-compute/server/internal/nodes"
	"github.com/better-compute/better-compute/server/internal/pools"
	"github.com/better-compute/better-compute/server/internal/remediations"
	"github.com/better-compute/better-compute/server/internal/reservations"
	"github.com/better-compute/better-compute/server/internal/secrets"
	"github.com/better-compute/better-compute/server/internal/system"
	"github.com/better-compute/better-compute/server/internal/tunnels"
	"github.com/better-compute/better-compute/server/internal/usage"
	"github.com/better-compute/better-compute/server/internal/webhooks"
	"github.com/better-compute/better-compute/server/internal/workflows"
)

// DefaultBasePath is where the API is mounted unless configured otherwise.
const DefaultBasePath = "/api"

// Options configure the API.
type Options struct {
	// Pool is the database every handler uses. Required.
	Pool *pgxpool.Pool
	// Secret is the deployment secret (at least 32 characters). Required.
	Secret string
	// BasePath prefixes every API route; DefaultBasePath when empty.
	BasePath string
	// Prefix is where a program that embeds the API mounts its handler ("/compute"): every
	// route — the API below Prefix+BasePath, the health endpoints, the discovery document, the
	// metrics and the dashboard — is below it, so the program's own routes keep the rest of its
	// URL space (Reserved lists what the API takes). Empty serves from the root.
	Prefix string
	// BaseURL is the public URL of the deployment, for the discovery document.
	BaseURL string
	// TrustDomain is the machine PKI's SPIFFE trust domain, empty before `pki init`.
	TrustDomain string
	// GatewayEndpoints are where daemons dial in, for the discovery document.
	GatewayEndpoints []string
	// CORS allows browsers on other origins to call the API.
	CORS CORSOptions
	// Bridge authenticates callers and decides calls; the embedded IAM when nil.
	Bridge auth.Bridge
	// Notifier pokes gateways after commits (commands created, nodes revoked); when nil the
	// gateways' own loops pick the changes up within a second or two.
	Notifier Notifier
	// Services are the enabled modules' API services.
	Services []module.Service
	// Waker wakes reconcilers after commits that enqueue work (reconcile.Waker), for the kinds
	// the admission transactions name (admission.Tx.Wake); when nil they find the work by polling.
	Waker interface{ Wake(kind string) }
	// Auth configures sign-in through identity providers: auth methods and sessions.
	Auth AuthOptions
	// WebhooksAllowPrivate lets webhook URLs point at loopback, link-local and private
	// addresses (config webhooks.allowPrivate).
	WebhooksAllowPrivate bool
	// Logger receives request and lifecycle logs.
	Logger *slog.Logger
	// Metrics is the process's metrics registry, served at GET /metrics; the API adds its call
	// counters and latencies to it. When nil the API keeps a registry of its own.
	Metrics *metrics.Registry
	// MetricsElsewhere leaves GET /metrics off the API's routes, for a process that serves its
	// metrics on a listener of their own (config metrics.listen).
	MetricsElsewhere bool
	// MaxRequestBytes bounds one request message, after decompression (config
	// limits.requestBytes); limit.DefaultRequestBytes when zero. A larger one is refused with
	// ResourceExhausted before any handler runs.
	MaxRequestBytes int
	// RateLimits are the guard's token buckets per client address and per API key (none when
	// zero, as in tests; the configuration always sets them) and the per-tenant caps (their
	// defaults when zero).
	RateLimits guard.RateLimits
	// Tunnels configure the tunnel endpoint, GET {basePath}/tunnels/{ticket}.
	Tunnels TunnelOptions
}

// Notifier is the API's link to gateways (gateway.Notifier).
type Notifier interface {
	commands.Notifier
	nodes.RevocationNotifier
}

// Server is the API's HTTP handler.
type Server struct {
	opts     Options
	prefix   string // Options.Prefix, without a trailing slash
	basePath string // Options.Prefix + Options.BasePath
	registry *registry.Registry
	api      *http.ServeMux // native procedure paths, below the base path
	apiRoot  http.Handler   // everything below the base path
	tunnels  *tunnels.Service
	handler  http.Handler
	log      *slog.Logger

	maxRequest  int                  // the largest request message, in bytes
	errorWriter *connect.ErrorWriter // answers calls refused before Connect reads them (strictjson.go)
}

// New builds the API from the method registry and checks that every registered method has a
// handler.
func New(opts Options) (*Server, error) {
	if opts.Pool == nil {
		return nil, errors.New("api: no database")
	}
	sealer, err := seal.New(opts.Secret, "idempotency")
	if err != nil {
		return nil, fmt.Errorf("api: %w", err)
	}
	files := make([]protoreflect.FileDescriptor, len(opts.Services))
	for i, svc := range opts.Services {
		files[i] = svc.File
	}
	reg, err := registry.FromGlobal(files...)
	if err != nil {
		return nil, err
	}
	s := &Server{
		opts:     opts,
		prefix:   strings.TrimSuffix(opts.Prefix, "/"),
		basePath: strings.TrimSuffix(opts.BasePath, "/"),
		registry: reg,
		api:      http.NewServeMux(),
		log:      opts.Logger,
	}
	if s.basePath == "" {
		s.basePath = DefaultBasePath
	}
	s.basePath = s.prefix + s.basePath
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	bridge := opts.Bridge
	if bridge == nil {
		bridge = auth.NewEmbedded(opts.Pool, s.log).WithSessionLifetimes(opts.Auth.Sessions)
	}
	admit := admission.New(opts.Pool, sealer, opts.Waker)
	webhookSealer, err := webhook.NewSealer(opts.Secret)
	if err != nil {
		return nil, fmt.Errorf("api: %w", err)
	}
	secretSealer, err := secret.NewSealer(opts.Secret)
	if err != nil {
		return nil, fmt.Errorf("api: %w", err)
	}
	clientSecretSealer, err := auth.NewClientSecretSealer(opts.Secret)
	if err != nil {
		return nil, fmt.Errorf("api: %w", err)
	}
	if opts.Metrics == nil {
		opts.Metrics = metrics.NewRegistry()
	}
	g := guard.New(reg, bridge, opts.Pool, s.log).WithMetrics(metrics.NewAPI(opts.Metrics)).
		WithRefusals(metrics.NewRefusals(opts.Metrics)).WithRateLimits(opts.RateLimits)
	interceptors := []connect.Interceptor{g}
	if tp := tracing.Provider(); tp != nil {
		// Outermost, so the guard's own statements (authentication, audit) are in the call's span.
		// Callers' trace context is linked, not adopted: the API faces the outside world.
		traced, err := otelconnect.NewInterceptor(otelconnect.WithTracerProvider(tp),
			otelconnect.WithPropagator(tracing.Propagator()), otelconnect.WithoutMetrics())
		if err != nil {
			return nil, fmt.Errorf("api: %w", err)
		}
		interceptors = append([]connect.Interceptor{traced}, interceptors...)
	}
	maxRequest := limit.Or(opts.MaxRequestBytes, limit.DefaultRequestBytes)
	handlerOpts := append([]connect.HandlerOption{
		connect.WithInterceptors(interceptors...),
		// Compressing small responses costs more CPU than it saves bytes.
		connect.WithCompressMinBytes(1024),
	}, limit.HandlerOptions(maxRequest)...)
	handlerOpts = append(handlerOpts, strictJSONCodecs()...)
	s.maxRequest, s.errorWriter = maxRequest, connect.NewErrorWriter(handlerOpts...)
	mounted := map[string]bool{}
	mount := func(path string, h http.Handler) {
		s.api.Handle(path, h)
		mounted[path] = true
	}
	mount(systemv1connect.NewSystemServiceHandler(system.New(opts.TrustDomain), handlerOpts...))
	mount(iamv1connect.NewIamServiceHandler(iam.New(opts.Pool, admit, iam.WithRevocationNotifier(opts.Notifier)), handlerOpts...))
	mount(auditv1connect.NewAuditServiceHandler(audit.New(opts.Pool), handlerOpts...))
	mount(webhooksv1connect.NewWebhooksServiceHandler(webhooks.New(opts.Pool, admit, webhookSealer, opts.WebhooksAllowPrivate), handlerOpts...))
	authSvc := authmethods.New(opts.Pool, admit, clientSecretSealer, authmethods.Options{
		AllowPrivateIssuers: opts.Auth.AllowPrivateIssuers, Sessions: opts.Auth.Sessions, TokenTTL: opts.Auth.TokenTTL,
		SSO:     sso.New(sso.Options{AllowPrivate: opts.Auth.AllowPrivateIssuers, Cooldown: opts.Auth.JWKSCooldown, Now: opts.Auth.Now, Logger: s.log}),
		BaseURL: opts.BaseURL, BasePath: s.basePath, Limits: opts.RateLimits.Tenant, Logger: s.log,
		Flows: authmethods.FlowLimits(opts.Auth.Flows), Bridge: bridge,
	})
	mount(authv1connect.NewAuthServiceHandler(authSvc, handlerOpts...))
	mount(secretsv1connect.NewSecretsServiceHandler(secrets.New(opts.Pool, admit, secretSealer), handlerOpts...))
	mount(eventsv1connect.NewEventsServiceHandler(events.New(opts.Pool), handlerOpts...))
	mount(commandsv1connect.NewCommandsServiceHandler(commands.New(opts.Pool, admit, opts.Notifier), handlerOpts...))
	mount(nodesv1connect.NewNodesServiceHandler(nodes.New(opts.Pool, admit, opts.Notifier), handlerOpts...))
	mount(gpusv1connect.NewGpusServiceHandler(gpus.New(opts.Pool, admit), handlerOpts...))
	mount(remediationsv1connect.NewRemediationsServiceHandler(remediations.New(opts.Pool, admit), handlerOpts...))
	mount(jointokensv1connect.NewJoinTokensServiceHandler(jointokens.New(opts.Pool, admit), handlerOpts...))
	mount(poolsv1connect.NewPoolsServiceHandler(pools.New(opts.Pool, admit), handlerOpts...))
	mount(leasesv1connect.NewLeasesServiceHandler(leases.New(opts.Pool, admit), handlerOpts...))
	mount(reservationsv1connect.NewReservationsServiceHandler(reservations.New(opts.Pool, admit), handlerOpts...))
	mount(usagev1connect.NewUsageServiceHandler(usage.New(opts.Pool), handlerOpts...))
	mount(workflowsv1connect.NewWorkflowsServiceHandler(workflows.New(opts.Pool, admit), handlerOpts...))
	t := opts.Tunnels
	s.tunnels = tunnels.New(opts.Pool, admit, g, tunnels.Options{
		Dialer: t.Dialer, Instance: t.Instance, IdleTimeout: t.IdleTimeout, PerNode: t.PerNode, PerTenant: t.PerTenant,
		BaseURL: opts.BaseURL, BasePath: s.basePath, Logger: s.log, Metrics: opts.Metrics,
	})
	tunnelsPath, tunnelsHandler := tunnelsv1connect.NewTunnelsServiceHandler(s.tunnels, handlerOpts...)
	mount(tunnelsPath, tunnels.WithOrigin(tunnelsHandler))
	for _, svc := range opts.Services {
		path, h, err := svc.Mount(module.ServiceDeps{
			Pool: opts.Pool, Admitter: admit, Logger: s.log, Metrics: opts.Metrics, Secret: opts.Secret,
		}, handlerOpts...)
		if err != nil {
			return nil, fmt.Errorf("api: %s: %w", svc.File.Path(), err)
		}
		mount(path, h)
	}

	for _, m := range reg.Methods() {
		svc := m.Procedure[:strings.LastIndex(m.Procedure, "/")+1]
		if !mounted[svc] {
			return nil, fmt.Errorf("api: method %s is in the registry but its service has no handler", m.Procedure)
		}
	}
	root := http.NewServeMux()
	// Every API route is unary: its body is one message, so a longer body is cut off as it is
	// read, on the short routes and the native paths alike.
	s.apiRoot = limit.Body(maxRequest, http.StripPrefix(s.basePath, http.HandlerFunc(s.serveAPI)))
	root.Handle(s.basePath+"/", s.apiRoot)
	root.HandleFunc("GET "+s.basePath+"/tunnels/{ticket}", s.serveTunnel)
	// The sign-in start is public: the client address's bucket guards it as it guards public
	// methods, before anything reads the database.
	root.Handle("POST "+s.basePath+authmethods.LoginPath, g.LimitAddress(http.HandlerFunc(authSvc.Login)))
	root.HandleFunc("GET "+s.basePath+authmethods.LoginPath, authSvc.LoginGet)
	root.HandleFunc("GET "+s.basePath+authmethods.CallbackPath, authSvc.Callback)
	root.Handle("GET "+s.basePath+"/openapi.json", apispec.Handler(reg, s.basePath))
	root.HandleFunc("GET "+s.prefix+"/healthz", s.healthz)
	root.HandleFunc("GET "+s.prefix+"/readyz", s.readyz)
	root.HandleFunc("GET "+s.prefix+"/.well-known/better-compute", s.wellKnown)
	if !opts.MetricsElsewhere {
		root.Handle("GET "+s.prefix+"/metrics", opts.Metrics.Handler())
	}
	dashboard.Mount(root, s.prefix+"/dashboard")
	s.handler = requestid.Middleware(opts.CORS.handler(root))
	return s, nil
}

// Reserved are the paths the API's handler serves for Options with this prefix and base path
// (empty ones as in Options): each subtree ends in "/", the others are exact. Every route of the
// API, its methods' included, is one of them or below one; a program that serves its own
// routes beside the API keeps them off these.
func Reserved(prefix, basePath string) []string {
	prefix = strings.TrimSuffix(prefix, "/")
	basePath = strings.TrimSuffix(basePath, "/")
	if basePath == "" {
		basePath = DefaultBasePath
	}
	return []string{
		prefix + basePath + "/", prefix + "/healthz", prefix + "/readyz", prefix + "/.well-known/better-compute",
		prefix + "/metrics", prefix + "/dashboard", prefix + "/dashboard/",
	}
}

// Registry is the method registry the API serves.
func (s *Server) Registry() *registry.Registry { return s.registry }

// BasePath is where the API is mounted.
func (s *Server) BasePath() string { return s.basePath }

// unknownMethod is the Connect error body of a JSON call to a route no method has.
type unknownMethod struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// ServeHTTP serves the API and the health endpoints.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.handler.ServeHTTP(w, r) }

// serveTunnel serves the tunnel endpoint, GET {basePath}/tunnels/{ticket}, but for the short
// routes of the tunnels group's methods (a Connect GET of tunnels/list), which go to the API.
func (s *Server) serveTunnel(w http.ResponseWriter, r *http.Request) {
	if _, ok := s.registry.ByRoute("/tunnels/" + r.PathValue("ticket")); ok {
		s.apiRoot.ServeHTTP(w, r)
		return
	}
	s.tunnels.ServeHTTP(w, r)
}

// CloseTunnels ends the tunnels this process relays (close code 1001) and refuses new ones, and
// waits until their ends are recorded or ctx ends: call it when the API stops, since the HTTP
// server's drain does not cover WebSockets.
func (s *Server) CloseTunnels(ctx context.Context) { s.tunnels.CloseAll(ctx) }

// serveAPI receives paths below the base path: a short route is rewritten to its procedure path,
// a JSON request with fields its method does not have is refused (strictjson.go), and the
// Connect handlers answer.
func (s *Server) serveAPI(w http.ResponseWriter, r *http.Request) {
	m, ok := s.registry.ByRoute(r.URL.Path)
	if ok {
		r.URL.Path = m.Procedure
		r.URL.RawPath = ""
	} else {
		m, ok = s.registry.ByProcedure(r.URL.Path)
	}
	if ok && s.refuseUnknownJSON(w, r, m) {
		return
	}
	if !ok && strings.HasPrefix(r.Header.Get("Content-Type"), "application/json") {
		if _, pattern := s.api.Handler(r); pattern == "" {
			// No such method (or its module is not enabled): 404, which Connect clients read as
			// unimplemented, with a Connect error body that says so to a person with curl
			// rather than the mux's plain text.
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusNotFound)
			_ = json.NewEncoder(w).Encode(unknownMethod{Code: connect.CodeUnimplemented.String(), Message: "no API method at " + s.basePath + r.URL.Path})
			return
		}
	}
	s.api.ServeHTTP(w, r)
}
