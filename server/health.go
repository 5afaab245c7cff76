package server

import (
	"encoding/json"
	"errors"
	"net/http"

	"github.com/better-compute/better-compute/internal/buildinfo"
	"github.com/better-compute/better-compute/internal/migrate"
)

// healthz answers while the process is alive.
func (s *Server) healthz(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	_, _ = w.Write([]byte("ok\n"))
}

// readyz answers 200 when the database answers and has every migration this binary knows, so a
// load balancer sends no traffic to a process that cannot serve it. A database migrated further by
// a newer release still counts as ready: migrations are forward-compatible, and a rolling deploy
// must not take every old replica out at once. Callers are anonymous, so the answer says only
// ready or not; why not is in the log and in `better-compute doctor`.
func (s *Server) readyz(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	m, err := migrate.New(s.opts.Pool)
	if err == nil {
		var current bool
		if current, err = m.Current(r.Context()); err == nil && !current {
			err = errors.New("the schema has pending migrations: run better-compute migrate")
		}
	}
	if err != nil {
		s.log.WarnContext(r.Context(), "not ready", "err", err)
		http.Error(w, "not ready", http.StatusServiceUnavailable)
		return
	}
	_, _ = w.Write([]byte("ready\n"))
}

// Discovery is the document at /.well-known/better-compute: what a client or daemon needs to
// find the API and the gateways.
type Discovery struct {
	APIBaseURL       string   `json:"apiBaseUrl,omitempty"`
	BasePath         string   `json:"basePath"`
	Version          string   `json:"version"`
	TrustDomain      string   `json:"trustDomain,omitempty"`
	GatewayEndpoints []string `json:"gatewayEndpoints,omitempty"`
}

func (s *Server) wellKnown(w http.ResponseWriter, _ *http.Request) {
	d := Discovery{
		BasePath: s.basePath, Version: buildinfo.Version,
		TrustDomain: s.opts.TrustDomain, GatewayEndpoints: s.opts.GatewayEndpoints,
	}
	if s.opts.BaseURL != "" {
		d.APIBaseURL = s.opts.BaseURL + s.basePath
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "max-age=60")
	_ = json.NewEncoder(w).Encode(d)
}
