package provision

import (
	"context"
	"errors"
	"fmt"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/better-compute/better-compute/gen/db"
	provisiondb "github.com/better-compute/better-compute/gen/modules/provision/db"
	"github.com/better-compute/better-compute/internal/event"
	"github.com/better-compute/better-compute/internal/fleet"
	"github.com/better-compute/better-compute/internal/provision"
)

// joinedNode is the node that joined with the machine's token: the one linked, or else the one
// the token's use made.
func (c *Controller) joinedNode(ctx context.Context, m provisiondb.ProvisionMachine) (uuid.UUID, bool, error) {
	if m.NodeID != nil {
		return *m.NodeID, true, nil
	}
	if m.JoinTokenID == nil {
		return uuid.Nil, false, nil
	}
	n, err := provisiondb.New(c.pool).NodeOfJoinToken(ctx, provisiondb.NodeOfJoinTokenParams{TenantID: m.TenantID, JoinTokenID: m.JoinTokenID})
	if errors.Is(err, pgx.ErrNoRows) {
		return uuid.Nil, false, nil
	}
	if err != nil {
		return uuid.Nil, false, fmt.Errorf("find the node of join token %s: %w", *m.JoinTokenID, err)
	}
	return n.ID, true, nil
}

// startDrain (deleting → draining, or → destroying without a node) revokes the machine's join
// token, so no node joins with it any more, then drains the node it became as nodes/drain does:
// the node's lifecycle reconciler tells its daemon and marks it drained once its leases ended.
func (c *Controller) startDrain(ctx context.Context, m provisiondb.ProvisionMachine) (outcome, error) {
	node, ok, err := c.joinedNode(ctx, m)
	if err != nil {
		return stop, err
	}
	to, detail := StateDestroying, "no node joined"
	if ok {
		to, detail = StateDraining, "node "+node.String()+" draining"
	}
	_, err = c.move(ctx, m, to, detail, func(q *provisiondb.Queries, cq *db.Queries) error {
		if m.JoinTokenID != nil {
			if _, err := cq.RevokeJoinToken(ctx, db.RevokeJoinTokenParams{TenantID: m.TenantID, ID: *m.JoinTokenID}); err != nil && !errors.Is(err, pgx.ErrNoRows) {
				return fmt.Errorf("revoke the machine's join token: %w", err)
			}
		}
		if !ok {
			return nil
		}
		if m.NodeID == nil {
			if err := q.SetMachineNode(ctx, provisiondb.SetMachineNodeParams{ID: m.ID, NodeID: &node}); err != nil {
				return err
			}
		}
		return drainNode(ctx, cq, m.TenantID, node)
	})
	return next, err
}

// drainNode moves a joining, ready or cordoned node to draining in the caller's transaction,
// with nodes/drain's event, and enqueues its lifecycle reconciler. A node draining or further on
// (or gone) is left as it is.
func drainNode(ctx context.Context, q *db.Queries, tenant, id uuid.UUID) error {
	n, err := q.LockNode(ctx, id)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("lock node %s: %w", id, err)
	}
	from := []string{string(fleet.StateJoining), string(fleet.StateReady), string(fleet.StateCordoned)}
	moved, err := q.SetNodeState(ctx, db.SetNodeStateParams{TenantID: tenant, ID: id, State: fleet.StateDraining, FromStates: from})
	if errors.Is(err, pgx.ErrNoRows) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("drain node %s: %w", id, err)
	}
	if err := event.Emit(ctx, q, tenant, event.NodeDraining{NodeTransition: event.NodeTransition{
		ID: id, Hostname: moved.Hostname, From: string(n.State), To: string(fleet.StateDraining),
	}}); err != nil {
		return err
	}
	return fleet.Enqueue(ctx, q, fleet.KindLifecycle, id)
}

