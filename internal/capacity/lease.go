package capacity

import (
	"context"
	"fmt"
	"time"

	"github.com/google/uuid"

	"github.com/better-compute/better-compute/gen/db"
)

// LeaseState is where a pool lease is in its life cycle. It is the database's lease_state enum, as
// sqlc generates it (queries/migrations/0015_state_types.sql): the database says which states
// exist, and this is not a second list of them.
type LeaseState = db.LeaseState

// States of a pool lease (pool_leases.state).
const (
	LeasePending  = db.LeaseStatePending
	LeasePlaced   = db.LeaseStatePlaced
	LeaseAtRisk   = db.LeaseStateAtRisk
	LeaseReleased = db.LeaseStateReleased
	LeaseExpired  = db.LeaseStateExpired
	LeaseFailed   = db.LeaseStateFailed
)

// EndLeases ends the leases among ids that have not ended, as state (LeaseReleased,
// LeaseExpired or LeaseFailed) with reason, and frees and meters what they held, in q's
// transaction. A placed lease ends at its end or at now, whichever comes first (now is the
// database's clock when nil); a pending one at now. It returns the leases it ended; the caller
// emits their events.
func EndLeases(ctx context.Context, q *db.Queries, ids []uuid.UUID, state db.LeaseState, reason string, now *time.Time) ([]db.EndPoolLeasesRow, error) {
	if len(ids) == 0 {
		return nil, nil
	}
	rows, err := q.EndPoolLeases(ctx, db.EndPoolLeasesParams{State: state, Reason: reason, Now: now, Ids: ids})
	if err != nil {
		return nil, fmt.Errorf("end leases: %w", err)
	}
	var placed []uuid.UUID
	for _, r := range rows {
		if r.PlacedAt != nil {
			placed = append(placed, r.ID)
		}
	}
	if len(placed) > 0 {
		if err := q.EndAllocations(ctx, placed); err != nil {
			return nil, fmt.Errorf("end allocations: %w", err)
		}
	}
	return rows, nil
}
