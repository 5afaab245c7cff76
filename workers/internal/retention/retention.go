// Package retention prunes what the deployment keeps only for a while: audit rows older than
// retention.audit, finished commands older than retention.commands and outbox events older
// than retention.outbox that every healthy event sink has delivered (an event after such a
// sink's cursor stays, however old; failing webhooks park their events as dead letters and hold
// nothing), sign-in flows spent or expired an hour ago, and sign-in sessions that expired or
// were revoked more than SessionsKeep ago. It runs as the singleton job "retention" in the controllers role.
//
// It deletes in bounded batches, each statement at most Batch rows in its own short
// transaction fenced by the job's lease, so pruning a large backlog never holds many locks or
// a long transaction, and a process that lost the lease stops deleting.
package retention

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/better-compute/better-compute/gen/db"
	"github.com/better-compute/better-compute/internal/config"
	"github.com/better-compute/better-compute/internal/jobrun"
	"github.com/better-compute/better-compute/internal/locks"
)

// Name is the job's name: its lease is "singleton:retention".
const Name = "retention"

// Defaults of Options.
const (
	DefaultInterval = 10 * time.Minute
	DefaultBatch    = 1000
	// SessionsKeep is how long an ended (expired or revoked) sign-in session stays listed
	// (sessions/list shows it) before it is deleted.
	SessionsKeep = 7 * 24 * time.Hour
)

// Options configure the job; zero values take the defaults.
type Options struct {
	// Retention says how long rows are kept; a zero duration takes config.Default's.
	Retention config.Retention
	// Interval between runs (DefaultInterval).
	Interval time.Duration
	// Batch bounds the rows each statement deletes (DefaultBatch).
	Batch int32
	// Logger receives failed runs.
	Logger *slog.Logger
}

func (o Options) withDefaults() Options {
	def := config.Default().Retention
	if o.Retention.Audit <= 0 {
		o.Retention.Audit = def.Audit
	}
	if o.Retention.Commands <= 0 {
		o.Retention.Commands = def.Commands
	}
	if o.Retention.Outbox <= 0 {
		o.Retention.Outbox = def.Outbox
	}
	if o.Retention.GPUHealth <= 0 {
		o.Retention.GPUHealth = def.GPUHealth
	}
	if o.Retention.GPUUsage <= 0 {
		o.Retention.GPUUsage = def.GPUUsage
	}
	if o.Retention.Tunnels <= 0 {
		o.Retention.Tunnels = def.Tunnels
	}
	if o.Interval <= 0 {
		o.Interval = DefaultInterval
	}
	if o.Batch <= 0 {
		o.Batch = DefaultBatch
	}
	return o
}

// Job returns the retention job.
func Job(pool *pgxpool.Pool, opts Options) locks.Job {
	opts = opts.withDefaults()
	return locks.Job{
		Name: Name,
		Run: func(ctx context.Context, l locks.Lock) error {
			return jobrun.Every(ctx, pool, Name, opts.Interval, opts.Logger, func(ctx context.Context) error {
				_, err := Prune(ctx, pool, l, opts)
				return err
			})
		},
	}
}

// Pruned counts the rows one Prune deleted.
type Pruned struct {
	Audit, Commands, Outbox, Tunnels int64
	// GPUHealth are the GPU health changes deleted.
	GPUHealth int64
	// GPUUsage are the lease GPU minutes deleted.
	GPUUsage int64
	// FanOuts are the fan-outs deleted once their commands were.
	FanOuts int64
	// AuthFlows and Sessions are the sign-in flows and sessions deleted.
	AuthFlows, Sessions int64
}

