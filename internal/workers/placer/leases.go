package placer

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/better-compute/better-compute/gen/db"
	"github.com/better-compute/better-compute/internal/workers/reconcile"
)

// States of a pool lease.
const (
	StatePending  = "pending"
	StatePlaced   = "placed"
	StateAtRisk   = "at_risk"
	StateReleased = "released"
	StateExpired  = "expired"
	StateFailed   = "failed"
)

// Event types of pool leases, emitted through the outbox with subject "lease/<id>".
const (
	EventCreated  = "lease.created"
	EventPlaced   = "lease.placed"
	EventAtRisk   = "lease.at_risk"
	EventExtended = "lease.extended"
	EventReleased = "lease.released"
	EventExpired  = "lease.expired"
	EventFailed   = "lease.failed"
)

// Subject is the outbox subject of a pool lease's events.
func Subject(id uuid.UUID) string { return "lease/" + id.String() }

// EventData is the payload of lease events.
type EventData struct {
	ID            string     `json:"id"`
	PoolID        string     `json:"pool_id"`
	State         string     `json:"state"`
	PreviousState string     `json:"previous_state,omitempty"`
	Reason        string     `json:"reason,omitempty"`
	NodeIDs       []string   `json:"node_ids,omitempty"`
	EndTime       *time.Time `json:"end_time,omitempty"`
}

// events collects outbox rows for InsertOutboxEvents.
type events struct{ p db.InsertOutboxEventsParams }

func (e *events) add(tenant uuid.UUID, typ string, lease uuid.UUID, data EventData) error {
	b, err := json.Marshal(data)
	if err != nil {
		return fmt.Errorf("encode %s event: %w", typ, err)
	}
	e.p.TenantIds = append(e.p.TenantIds, tenant)
	e.p.Types = append(e.p.Types, typ)
	e.p.Subjects = append(e.p.Subjects, Subject(lease))
	e.p.Payloads = append(e.p.Payloads, string(b))
	return nil
}

func (e *events) write(ctx context.Context, q *db.Queries) error {
	if len(e.p.Types) == 0 {
		return nil
	}
	if err := q.InsertOutboxEvents(ctx, e.p); err != nil {
		return fmt.Errorf("write lease events: %w", err)
	}
	return nil
}

// End ends the leases among ids that have not ended, as state (StateReleased, StateExpired or
// StateFailed) with reason, and frees and meters what they held, in q's transaction. A placed
// lease ends at its end or at now, whichever comes first (now is the database's clock when nil);
// a pending one at now. It returns the leases it ended; the caller emits their events.
func End(ctx context.Context, q *db.Queries, ids []uuid.UUID, state, reason string, now *time.Time) ([]db.EndPoolLeasesRow, error) {
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

// EventOf is the event type of a lease that reached state.
func EventOf(state string) string {
	switch state {
	case StatePlaced:
		return EventPlaced
	case StateAtRisk:
		return EventAtRisk
	case StateReleased:
		return EventReleased
	case StateExpired:
		return EventExpired
	case StateFailed:
		return EventFailed
	}
	return "lease." + state
}

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
	var ev events
	for _, r := range rows {
		if err := ev.add(r.TenantID, EventAtRisk, r.ID, EventData{
			ID: r.ID.String(), PoolID: r.PoolID.String(), State: StateAtRisk, PreviousState: StatePlaced,
			Reason: "a node the lease holds is offline",
		}); err != nil {
			return err
		}
	}
	return ev.write(ctx, q)
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
	var ev events
	for _, r := range rows {
		if err := ev.add(r.TenantID, EventPlaced, r.ID, EventData{
			ID: r.ID.String(), PoolID: r.PoolID.String(), State: StatePlaced, PreviousState: StateAtRisk,
		}); err != nil {
			return err
		}
	}
	if err := ev.write(ctx, q); err != nil {
		return err
	}
	return EnqueuePools(ctx, tx, nodeIDs)
}

// EnqueuePools enqueues the placer for every pool the nodes are members of, in tx: call it when
// nodes become schedulable (ready, uncordoned, online) or their labels or inventory change, then
// wake Kind after the commit. Without it the placer's resync finds the change within a minute.
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
	return reconcile.Enqueue(ctx, q, Kind, keys...)
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