// awaitDrained (draining → destroying) waits for the node to be drained, then retires and
// revokes it, as nodes/retire does, so it takes no work and its identity is dead before the
// provider destroys the machine.
func (c *Controller) awaitDrained(ctx context.Context, m provisiondb.ProvisionMachine) (outcome, error) {
	if m.NodeID == nil {
		_, err := c.move(ctx, m, StateDestroying, "no node", nil)
		return next, err
	}
	id := *m.NodeID
	n, err := provisiondb.New(c.pool).GetNodeState(ctx, id)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		_, err := c.move(ctx, m, StateDestroying, "node "+id.String()+" deleted", nil)
		return next, err
	case err != nil:
		return stop, fmt.Errorf("read node %s: %w", id, err)
	}
	switch n.State {
	case provisiondb.NodeStateDrained, provisiondb.NodeStateRetired:
	case provisiondb.NodeStateDraining:
		return waitFor(c.cfg.PollInterval), nil
	default: // uncordoned meanwhile: drain it again
		return waitFor(c.cfg.PollInterval), pgx.BeginFunc(ctx, c.pool, func(tx pgx.Tx) error {
			return drainNode(ctx, db.New(tx), m.TenantID, id)
		})
	}
	_, err = c.move(ctx, m, StateDestroying, "node "+id.String()+" retired", func(_ *provisiondb.Queries, cq *db.Queries) error {
		return retireNode(ctx, cq, m.TenantID, id)
	})
	return next, err
}

// retireNode retires a drained node and revokes it, with nodes/retire's events.
func retireNode(ctx context.Context, q *db.Queries, tenant, id uuid.UUID) error {
	n, err := q.LockNode(ctx, id)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("lock node %s: %w", id, err)
	}
	if n.State == fleet.StateDrained {
		if _, err := q.SetNodeState(ctx, db.SetNodeStateParams{
			TenantID: tenant, ID: id, State: fleet.StateRetired, FromStates: []string{string(fleet.StateDrained)},
		}); err != nil {
			return fmt.Errorf("retire node %s: %w", id, err)
		}
		if err := event.Emit(ctx, q, tenant, event.NodeRetired{NodeTransition: event.NodeTransition{
			ID: id, Hostname: n.Hostname, From: string(fleet.StateDrained), To: string(fleet.StateRetired),
		}}); err != nil {
			return err
		}
	}
	if n.RevokedAt == nil {
		if _, err := q.RevokeNode(ctx, db.RevokeNodeParams{TenantID: tenant, ID: id}); err != nil {
			return fmt.Errorf("revoke node %s: %w", id, err)
		}
		if err := event.Emit(ctx, q, tenant, event.NodeRevoked{ID: id, Hostname: n.Hostname}); err != nil {
			return err
		}
	}
	return fleet.Enqueue(ctx, q, fleet.KindLifecycle, id)
}

// destroy (destroying → gone) has the provider destroy the machine. When no provider id was
// recorded, a Create may still have acted before its process died: every machine the provider
// holds with this machine's tag is destroyed, so none is left without a machine.
func (c *Controller) destroy(ctx context.Context, m provisiondb.ProvisionMachine) (outcome, error) {
	if m.JoinTokenID != nil { // created, or maybe created: the provider may hold it
		p, err := c.provider(ctx, m)
		if err != nil {
			return stop, err
		}
		ids := []string{}
		if m.ProviderID != "" {
			ids = append(ids, m.ProviderID)
		} else {
			all, err := p.List(ctx)
			if err != nil {
				return stop, fmt.Errorf("list the provider's machines: %w", err)
			}
			for _, pm := range all {
				if pm.Tags[provision.TagMachine] == m.ID.String() {
					ids = append(ids, pm.ProviderID)
				}
			}
		}
		for _, id := range ids {
			if err := p.Delete(ctx, id); err != nil && !errors.Is(err, provision.ErrNotFound) {
				return stop, fmt.Errorf("destroy %s at the provider: %w", id, err)
			}
		}
	}
	detail := "destroyed"
	if m.ProviderID != "" {
		detail = "destroyed " + m.ProviderID
	}
	_, err := c.move(ctx, m, StateGone, detail, nil)
	return stop, err
}
