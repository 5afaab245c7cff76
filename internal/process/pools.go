package process

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/better-compute/better-compute/internal/config"
	"github.com/better-compute/better-compute/internal/database"
)

// The roles of a process each get a pool of their own beside the shared one (database.maxConns,
// which the API's requests use): a surge of one role cannot take every connection from the
// others. Measured with `dev` all-in-one at 100 and 500 commands/s: the creates, queued on
// their tenant's commandsPerMinute lock while holding connections, took all four of the one
// shared pool, so the gateway waited for a connection to dispatch, ack and record results and
// the commands were never delivered; the workers lost their locks the same way.
const (
	// defaultGatewayConns sizes the gateway's pool when database.gatewayMaxConns is 0: its
	// dispatch, liveness and watch loops, and the acks, results and events of its sessions.
	defaultGatewayConns = 8
	// defaultWorkersConns sizes the worker roles' pool when database.workersMaxConns is 0.
	defaultWorkersConns = 8
	// defaultNotifierConns sizes the notifier's pool when database.notifierMaxConns is 0: its
	// pokes are batched, one round in flight (gateway.Notifier), and revocations are rare.
	defaultNotifierConns = 2
)

// rolePool opens the pool of one role, of size connections (def when 0), named in
// pg_stat_activity as better-compute-<name>. Without a database URL (a caller, such as a test,
// that built its own pool) the role shares that pool.
func rolePool(ctx context.Context, cfg *config.Config, shared *pgxpool.Pool, name string, size, def int) (*pgxpool.Pool, error) {
	if cfg.Database.URL == "" {
		return shared, nil
	}
	if size == 0 {
		size = def
	}
	pool, err := database.OpenPool(ctx, cfg.Database.URL, database.PoolOptions{MaxConns: size, Name: name})
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return pool, nil
}

// closeOwn closes pool unless it is the shared one, which its opener closes.
func closeOwn(pool, shared *pgxpool.Pool) {
	if pool != shared {
		pool.Close()
	}
}
