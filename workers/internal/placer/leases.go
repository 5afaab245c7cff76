package placer

import (
	"context"
	"fmt"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/better-compute/better-compute/gen/db"
	"github.com/better-compute/better-compute/internal/capacity"
	"github.com/better-compute/better-compute/internal/event"
	"github.com/better-compute/better-compute/internal/reconcile"
)

// MarkAtRisk moves the placed leases that hold anything on the nodes to at_risk, with a
// lease.at_risk event each, in tx: for the liveness job when nodes go offline. Their devices stay
// held.
func MarkAtRisk(ctx context.Context, tx pgx.Tx, nodeIDs []uuid.UUID) error {
	if len(nodeIDs) == 0 {
		return nil
	}
	q := db.New(tx)
	rows, err := q.MarkNodeLeasesAtRisk(ctx, nodeIDs)
	if err != nil {
		return fmt.Errorf("mark leases at risk: %w", err)
	}
	var ev event.Batch
	for _, r := range rows {
		if err := ev.Add(r.TenantID, event.LeaseAtRisk{LeaseChange: event.LeaseChange{
			ID: r.ID, PoolID: r.PoolID, State: string(capacity.LeaseAtRisk), PreviousState: string(capacity.LeasePlaced),
			Reason: "a node the lease holds is offline",
		}}); err != nil {
			return err
		}
	}
	return ev.Emit(ctx, q)
}

// MarkPlaced moves the at_risk leases that hold anything on the nodes back to placed, with a
// lease.placed event each, once every node such a lease holds is online and not revoked; call it
// in tx after setting the nodes online (the liveness job when nodes come back). It also enqueues
// the placer for the nodes' pools, whose pending leases may now fit.
func MarkPlaced(ctx context.Context, tx pgx.Tx, nodeIDs []uuid.UUID) error {
	if len(nodeIDs) == 0 {
		return nil
	}
	q := db.New(tx)
	rows, err := q.MarkNodeLeasesPlaced(ctx, nodeIDs)
	if err != nil {
		return fmt.Errorf("mark leases placed: %w", err)
	}
	var ev event.Batch
	for _, r := range rows {
		if err := ev.Add(r.TenantID, event.LeasePlaced{LeaseChange: event.LeaseChange{
			ID: r.ID, PoolID: r.PoolID, State: string(capacity.LeasePlaced), PreviousState: string(capacity.LeaseAtRisk),
		}}); err != nil {
			return err
		}
	}
	if err := ev.Emit(ctx, q); err != nil {
		return err
	}
	return EnqueuePools(ctx, tx, nodeIDs)
}

// EnqueuePools enqueues the placer for every pool the nodes are members of, in tx: call it when
// nodes become schedulable (ready, uncordoned, online) or their labels or inventory change, then
// wake capacity.PlacerKind after the commit. Without it the placer's resync finds the change within a minute.
func EnqueuePools(ctx context.Context, tx pgx.Tx, nodeIDs []uuid.UUID) error {
	if len(nodeIDs) == 0 {
		return nil
	}
	q := db.New(tx)
	pools, err := q.PoolsOfNodes(ctx, nodeIDs)
	if err != nil {
		return fmt.Errorf("pools of nodes: %w", err)
	}
	keys := make([]string, len(pools))
	for i, p := range pools {
		keys[i] = p.String()
	}
	return reconcile.Enqueue(ctx, q, capacity.PlacerKind, keys...)
}

// ActiveLeases counts the leases that hold anything on a node (placed or at risk): a draining
// node is drained when it reaches 0. q may be a pool or a transaction.
func ActiveLeases(ctx context.Context, q db.DBTX, nodeID uuid.UUID) (int, error) {
	n, err := db.New(q).CountNodeActiveLeases(ctx, nodeID)
	if err != nil {
		return 0, fmt.Errorf("count leases on node %s: %w", nodeID, err)
	}
	return int(n), nil
}
