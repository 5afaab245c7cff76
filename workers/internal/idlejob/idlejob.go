// Package idlejob is the idle leases job (controllers role): every minute it applies each pool's
// idle policy to the pool's placed leases, from the utilisation the gateways roll up per lease
// (lease_gpu_minutes): a lease whose GPUs' mean utilisation stayed under the threshold for the
// window is told (lease.idle), and with the release action released once the grace period
// passed and it is still idle; a lease whose GPUs got busy again is idle no more.
package idlejob

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/better-compute/better-compute/gen/db"
	"github.com/better-compute/better-compute/internal/capacity"
	"github.com/better-compute/better-compute/internal/event"
	"github.com/better-compute/better-compute/internal/idle"
	"github.com/better-compute/better-compute/internal/jobrun"
	"github.com/better-compute/better-compute/internal/locks"
)

// Name is the job's name.
const Name = "leases.idle"

// Defaults of Options.
const (
	DefaultInterval = time.Minute
	DefaultBatch    = 500
)

// Options configure the job.
type Options struct {
	Interval time.Duration
	// Batch bounds the leases one statement reads.
	Batch int32
	// Now is the clock; nil uses the database's.
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
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return o
}

// Job returns the idle leases job.
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
	// Told are the leases newly found idle, Released those released, Busy those idle no more.
	Told, Released, Busy int
}

// RunOnce applies the pools' idle policies once, a batch of leases per transaction.
func RunOnce(ctx context.Context, pool *pgxpool.Pool, opts Options) (Stats, error) {
	opts = opts.withDefaults()
	var st Stats
	after := uuid.Nil
	for {
		var n int
		err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
			q := db.New(tx)
			now, err := clock(ctx, q, opts)
			if err != nil {
				return err
			}
			rows, err := q.IdleCandidates(ctx, db.IdleCandidatesParams{Now: now, After: after, Lim: opts.Batch})
			if err != nil {
				return fmt.Errorf("read idle candidates: %w", err)
			}
			n = len(rows)
			for _, r := range rows {
				after = r.ID
				if err := apply(ctx, q, r, now, &st); err != nil {
					return fmt.Errorf("lease %s: %w", r.ID, err)
				}
			}
			return nil
		})
		if err != nil || n < int(opts.Batch) {
			return st, err
		}
	}
}

func clock(ctx context.Context, q *db.Queries, opts Options) (time.Time, error) {
	if opts.Now != nil {
		return opts.Now(), nil
	}
	t, err := q.PlacerNow(ctx)
	if err != nil {
		return t, fmt.Errorf("read the clock: %w", err)
	}
	return t, nil
}

// apply judges one lease under its pool's policy.
func apply(ctx context.Context, q *db.Queries, r db.IdleCandidatesRow, now time.Time, st *Stats) error {
	p, err := idle.Decode(r.IdlePolicy)
	if err != nil || p.IsZero() {
		return err
	}
	isIdle := p.Sampled(r.Minutes) && r.UtilMean < p.MinUtilization
	switch {
	case !isIdle && r.IdleSince != nil:
		st.Busy++
		return q.SetLeaseIdleSince(ctx, db.SetLeaseIdleSinceParams{ID: r.ID})
	case !isIdle:
		return nil
	case r.IdleSince == nil:
		st.Told++
		ev := event.LeaseIdle{
			ID: r.ID, PoolID: r.PoolID, MeanUtilization: r.UtilMean, MinUtilization: p.MinUtilization,
			Window: p.Window().String(), Action: p.Action,
		}
		if p.Action == idle.ActionRelease {
			at := now.Add(p.Grace())
			ev.ReleaseAt = &at
		}
		if err := q.SetLeaseIdleSince(ctx, db.SetLeaseIdleSinceParams{ID: r.ID, IdleSince: &now}); err != nil {
			return err
		}
		if err := event.Emit(ctx, q, r.TenantID, ev); err != nil {
			return err
		}
		if p.Action != idle.ActionRelease || p.Grace() > 0 {
			return nil
		}
	case p.Action != idle.ActionRelease || now.Before(r.IdleSince.Add(p.Grace())):
		return nil
	}
	st.Released++
	reason := fmt.Sprintf("idle: mean GPU utilisation %.1f%% over %v, under %.1f%%", r.UtilMean, p.Window(), p.MinUtilization)
	if _, err := capacity.EndLeases(ctx, q, []uuid.UUID{r.ID}, capacity.LeaseReleased, reason, &now, func(t uuid.UUID, ev event.Event) error {
		return event.Emit(ctx, q, t, ev)
	}); err != nil {
		return err
	}
	return capacity.EnqueuePlacer(ctx, q, r.PoolID)
}
