// Package idlejob is the idle leases job (controllers role): every minute it applies each pool's
// idle policy to the pool's placed leases, from the utilisation the gateways roll up per lease
// (lease_gpu_minutes): a lease whose GPUs' mean utilisation stayed under the threshold for the
// window is told (lease.idle), and with the release action released once the grace period
// passed and it is still idle; a lease whose GPUs got busy again is idle no more. With the lend
// action the lease's GPUs are lent instead (LendLease: its allocations end, lease_loans keeps
// them) and the pool's placer is woken to place other leases on them; a lent lease whose tenant
// opened a tunnel to one of its nodes wakes, where the policy counts tunnels as use, and so does
// one whose lent GPUs, held by no one, show utilisation at or above the threshold; the placer
// gives it its GPUs back (workers/internal/placer, loans.go). Leases created with
// idle_opt_out are never judged.
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
	// Told are the leases newly found idle, Released those released, Busy those idle no more,
	// Lent those whose GPUs were lent, Woken lent ones that woke (a tunnel, or their lent GPUs
	// busy while no one held them).
	Told, Released, Busy, Lent, Woken int
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
		if err != nil {
			return st, err
		}
		if n < int(opts.Batch) {
			break
		}
	}
	return st, wakeTunnelled(ctx, pool, opts, &st)
}

// poolsOf and poolsOfBusy are the pools of woken leases, one per lease.
func poolsOf(rows []db.WakeTunnelledLoansRow) []uuid.UUID {
	out := make([]uuid.UUID, len(rows))
	for i, r := range rows {
		out[i] = r.PoolID
	}
	return out
}

func poolsOfBusy(rows []db.WakeBusyLoansRow) []uuid.UUID {
	out := make([]uuid.UUID, len(rows))
	for i, r := range rows {
		out[i] = r.PoolID
	}
	return out
}

// wakeTunnelled wakes the lent leases whose tenant's tunnels to their nodes count as use, and
// those whose lent GPUs, held by no one, got busy (the holder uses them anyway), and queues their
// pools' placers.
func wakeTunnelled(ctx context.Context, pool *pgxpool.Pool, opts Options, st *Stats) error {
	return pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		q := db.New(tx)
		now, err := clock(ctx, q, opts)
		if err != nil {
			return err
		}
		tunnelled, err := q.WakeTunnelledLoans(ctx, now)
		if err != nil {
			return fmt.Errorf("wake lent leases with tunnels: %w", err)
		}
		busy, err := q.WakeBusyLoans(ctx, now)
		if err != nil {
			return fmt.Errorf("wake lent leases whose GPUs got busy: %w", err)
		}
		pools := map[uuid.UUID]bool{}
		for _, poolID := range append(poolsOf(tunnelled), poolsOfBusy(busy)...) {
			st.Woken++
			if !pools[poolID] {
				pools[poolID] = true
				if err := capacity.EnqueuePlacer(ctx, q, poolID); err != nil {
					return err
				}
			}
		}
		return nil
	})
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
	isIdle := p.Sampled(r.Minutes) && r.UtilMean < p.MinUtilization && !r.TunnelActive
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
		at := now.Add(p.Grace())
		switch p.Action {
		case idle.ActionRelease:
			ev.ReleaseAt = &at
		case idle.ActionLend:
			ev.LendAt = &at
		}
		if err := q.SetLeaseIdleSince(ctx, db.SetLeaseIdleSinceParams{ID: r.ID, IdleSince: &now}); err != nil {
			return err
		}
		if err := event.Emit(ctx, q, r.TenantID, ev); err != nil {
			return err
		}
		if p.Action == idle.ActionNotify || p.Grace() > 0 {
			return nil
		}
	case p.Action == idle.ActionNotify || now.Before(r.IdleSince.Add(p.Grace())):
		return nil
	}
	if p.Action == idle.ActionLend {
		return lend(ctx, q, r, now, st)
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

// lend lends an idle lease's GPUs (event lease.lent) and wakes its pool's placer to place other
// leases on them.
func lend(ctx context.Context, q *db.Queries, r db.IdleCandidatesRow, now time.Time, st *Stats) error {
	devices, err := q.LendLease(ctx, db.LendLeaseParams{LeaseID: r.ID, Now: now})
	if err != nil {
		return fmt.Errorf("lend: %w", err)
	}
	if len(devices) == 0 {
		return nil // holds no GPUs: nothing to lend
	}
	st.Lent++
	if err := event.Emit(ctx, q, r.TenantID, event.LeaseLent{ID: r.ID, PoolID: r.PoolID, GPUs: int32(len(devices)), Since: now}); err != nil {
		return err
	}
	return capacity.EnqueuePlacer(ctx, q, r.PoolID)
}
