package compute

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/better-compute/better-compute/internal/auth"
	"github.com/better-compute/better-compute/internal/config"
	"github.com/better-compute/better-compute/internal/database"
	"github.com/better-compute/better-compute/internal/doctor"
	"github.com/better-compute/better-compute/internal/migrate"
	"github.com/better-compute/better-compute/internal/moduleset"
	"github.com/better-compute/better-compute/internal/process"
	"github.com/better-compute/better-compute/module"
)

// Config builds a deployment. Everything the configuration file can say (IAM, limits, rate
// limits, the gateway, retention, …) comes from File (every key is in better-compute.example.yaml); the
// fields below override it.
type Config struct {
	// File is a configuration file, the one `better-compute serve --config` reads; empty
	// starts from the defaults.
	File string
	// Environ is the environment the file's ${NAME} references and the BETTER_COMPUTE_*
	// variables are read from (os.Environ() to read the process's); nil reads none.
	Environ []string
	// Pool is the database. When nil, DatabaseURL (or the file's database.url) is opened, and
	// Close closes it.
	Pool        *pgxpool.Pool
	DatabaseURL string
	// Secret is the deployment secret: it seals the PKI and derives the other keys. Required,
	// here or in the file.
	Secret string
	// BaseURL is the public URL callers reach the API at, for links and discovery.
	BaseURL string
	// Prefix is the path the program mounts Handler under, "/compute" for example: every route
	// of the API (the API itself at Prefix+"/api", health, discovery, metrics, dashboard) is
	// below it.
	Prefix string
	// Listen, when set (host:port), is where the API role listens by itself; when empty the
	// program serves Handler.
	Listen string
	// Modules are the modules compiled into the program; the configuration's modules key enables
	// them by name, with their sections, as serve does.
	Modules []module.Info
	// Routes are the program's own routes, served by Handler beside the API. One that would
	// take a path of the API's is a clash: Doctor reports it, and Start refuses to run.
	Routes []Route
	// Logger receives the roles' logs; the file's log settings on standard error when nil.
	Logger *slog.Logger
}

// Deployment is one deployment of the control plane, built by New.
type Deployment struct {
	cfg     *config.Config
	pool    *pgxpool.Pool
	ownPool bool
	set     moduleset.Set
	prefix  string
	listen  string
	routes  []Route
	log     *slog.Logger

	api     atomic.Pointer[http.Handler]
	started atomic.Bool
	done    chan struct{}
	err     error // Start's roles' error, once done is closed
}

// New checks c and builds the deployment: the configuration loaded and validated, the database
// opened, the modules enabled and configured. It starts nothing and changes nothing in the
// database; a problem is an error naming its key, as serve's are.
func New(ctx context.Context, c Config) (*Deployment, error) {
	override := func(cfg *config.Config) {
		if c.DatabaseURL != "" {
			cfg.Database.URL = c.DatabaseURL
		}
		if c.Secret != "" {
			cfg.Secret = c.Secret
		}
		if c.BaseURL != "" {
			cfg.BaseURL = c.BaseURL
		}
		if c.Listen != "" {
			host, port, err := net.SplitHostPort(c.Listen)
			if p, perr := strconv.Atoi(port); err == nil && perr == nil {
				cfg.Host, cfg.Port = host, p
			}
		}
	}
	base := config.Default()
	override(base)
	cfg, err := config.LoadOver(base, c.File, c.Environ)
	if err != nil {
		return nil, err
	}
	override(cfg)
	if c.Listen != "" {
		if _, _, err := net.SplitHostPort(c.Listen); err != nil {
			return nil, fmt.Errorf("listen: %w", err)
		}
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	infos := moduleset.Registry(c.Modules)
	if err := infos.Validate(); err != nil {
		return nil, err
	}
	set, err := infos.Enable(cfg.Modules)
	if err != nil {
		return nil, err
	}
	if err := validRoutes(c.Routes); err != nil {
		return nil, err
	}
	d := &Deployment{
		cfg: cfg, pool: c.Pool, set: set, prefix: strings.TrimSuffix(c.Prefix, "/"), listen: c.Listen,
		routes: slices.Clone(c.Routes), log: c.Logger, done: make(chan struct{}),
	}
	if d.log == nil {
		d.log = process.NewLogger(cfg.Log, os.Stderr)
	}
	if d.pool == nil {
		if err := cfg.RequireDatabase(); err != nil {
			return nil, err
		}
		if d.pool, err = database.OpenPool(ctx, cfg.Database.URL, database.PoolOptions{MaxConns: cfg.Database.MaxConns}); err != nil {
			return nil, err
		}
		d.ownPool = true
	}
	return d, nil
}

// Modules are the names of the enabled modules, in the configuration's order.
func (d *Deployment) Modules() []string { return d.set.Names() }

// Migrate applies the pending migrations of the core and then of every enabled module, each in
// its own transaction, under an advisory lock: several processes may run it at once.
func (d *Deployment) Migrate(ctx context.Context) error {
	return migrate.ApplyAll(ctx, d.pool, d.log, d.set.Migrations())
}

// Doctor runs the checks of `better-compute doctor`: the schema, clock, method registry, PKI,
// gateways, the running problems, every enabled module's checks and the program's routes against
// the API's ("host routes").
func (d *Deployment) Doctor(ctx context.Context) ([]module.Finding, error) {
	findings, err := doctor.Run(ctx, doctor.Options{
		Pool: d.pool, Secret: d.cfg.Secret, AllowPrivateIssuers: d.cfg.Auth.AllowPrivateIssuers,
		ModuleFiles: d.set.Files(), Checks: d.set.Checks(module.CheckDeps{Pool: d.pool, Secret: d.cfg.Secret}),
	})
	if err != nil {
		return nil, err
	}
	return append(findings, routesFinding(d.routes, d.prefix, d.cfg.BasePath)), nil
}

// Handler serves the API and the program's Routes. Mount it at Config.Prefix + "/" (or at the
// root without a prefix). Until Start has built the API role it answers 503 Service Unavailable.
func (d *Deployment) Handler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if h := d.api.Load(); h != nil {
			(*h).ServeHTTP(w, r)
			return
		}
		w.Header().Set("Retry-After", "1")
		http.Error(w, "the API is starting", http.StatusServiceUnavailable)
	})
}

