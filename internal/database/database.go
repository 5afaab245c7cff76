// Package database opens the PostgreSQL connection pool that every role of a process shares.
package database

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/better-compute/better-compute/internal/tracing"
)

// ErrNoURL means no database was configured.
var ErrNoURL = errors.New("no database URL: set BETTER_COMPUTE_DATABASE_URL or --database-url")

// connectTimeout bounds each connection attempt when the URL sets none, so an unreachable host
// fails in seconds instead of hanging.
const connectTimeout = 10 * time.Second

// DefaultMaxConns is a pool's size when neither the configuration (database.maxConns) nor the
// URL (pool_max_conns) sets one. pgx's own default, four on a two-core machine, made a process's
// API requests, gateway and workers queue behind each other for a connection; PostgreSQL's
// default of 100 connections leaves room for several processes of this size.
const DefaultMaxConns = 16

// PoolOptions shape a pool beyond what its URL says.
type PoolOptions struct {
	// MaxConns caps the pool's connections; 0 keeps pool_max_conns of the URL, or else
	// DefaultMaxConns.
	MaxConns int
	// Name is appended to the application_name of the connections ("better-compute-<Name>"),
	// so pg_stat_activity tells the pools apart; the URL's own application_name wins.
	Name string
}

// Open parses url, connects, and checks the server answers, with the default PoolOptions.
func Open(ctx context.Context, url string) (*pgxpool.Pool, error) {
	return OpenPool(ctx, url, PoolOptions{})
}

// OpenPool parses url, connects, and checks the server answers. Errors name the host and
// database but never the password. Statements run inside a span become child spans once tracing
// is on (tracing.QueryTracer); while it is off the tracer costs an atomic load per statement.
func OpenPool(ctx context.Context, url string, opts PoolOptions) (*pgxpool.Pool, error) {
	if url == "" {
		return nil, ErrNoURL
	}
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		// pgx redacts the password from its parse errors.
		return nil, fmt.Errorf("database URL: %w", err)
	}
	if cfg.ConnConfig.ConnectTimeout == 0 {
		cfg.ConnConfig.ConnectTimeout = connectTimeout
	}
	if _, ok := cfg.ConnConfig.RuntimeParams["application_name"]; !ok {
		name := "better-compute"
		if opts.Name != "" {
			name += "-" + opts.Name
		}
		cfg.ConnConfig.RuntimeParams["application_name"] = name
	}
	// ParseConfig consumes pool_max_conns, so the URL itself says whether it set one.
	switch {
	case opts.MaxConns > 0:
		cfg.MaxConns = int32(min(opts.MaxConns, math.MaxInt32))
	case !strings.Contains(url, "pool_max_conns"):
		cfg.MaxConns = DefaultMaxConns
	}
	cfg.AfterConnect = encodeUUIDs
	if cfg.ConnConfig.Tracer == nil {
		cfg.ConnConfig.Tracer = tracing.QueryTracer{}
	}
	where := Describe(cfg.ConnConfig.Config)
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("connect to database %s: %w", where, err)
	}
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("connect to database %s: %w", where, err)
	}
	return pool, nil
}

// Describe names a database as host:port/name, for messages.
func Describe(cfg pgconn.Config) string {
	return fmt.Sprintf("%s:%d/%s", cfg.Host, cfg.Port, cfg.Database)
}
