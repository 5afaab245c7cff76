package leases

import (
	"context"

	"github.com/google/uuid"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/better-compute/better-compute/gen/db"
	leasesv1 "github.com/better-compute/better-compute/gen/go/bettercompute/leases/v1"
	"github.com/better-compute/better-compute/internal/admission"
	"github.com/better-compute/better-compute/internal/apierr"
	"github.com/better-compute/better-compute/internal/auth"
	"github.com/better-compute/better-compute/internal/idle"
)

// Wake asks for a lent lease's GPUs back (docs/gpus.md, "Idle leases"): it marks the lease
// waking and has the pool's placer queued, which preempts the borrowers with the pool's
// preemption grace and gives the lease the same GPUs once they are free. A lease that is not lent
// is returned as it is.
func (s *Service) Wake(ctx context.Context, req *leasesv1.WakeRequest) (*leasesv1.WakeResponse, error) {
	id, err := apierr.ParseID("id", req.GetId())
	if err != nil {
		return nil, err
	}
	p := auth.Caller(ctx)
	return admission.Do(ctx, s.admit, req, func(ctx context.Context, tx *admission.Tx) (*leasesv1.WakeResponse, error) {
		tx.Target("lease", id)
		l, err := tx.Q.RequestLeaseWake(ctx, db.RequestLeaseWakeParams{TenantID: p.TenantID, ID: id})
		if err != nil {
			return nil, apierr.NotFoundIfNoRows(err, "lease %s not found", id)
		}
		out, err := describe(ctx, tx.Q, []db.PoolLease{l})
		if err != nil {
			return nil, err
		}
		if l.LentSince != nil {
			s.pokeAfterCommit(tx, l.PoolID)
		}
		return &leasesv1.WakeResponse{Lease: out[0]}, nil
	})
}

// admitIdleOptOut refuses idle_opt_out unless the pool's idle policy allows it.
func admitIdleOptOut(ctx context.Context, q *db.Queries, tenant, poolID uuid.UUID) error {
	b, err := q.PoolIdlePolicyForTenant(ctx, db.PoolIdlePolicyForTenantParams{TenantID: tenant, PoolID: poolID})
	if err != nil {
		return apierr.NotFoundIfNoRows(err, "pool %s not found", poolID)
	}
	pol, err := idle.Decode(b)
	if err != nil {
		return err
	}
	if !pol.AllowOptOut {
		return apierr.InvalidArgument("idle_opt_out", "pool %s's idle policy does not allow leases to opt out", poolID)
	}
	return nil
}

// loans is what the leases among rows that are lent have lent, by lease.
func loans(ctx context.Context, q *db.Queries, rows []db.PoolLease, ids []uuid.UUID) (map[uuid.UUID]*leasesv1.Lent, error) {
	lent := false
	for _, r := range rows {
		lent = lent || r.LentSince != nil
	}
	if !lent {
		return nil, nil
	}
	// Every row is of the caller's tenant: the reads that give them are scoped to it.
	ls, err := q.LeaseLoans(ctx, db.LeaseLoansParams{TenantID: rows[0].TenantID, LeaseIds: ids})
	if err != nil {
		return nil, err
	}
	out := make(map[uuid.UUID]*leasesv1.Lent, len(ls))
	for _, l := range ls {
		out[l.ID] = &leasesv1.Lent{
			Since: timestamppb.New(l.LentSince), Gpus: int32(l.Gpus), Borrowers: int32(l.Borrowers),
			WakeTime: optionalTime(l.WakeRequestedAt),
		}
	}
	return out, nil
}
