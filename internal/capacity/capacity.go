// Package capacity holds the vocabulary and rules of pools, pool leases and reservations that the
// API and the capacity workers share: the states of leases and reservations and the events of
// leases, how a lease ends, and the placer's reconciler kind, for which the API queues the pools
// whose demand or supply it changed. Which nodes belong to a pool is one SQL function,
// pool_members (queries/migrations/0016_pool_membership.sql), that every query about membership
// uses. It knows nothing of who calls it: it imports only the standard library, gen/ and the
// domain and plumbing packages below the role trees.
package capacity

import (
	"context"

	"github.com/google/uuid"

	"github.com/better-compute/better-compute/gen/db"
	"github.com/better-compute/better-compute/internal/enqueue"
)

// PlacerKind is the reconciler kind of the pool-lease placer (workers/internal/placer); its keys
// are pool ids.
const PlacerKind = "capacity.placer"

// EnqueuePlacer queues pools for the placer; run it with q bound to the transaction of the change
// (a new lease, a new or changed pool, a cancelled reservation), so the pools are queued exactly
// when it commits, then wake PlacerKind after commit if you can. Without the wake the placer
// finds them within a second.
func EnqueuePlacer(ctx context.Context, q *db.Queries, poolIDs ...uuid.UUID) error {
	return enqueue.IDs(ctx, q, PlacerKind, poolIDs...)
}
