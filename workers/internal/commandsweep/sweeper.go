// Package commandsweep runs the CommandSweeper, which re-queues commands a node never
// acknowledged and expires those whose deadline passed, by the transitions internal/command
// allows.
package commandsweep

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/better-compute/better-compute/gen/db"
	"github.com/better-compute/better-compute/internal/jobrun"
	"github.com/better-compute/better-compute/internal/locks"
)

// SweeperName is the CommandSweeper's job name; it runs under the lease "singleton:command-sweeper"
// and records its runs in job_runs under this name.
const SweeperName = "command-sweeper"

// Defaults of SweeperOptions.
const (
	DefaultSweepInterval = time.Second
	DefaultAckTimeout    = 30 * time.Second
	DefaultSweepBatch    = 1000
)

// SweeperOptions configure the CommandSweeper; zero values take the defaults.
type SweeperOptions struct {
	// Interval between sweeps (DefaultSweepInterval). A sweep that fills a batch is followed by
	// another at once.
	Interval time.Duration
	// AckTimeout is how long a sent command may wait for its node's ack before it is sent again
	// (DefaultAckTimeout).
	AckTimeout time.Duration
	// Batch bounds the rows each statement of a sweep changes (DefaultSweepBatch).
	Batch int32
	// Logger receives failed sweeps.
	Logger *slog.Logger
}

func (o SweeperOptions) withDefaults() SweeperOptions {
	if o.Interval <= 0 {
		o.Interval = DefaultSweepInterval
	}
	if o.AckTimeout <= 0 {
		o.AckTimeout = DefaultAckTimeout
	}
	if o.Batch <= 0 {
		o.Batch = DefaultSweepBatch
	}
	return o
}

// Swept counts what one sweep changed.
type Swept struct {
	// Expired commands passed their deadline before finishing.
	Expired int64
	// Requeued commands were sent but not acked within the ack timeout, and are pending again.
	Requeued int64
}

// Sweeper returns the CommandSweeper, for the controllers role: every interval it expires
// unfinished commands whose deadline passed and re-queues sent commands not acked within the
// ack timeout, each in one bounded statement, in a transaction fenced by the job's lease.
func Sweeper(pool *pgxpool.Pool, opts SweeperOptions) locks.Job {
	opts = opts.withDefaults()
	return locks.Job{
		Name: SweeperName,
		Run: func(ctx context.Context, l locks.Lock) error {
			return jobrun.Every(ctx, pool, SweeperName, opts.Interval, opts.Logger, func(ctx context.Context) error {
				// Drain a backlog batch by batch, each in its own short transaction.
				for {
					n, err := Sweep(ctx, pool, l, opts)
					if err != nil || (n.Expired < int64(opts.Batch) && n.Requeued < int64(opts.Batch)) {
						return err
					}
				}
			})
		},
	}
}

// Sweep runs one sweep under the lease l: it returns lease.ErrStale, and changes nothing, when
// l is no longer the current holder's lease.
func Sweep(ctx context.Context, pool *pgxpool.Pool, l locks.Lock, opts SweeperOptions) (Swept, error) {
	opts = opts.withDefaults()
	var n Swept
	err := locks.InTx(ctx, pool, l, func(tx pgx.Tx) error {
		q := db.New(tx)
		var err error
		// Expire first, so an overdue command is expired rather than sent again.
		if n.Expired, err = q.ExpireOverdueCommands(ctx, opts.Batch); err != nil {
			return fmt.Errorf("expire overdue commands: %w", err)
		}
		if n.Requeued, err = q.RequeueUnackedCommands(ctx, db.RequeueUnackedCommandsParams{
			AckTimeoutMs: opts.AckTimeout.Milliseconds(), Lim: opts.Batch,
		}); err != nil {
			return fmt.Errorf("re-queue unacked commands: %w", err)
		}
		return nil
	})
	if err != nil {
		return Swept{}, err
	}
	return n, nil
}
