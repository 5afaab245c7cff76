// Package database opens the PostgreSQL connection pool that every role of a process shares.
package database

import (
	"context"
	"errors"
	"fmt"
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

// Open parses url, connects, and checks the server answers. Errors name the host and database
// but never the password. Statements run inside a span become child spans once tracing is on
// (tracing.QueryTracer); while it is off the tracer costs an atomic load per statement.
func Open(ctx context.Context, url string) (*pgxpool.Pool, error) {
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
		cfg.ConnConfig.RuntimeParams["application_name"] = "better-compute"
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