// Start runs roles (RoleAPI, RoleGateway, RoleControllers, …; none means every role, the
// gateway only when gateway.listen is set) until ctx ends, and returns once they are serving, or
// with the reason they could not start. The schema must be current (Migrate). A deployment
// starts once; Wait returns when its roles have stopped.
func (d *Deployment) Start(ctx context.Context, roles ...string) error {
	if !d.started.CompareAndSwap(false, true) {
		return errors.New("compute: the deployment has already started")
	}
	for _, r := range roles {
		if !slices.Contains(config.Roles(), r) {
			return fmt.Errorf("compute: no role %q (want one of %s)", r, strings.Join(config.Roles(), ", "))
		}
	}
	if f := routesFinding(d.routes, d.prefix, d.cfg.BasePath); f.Severity == module.Error {
		return fmt.Errorf("compute: %s (%s)", f.Cause, f.Fix)
	}
	cfg := *d.cfg
	cfg.Roles = config.RoleAll
	if len(roles) > 0 {
		cfg.Roles = strings.Join(roles, ",")
	}
	opts := process.Options{
		Config: &cfg, Pool: d.pool, Logger: d.log, Modules: d.set, Prefix: d.prefix,
		Wrap: func(api http.Handler) http.Handler { return withRoutes(api, d.routes) },
	}
	if d.listen == "" {
		opts.Embed = func(h http.Handler) { d.api.Store(&h) }
	}
	ready := make(chan struct{})
	var once sync.Once
	opts.OnListen = func(process.Listening) { once.Do(func() { close(ready) }) }
	go func() {
		defer close(d.done)
		d.err = process.Run(ctx, opts)
	}()
	select {
	case <-ready:
		return nil
	case <-d.done:
		if d.err == nil {
			return ctx.Err()
		}
		return d.err
	}
}

// Wait blocks until the roles Start runs have stopped (after its context ends) and returns why
// they stopped, nil for a clean stop.
func (d *Deployment) Wait() error {
	if !d.started.Load() {
		return errors.New("compute: the deployment has not started")
	}
	<-d.done
	return d.err
}

// Close closes the database pool New opened (not a Config.Pool). Call it after Wait.
func (d *Deployment) Close() {
	if d.ownPool {
		d.pool.Close()
	}
}

// MintAdminKey makes an API key with the admin role of the root tenant (the operator's), named
// name, and returns its secret, shown only here: what `better-compute iam mint-admin-key` prints, for
// a program that sets up its own deployment. Only its hash is stored.
func (d *Deployment) MintAdminKey(ctx context.Context, name string) (string, error) {
	key, err := auth.MintAdminKey(ctx, d.pool, name)
	if err != nil {
		return "", err
	}
	return key.String(), nil
}
