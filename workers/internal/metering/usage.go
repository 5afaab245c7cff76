// Package usage runs the usage job "usage" (controllers role): it meters allocations still
// held up to the last UTC hour boundary, so a running lease has a usage record for every hour
// that has ended, and adds every metering record not yet counted into the hourly totals
// (usage_hourly) that usage/query reads. Allocations that end are metered when they end, in the
// transaction that ends them (capacity.EndLeases). Each record carries the GPU-seconds of it held
// on a GPU while the GPU was unhealthy (the allocation's unhealthy span, which internal/gpustate
// keeps; migration 0034), and the hourly totals their sum, so that usage/export can mark them for
// credit.
//
// Both steps are single statements that lock the rows they take (FOR UPDATE SKIP LOCKED) and
// mark them in the same statement, so a record is counted exactly once even if two processes
// ran the job at once; the job's lease only keeps it from running twice for nothing.
package metering

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/better-compute/better-compute/gen/db"
	"github.com/better-compute/better-compute/internal/jobrun"
	"github.com/better-compute/better-compute/internal/locks"
)

// Name is the job's name: its lease is "singleton:usage".
const Name = "usage"

// Defaults of Options.
const (
	DefaultInterval = time.Minute
	DefaultBatch    = 10000
)

// Options configure the job; zero values take the defaults.
type Options struct {
	// Interval between runs. Hourly totals of an hour are complete one run after the hour ends
	// (running leases are metered at the boundary).
	Interval time.Duration
	// Batch bounds the rows each statement takes.
	Batch int32
	// Now is the job's clock; nil uses the database's.
	Now    func() time.Time
	Logger *slog.Logger
}

func (o Options) withDefaults() Options {
	if o.Interval <= 0 {
		o.Interval = DefaultInterval
	}
	if o.Batch <= 0 {
		o.Batch = DefaultBatch
	}
	return o
}

// Job returns the usage job.
func Job(pool *pgxpool.Pool, opts Options) locks.Job {
	opts = opts.withDefaults()
	return locks.Job{
		Name: Name,
		Run: func(ctx context.Context, _ locks.Lock) error {
			return jobrun.Every(ctx, pool, Name, opts.Interval, opts.Logger, func(ctx context.Context) error {
				_, err := RunOnce(ctx, pool, opts)
				return err
			})
		},
	}
}

// Stats is what one run did.
type Stats struct {
	// Allocations metered up to the hour boundary, and records added into the hourly totals.
	Metered, Aggregated int64
}

// RunOnce meters held allocations up to the last hour boundary and aggregates every record not
// yet counted, in batches.
func RunOnce(ctx context.Context, pool *pgxpool.Pool, opts Options) (Stats, error) {
	opts = opts.withDefaults()
	var st Stats
	q := db.New(pool)
	now := time.Time{}
	if opts.Now != nil {
		now = opts.Now()
	} else {
		var err error
		if now, err = q.PlacerNow(ctx); err != nil {
			return st, fmt.Errorf("read the clock: %w", err)
		}
	}
	through := now.UTC().Truncate(time.Hour)
	for {
		n, err := q.MeterHeldAllocations(ctx, db.MeterHeldAllocationsParams{Through: through, Lim: opts.Batch})
		if err != nil {
			return st, fmt.Errorf("meter held allocations: %w", err)
		}
		st.Metered += n
		if n < int64(opts.Batch) {
			break
		}
	}
	for {
		n, err := q.AggregateUsage(ctx, opts.Batch)
		if err != nil {
			return st, fmt.Errorf("aggregate usage: %w", err)
		}
		st.Aggregated += n
		if n < int64(opts.Batch) {
			break
		}
	}
	return st, nil
}
