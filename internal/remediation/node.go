package remediation

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/google/uuid"

	"github.com/better-compute/better-compute/gen/db"
	"github.com/better-compute/better-compute/internal/command"
	"github.com/better-compute/better-compute/internal/event"
	"github.com/better-compute/better-compute/internal/fleet"
)

// drainFrom are the states DrainNode drains a node from; a draining or drained node stays.
var drainFrom = []string{string(fleet.StateJoining), string(fleet.StateReady), string(fleet.StateCordoned)}

// DrainNode takes a node out of service for a repair, as nodes/drain does: a joining, ready or
// cordoned node becomes draining, node.draining is emitted and the lifecycle reconciler queued
// (it tells the daemon and marks the node drained once no lease holds it). A node in another
// state is left as it is. It reports whether the node moved: the caller then wakes
// fleet.KindLifecycle after the commit. A GPU health signal that asks for a drain and a
// remediation's drain step both drain this way.
func DrainNode(ctx context.Context, q *db.Queries, tenant, node uuid.UUID) (bool, error) {
	n, err := q.RemediationNodeHealth(ctx, node)
	if err != nil {
		return false, fmt.Errorf("read node %s: %w", node, err)
	}
	if !slices.Contains(drainFrom, string(n.State)) {
		return false, nil
	}
	if _, err := q.SetNodeState(ctx, db.SetNodeStateParams{TenantID: tenant, ID: node, State: db.NodeState(fleet.StateDraining), FromStates: drainFrom}); err != nil {
		return false, fmt.Errorf("drain node %s: %w", node, err)
	}
	if err := event.Emit(ctx, q, tenant, event.NodeDraining{NodeTransition: event.NodeTransition{
		ID: node, Hostname: n.Hostname, From: string(n.State), To: string(fleet.StateDraining),
	}}); err != nil {
		return false, err
	}
	return true, fleet.Enqueue(ctx, q, fleet.KindLifecycle, node)
}

// leftStates are the states ReturnNode makes ready: those nodes/uncordon leaves.
var leftStates = []string{string(fleet.StateCordoned), string(fleet.StateDraining), string(fleet.StateDrained)}

// ReturnNode puts a node a remediation took out of service back in service, as nodes/uncordon
// does: a cordoned, draining or drained node becomes ready, its daemon is told to undrain
// (command undrain), node.uncordoned is emitted and the lifecycle reconciler queued. A node in
// another state is left as it is. It reports whether the node moved: the caller then wakes
// fleet.KindLifecycle (and tells the node of its command) after the commit.
func ReturnNode(ctx context.Context, q *db.Queries, tenant, node uuid.UUID) (bool, error) {
	n, err := q.RemediationNodeHealth(ctx, node)
	if err != nil {
		return false, fmt.Errorf("read node %s: %w", node, err)
	}
	if !slices.Contains(leftStates, string(n.State)) {
		return false, nil
	}
	moved, err := q.SetNodeState(ctx, db.SetNodeStateParams{TenantID: tenant, ID: node, State: db.NodeState(fleet.StateReady), FromStates: leftStates})
	if err != nil {
		return false, fmt.Errorf("return node %s to service: %w", node, err)
	}
	if _, _, err := command.Create(ctx, q, tenant, node, command.Undrain, fmt.Sprintf("undrain-%d", moved.StateGeneration), []byte("{}"), 10*time.Minute); err != nil {
		return false, err
	}
	if err := event.Emit(ctx, q, tenant, event.NodeUncordoned{NodeTransition: event.NodeTransition{
		ID: node, Hostname: n.Hostname, From: string(n.State), To: string(fleet.StateReady),
	}}); err != nil {
		return false, err
	}
	if err := fleet.Enqueue(ctx, q, fleet.KindLifecycle, node); err != nil {
		return false, err
	}
	return true, nil
}

// WakeWaiting queues the tenant's waiting remediations for the controller, as a remediation
// that ends does (a budget freed); it reports whether there were any, for the caller to wake
// Kind after the commit.
func WakeWaiting(ctx context.Context, q *db.Queries, tenant uuid.UUID) (bool, error) {
	waiting, err := q.WaitingRemediations(ctx, tenant)
	if err != nil {
		return false, fmt.Errorf("read waiting remediations: %w", err)
	}
	if len(waiting) == 0 {
		return false, nil
	}
	keys := make([]string, len(waiting))
	for i, id := range waiting {
		keys[i] = id.String()
	}
	if err := q.EnqueueReconcile(ctx, db.EnqueueReconcileParams{Kind: Kind, Keys: keys}); err != nil {
		return false, fmt.Errorf("wake waiting remediations: %w", err)
	}
	return true, nil
}
