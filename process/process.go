// Package process runs the roles of one better-compute process, as its configuration names them:
// `serve` and `dev` both end here, so a role runs the same way in production and on a laptop.
package process

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/better-compute/better-compute/config"
	"github.com/better-compute/better-compute/server"
	"github.com/better-compute/better-compute/server/iam"
)

// Options configure a process.
type Options struct {
	Config *config.Config
	// Pool is the migrated database.
	Pool   *pgxpool.Pool
	Logger *slog.Logger
	// OnListen, when set, is called with the API's base URL once it accepts connections.
	OnListen func(apiURL string)
}

// available lists the roles this build can run; the others are accepted and reported.
var available = map[string]bool{config.RoleAPI: true}

// Run starts the configured roles and blocks until ctx ends and they have stopped.
func Run(ctx context.Context, opts Options) error {
	cfg, log := opts.Config, opts.Logger
	roles := cfg.RoleSet()
	for _, r := range config.Roles() {
		if roles[r] && !available[r] {
			log.Warn("role is not available in this build yet; skipping it", "role", r)
		}
	}
	if _, err := iam.EnsureRootTenant(ctx, opts.Pool); err != nil {
		return err
	}
	if !roles[config.RoleAPI] {
		<-ctx.Done()
		return nil
	}
	var gateways []string
	if cfg.Gateway.PublicEndpoint != "" {
		gateways = []string{cfg.Gateway.PublicEndpoint}
	}
	api, err := server.New(server.Options{
		Pool: opts.Pool, Secret: cfg.Secret, BasePath: cfg.BasePath, BaseURL: cfg.BaseURL,
		TrustDomain: cfg.TrustDomain, GatewayEndpoints: gateways, Logger: log,
		CORS: server.CORSOptions{AllowedOrigins: cfg.CORS.AllowedOrigins, AllowCredentials: cfg.CORS.AllowCredentials},
	})
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", net.JoinHostPort(cfg.Host, strconv.Itoa(cfg.Port)))
	if err != nil {
		return fmt.Errorf("api: listen: %w", err)
	}
	url := "http://" + displayAddr(ln.Addr()) + api.BasePath()
	log.Info("api listening", "url", url, "methods", len(api.Registry().Methods()))
	if opts.OnListen != nil {
		opts.OnListen(url)
	}
	return server.Serve(ctx, ln, api, log)
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
	tcp, ok := a.(*net.TCPAddr)
	if !ok {
		return a.String()
	}
	host := tcp.IP.String()
	if tcp.IP.IsUnspecified() {
		host = "127.0.0.1"
	}
	return net.JoinHostPort(host, strconv.Itoa(tcp.Port))
}
