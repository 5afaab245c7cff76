package capacity

import (
	"context"
	"fmt"
	"time"

	"github.com/google/uuid"

	"github.com/better-compute/better-compute/gen/db"
	"github.com/better-compute/better-compute/internal/event"
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

// Topology modes of a pool lease (pool_leases.topology): how well connected its GPUs on one node
// must be (see placement.Tier).
const (
	// TopologyPreferred places the lease on the best-connected free GPUs of the node chosen.
	TopologyPreferred = "preferred"
	// TopologyRequired places the lease only where its GPUs share one NVLink domain (or, on a
	// node without NVLink, one PCIe switch); else it waits.
	TopologyRequired = "required"
)

// EndLeases ends the leases among ids that have not ended, as state (LeaseReleased,
// LeaseExpired or LeaseFailed) with reason, frees and meters what they held, and emits
// lease.released, lease.expired or lease.failed through emit, all in q's transaction. A placed
// lease ends at its end or at now, whichever comes first (now is the database's clock when nil);
// a pending one at now. A preempted lease within its grace period frees what it holds but stays
// preempted, and gets no event: lease.preempted already said when it ends. Every event is filled
// the same way wherever a lease ends: its id, pool, the state it ended in and the one it left,
// reason, the nodes it held and its end, to the lease's tenant. A lease whose GPUs were lent
// (idle policy action lend) ends its loan; its borrowers keep running. It returns every lease it
// ended, preempted ones included.
func EndLeases(ctx context.Context, q *db.Queries, ids []uuid.UUID, state LeaseState, reason string, now *time.Time, emit event.Emitter) ([]db.EndPoolLeasesRow, error) {
	ended, ok := endEvents[state]
	if !ok {
		return nil, fmt.Errorf("end leases as %s: not an ended state", state)
	}
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
		// A lease that ends while its GPUs are lent ends its loan: the leases that borrowed
		// them keep running until their own end, as ordinary allocations.
		if err := q.EndLoans(ctx, placed); err != nil {
			return nil, fmt.Errorf("end loans: %w", err)
		}
	}
	for _, r := range rows {
		if r.State == r.PreviousState {
			continue
		}
		ev := ended(event.LeaseChange{
			ID: r.ID, PoolID: r.PoolID, State: string(r.State), PreviousState: string(r.PreviousState),
			Reason: reason, NodeIDs: r.NodeIds, EndTime: r.EndedAt,
		})
		if err := emit(r.TenantID, ev); err != nil {
			return nil, fmt.Errorf("emit %s of lease %s: %w", ev.Type(), r.ID, err)
		}
	}
	return rows, nil
}

// endEvents is the event of each state a lease can end in.
var endEvents = map[LeaseState]func(event.LeaseChange) event.Event{
	LeaseReleased: func(c event.LeaseChange) event.Event { return event.LeaseReleased{LeaseChange: c} },
	LeaseExpired:  func(c event.LeaseChange) event.Event { return event.LeaseExpired{LeaseChange: c} },
	LeaseFailed:   func(c event.LeaseChange) event.Event { return event.LeaseFailed{LeaseChange: c} },
}
