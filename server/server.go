// Package server is the api role: the Connect API under the base path, with every method in the
// registry reachable both at its short route POST {basePath}/{group}/{name} (JSON for curl and
// browsers) and at its native procedure path (for generated clients and buf curl), plus the
// health endpoints.
package server

import (
	"fmt"
	"log/slog"
	"net/http"
	"strings"

	"connectrpc.com/connect"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/better-compute/better-compute/gen/go/bettercompute/system/v1/systemv1connect"
	"github.com/better-compute/better-compute/migrate"
	"github.com/better-compute/better-compute/server/registry"
	"github.com/better-compute/better-compute/server/system"
)

// DefaultBasePath is where the API is mounted unless configured otherwise.
const DefaultBasePath = "/api"

// Options configure the API.
type Options struct {
	// BasePath prefixes every API route; DefaultBasePath when empty.
	BasePath string
	// Pool is the database every handler uses.
	Pool *pgxpool.Pool
	// TrustDomain is the machine PKI's SPIFFE trust domain, empty before `pki init`.
	TrustDomain string
	// Logger receives request and lifecycle logs.
	Logger *slog.Logger
}

// Server is the API's HTTP handler.
type Server struct {
	basePath string
	registry *registry.Registry
	api      *http.ServeMux // native procedure paths, below the base path
	root     *http.ServeMux
	pool     *pgxpool.Pool
	log      *slog.Logger
}

// New builds the API from the method registry and checks that every registered method has a
// handler.
func New(opts Options) (*Server, error) {
	reg, err := registry.FromGlobal()
	if err != nil {
		return nil, err
	}
	s := &Server{
		basePath: strings.TrimSuffix(opts.BasePath, "/"),
		registry: reg,
		api:      http.NewServeMux(),
		root:     http.NewServeMux(),
		pool:     opts.Pool,
		log:      opts.Logger,
	}
	if opts.BasePath == "" {
		s.basePath = DefaultBasePath
	}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	handlerOpts := []connect.HandlerOption{}
	mounted := map[string]bool{}
	mount := func(path string, h http.Handler) {
		s.api.Handle(path, h)
		mounted[path] = true
	}
	mount(systemv1connect.NewSystemServiceHandler(system.New(opts.TrustDomain), handlerOpts...))

	for _, m := range reg.Methods() {
		svc := m.Procedure[:strings.LastIndex(m.Procedure, "/")+1]
		if !mounted[svc] {
			return nil, fmt.Errorf("api: method %s is in the registry but its service has no handler", m.Procedure)
		}
	}
	s.root.Handle(s.basePath+"/", http.StripPrefix(s.basePath, http.HandlerFunc(s.serveAPI)))
	s.root.HandleFunc("GET /healthz", s.healthz)
	s.root.HandleFunc("GET /readyz", s.readyz)
	return s, nil
}

// Registry is the method registry the API serves.
func (s *Server) Registry() *registry.Registry { return s.registry }

// BasePath is where the API is mounted.
func (s *Server) BasePath() string { return s.basePath }

// ServeHTTP serves the API and the health endpoints.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.root.ServeHTTP(w, r) }

// serveAPI receives paths below the base path: a short route is rewritten to its procedure path,
// and either way the Connect handlers answer.
func (s *Server) serveAPI(w http.ResponseWriter, r *http.Request) {
	if m, ok := s.registry.ByRoute(r.URL.Path); ok {
		r.URL.Path = m.Procedure
		r.URL.RawPath = ""
	}
	s.api.ServeHTTP(w, r)
}

func (s *Server) healthz(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	_, _ = w.Write([]byte("ok\n"))
}

// readyz answers 200 when the database answers and its schema is current, so a load balancer
// sends no traffic to a process that cannot serve it.
func (s *Server) readyz(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	if s.pool == nil {
		http.Error(w, "no database configured", http.StatusServiceUnavailable)
		return
	}
	m, err := migrate.New(s.pool)
	if err == nil {
		var current bool
		if current, err = m.Current(r.Context()); err == nil && !current {
			err = fmt.Errorf("schema has pending migrations: run better-compute migrate")
		}
	}
	if err != nil {
		s.log.WarnContext(r.Context(), "not ready", "err", err)
		http.Error(w, "not ready: "+err.Error(), http.StatusServiceUnavailable)
		return
	}
	_, _ = w.Write([]byte("ready\n"))
}
