package placer

import (
	"context"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/better-compute/better-compute/gen/db"
	"github.com/better-compute/better-compute/internal/capacity"
	"github.com/better-compute/better-compute/internal/event"
)

// returnLoans gives the pool's lent leases that woke (leases/wake, or the idle job) their GPUs
// back, in one transaction: the leases that borrowed them and are not preempted yet are
// preempted with the pool's preemption grace (reason naming the lease that woke); a waking lease
// whose lent GPUs no allocation holds any more gets allocations on the same devices again, its
// loan ends and lease.woke is emitted. Until then the planner sees those GPUs as held
// (PlacerDevices), so nothing new is placed on them. It runs after expire, which ends borrowers
// whose grace is over, and before placing. It returns how many borrowers it preempted and how
// many leases got their GPUs back.
func (p *Placer) returnLoans(ctx context.Context, pl db.PlacerPoolRow, now time.Time) (preempted, returned int, err error) {
	err = pgx.BeginFunc(ctx, p.pool, func(tx pgx.Tx) error {
		preempted, returned = 0, 0
		q := db.New(tx)
		waking, err := q.WakingLoans(ctx, pl.ID)
		if err != nil || len(waking) == 0 {
			return err
		}
		var ev event.Batch
		var holding []uuid.UUID
		for _, w := range waking {
			if w.Held > 0 {
				holding = append(holding, w.ID)
			}
		}
		if len(holding) > 0 {
			if preempted, err = p.preemptBorrowers(ctx, q, pl, now, holding, &ev); err != nil {
				return err
			}
			// With no grace period the borrowers ended above: count again.
			if preempted > 0 && pl.PreemptionGraceMs == 0 {
				if waking, err = q.WakingLoans(ctx, pl.ID); err != nil {
					return err
				}
			}
		}
		for _, w := range waking {
			if w.Held > 0 {
				continue
			}
			n, err := q.ReturnLoan(ctx, db.ReturnLoanParams{LeaseID: w.ID, Now: now})
			if err != nil {
				return fmt.Errorf("give lease %s its GPUs back: %w", w.ID, err)
			}
			if err := q.EndLoans(ctx, []uuid.UUID{w.ID}); err != nil {
				return fmt.Errorf("end the loan of lease %s: %w", w.ID, err)
			}
			returned++
			e := event.LeaseWoke{ID: w.ID, PoolID: pl.ID, GPUs: int32(n)}
			if w.LentSince != nil {
				e.LentSince = *w.LentSince
			}
			if w.WakeRequestedAt != nil {
				e.WakeRequestedAt = *w.WakeRequestedAt
			}
			if err := ev.Add(w.TenantID, e); err != nil {
				return err
			}
		}
		return ev.Emit(ctx, q)
	})
	if err != nil {
		return 0, 0, fmt.Errorf("return lent GPUs: %w", err)
	}
	return preempted, returned, nil
}

// preemptBorrowers preempts the leases that hold GPUs lent by holders, with the pool's
// preemption grace, as the placer preempts for quotas: lease.preempted to the borrower's tenant,
// and to the pool's owner when that is another tenant.
func (p *Placer) preemptBorrowers(ctx context.Context, q *db.Queries, pl db.PlacerPoolRow, now time.Time, holders []uuid.UUID, ev *event.Batch) (int, error) {
	rows, err := q.LoanBorrowers(ctx, holders)
	if err != nil {
		return 0, fmt.Errorf("read borrowers: %w", err)
	}
	byHolder := map[uuid.UUID][]uuid.UUID{}
	for _, r := range rows {
		byHolder[r.HolderID] = append(byHolder[r.HolderID], r.ID)
	}
	var ended []uuid.UUID
	n := 0
	for holder, ids := range byHolder {
		reason := fmt.Sprintf("preempted: lease %s woke and takes back the idle GPUs it lent", holder)
		pre, err := q.PreemptPoolLeases(ctx, db.PreemptPoolLeasesParams{Now: now, Reason: reason, GraceMs: pl.PreemptionGraceMs, Ids: ids})
		if err != nil {
			return 0, fmt.Errorf("preempt borrowers: %w", err)
		}
		for _, r := range pre {
			e := event.LeasePreempted{
				LeaseChange: event.LeaseChange{
					ID: r.ID, PoolID: r.PoolID, State: string(capacity.LeasePreempted), PreviousState: string(capacity.LeasePlaced),
					Reason: reason, EndTime: r.EndsAt,
				},
				TenantID: r.TenantID, Priority: r.Priority, Borrowing: r.Borrowing,
			}
			if err := ev.Add(r.TenantID, e); err != nil {
				return 0, err
			}
			if r.TenantID != pl.TenantID {
				owners := e
				owners.ForLeaseID = &holder
				if err := ev.Add(pl.TenantID, owners); err != nil {
					return 0, err
				}
			}
			if r.EndedAt != nil {
				ended = append(ended, r.ID)
			}
			n++
		}
	}
	if len(ended) > 0 {
		if err := q.EndAllocations(ctx, ended); err != nil {
			return 0, fmt.Errorf("end allocations of preempted borrowers: %w", err)
		}
	}
	return n, nil
}