// Prune deletes every row past its retention under the lease l, batch by batch, and returns
// how many it deleted. It stops with lease.ErrStale, having deleted nothing more, once l is no
// longer the current holder's lease.
func Prune(ctx context.Context, pool *pgxpool.Pool, l locks.Lock, opts Options) (Pruned, error) {
	opts = opts.withDefaults()
	var n Pruned
	var errs []error
	for _, table := range []struct {
		name  string
		count *int64
		// untilEmpty repeats the statement until it deletes nothing, rather than until it
		// deletes less than a batch: the windowed statements may delete less than a batch while
		// old rows remain (see queries/retention.sql).
		untilEmpty bool
		del        func(q *db.Queries) (int64, error)
	}{
		{"audit_events", &n.Audit, true, func(q *db.Queries) (int64, error) {
			return q.PruneAuditEvents(ctx, db.PruneAuditEventsParams{KeepMs: opts.Retention.Audit.Milliseconds(), Lim: opts.Batch})
		}},
		{"commands", &n.Commands, false, func(q *db.Queries) (int64, error) {
			return q.PruneFinishedCommands(ctx, db.PruneFinishedCommandsParams{KeepMs: opts.Retention.Commands.Milliseconds(), Lim: opts.Batch})
		}},
		{"fan_outs", &n.FanOuts, false, func(q *db.Queries) (int64, error) {
			return q.PruneFanOuts(ctx, db.PruneFanOutsParams{KeepMs: opts.Retention.Commands.Milliseconds(), Lim: opts.Batch})
		}},
		{"outbox", &n.Outbox, true, func(q *db.Queries) (int64, error) {
			return q.PruneOutbox(ctx, db.PruneOutboxParams{KeepMs: opts.Retention.Outbox.Milliseconds(), Lim: opts.Batch})
		}},
		{"tunnels", &n.Tunnels, false, func(q *db.Queries) (int64, error) {
			return q.PruneTunnels(ctx, db.PruneTunnelsParams{KeepMs: opts.Retention.Tunnels.Milliseconds(), Lim: opts.Batch})
		}},
		{"gpu_health_changes", &n.GPUHealth, true, func(q *db.Queries) (int64, error) {
			return q.PruneGPUHealthChanges(ctx, db.PruneGPUHealthChangesParams{KeepMs: opts.Retention.GPUHealth.Milliseconds(), Lim: opts.Batch})
		}},
		{"lease_gpu_minutes", &n.GPUUsage, false, func(q *db.Queries) (int64, error) {
			return q.PruneLeaseGPUMinutes(ctx, db.PruneLeaseGPUMinutesParams{KeepMs: opts.Retention.GPUUsage.Milliseconds(), Lim: opts.Batch})
		}},
		// Few rows (flows live ten minutes): one statement deletes them all, then one that
		// deletes nothing ends the loop.
		{"auth_flows", &n.AuthFlows, true, func(q *db.Queries) (int64, error) {
			return q.DeleteEndedAuthFlows(ctx)
		}},
		{"sessions", &n.Sessions, false, func(q *db.Queries) (int64, error) {
			return q.PruneEndedSessions(ctx, db.PruneEndedSessionsParams{KeepMs: SessionsKeep.Milliseconds(), Lim: opts.Batch})
		}},
	} {
		for {
			deleted, err := fenced(ctx, pool, l, table.del)
			*table.count += deleted
			if errors.Is(err, locks.ErrStale) {
				return n, err
			}
			if err != nil {
				// Go on with the other tables; report every failure at the end.
				errs = append(errs, fmt.Errorf("prune %s: %w", table.name, err))
				break
			}
			if deleted == 0 || (!table.untilEmpty && deleted < int64(opts.Batch)) {
				break
			}
		}
	}
	return n, errors.Join(errs...)
}

// fenced runs del in a transaction guarded by the lease l.
func fenced(ctx context.Context, pool *pgxpool.Pool, l locks.Lock, del func(q *db.Queries) (int64, error)) (int64, error) {
	var n int64
	err := locks.InTx(ctx, pool, l, func(tx pgx.Tx) error {
		var err error
		n, err = del(db.New(tx))
		return err
	})
	if err != nil {
		return 0, err
	}
	return n, nil
}
