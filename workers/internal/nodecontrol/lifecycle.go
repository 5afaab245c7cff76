package nodecontrol

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/better-compute/better-compute/gen/db"
	"github.com/better-compute/better-compute/internal/event"
	"github.com/better-compute/better-compute/internal/fleet"
)

// lifecycleReconciler drives a node's lifecycle where the API leaves it: a draining node gets a
// "drain" command (once per drain) and becomes drained when it has no active leases. It also
// keeps the Schedulable condition in step with the state, liveness and revocation.
type lifecycleReconciler struct {
	pool *pgxpool.Pool
	opts Options
}

func (r *lifecycleReconciler) Kind() string { return fleet.KindLifecycle }

func (r *lifecycleReconciler) Reconcile(ctx context.Context, key string) error {
	id, err := uuid.Parse(key)
	if err != nil {
		return nil // not a node: nothing to do
	}
	n, err := db.New(r.pool).GetNodeForGateway(ctx, id)
	if isNoRows(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("read node %s: %w", id, err)
	}
	// Count outside the transaction: the lease store may take its own locks, and a draining
	// node gets no new leases, so the count can only fall.
	leases := 0
	if n.State == fleet.StateDraining && r.opts.ActiveLeases != nil {
		if leases, err = r.opts.ActiveLeases(ctx, id); err != nil {
			return fmt.Errorf("count active leases of node %s: %w", id, err)
		}
	}
	counted := n.StateGeneration

	var (
		created bool
		waiting bool
	)
	err = pgx.BeginFunc(ctx, r.pool, func(tx pgx.Tx) error {
		q := db.New(tx)
		n, ok, err := lockNode(ctx, q, id)
		if err != nil || !ok {
			return err
		}
		if n.State == fleet.StateDraining {
			_, isNew, err := newCommand(ctx, q, n, CommandDrain, fmt.Sprintf("drain-%d", n.StateGeneration), drainPayload, r.opts.DrainTimeout)
			if err != nil {
				return err
			}
			created = isNew
			switch {
			case n.StateGeneration != counted:
				// Drained again since the count: it was enqueued by that change, and will be
				// counted then.
			case leases > 0:
				waiting = true
			default:
				if n, err = q.MarkNodeDrained(ctx, db.MarkNodeDrainedParams{ID: id, StateGeneration: n.StateGeneration}); err != nil {
					return fmt.Errorf("mark node %s drained: %w", id, err)
				}
				if err := event.Emit(ctx, q, n.TenantID, event.NodeDrained{NodeTransition: event.NodeTransition{
					ID: id, Hostname: n.Hostname, From: string(fleet.StateDraining), To: string(fleet.StateDrained),
				}}); err != nil {
					return err
				}
			}
		}
		return r.setSchedulable(ctx, q, n)
	})
	if err != nil {
		return err
	}
	if created && r.opts.Notifier != nil {
		r.opts.Notifier.CommandsCreated(context.WithoutCancel(ctx), []uuid.UUID{id})
	}
	if waiting {
		r.opts.Logger.Debug("draining node still has active leases", "node_id", id, "leases", leases)
		return lookAgain(ctx, r.pool, fleet.KindLifecycle, key, r.opts.DrainPoll)
	}
	return nil
}

// setSchedulable writes the Schedulable condition when it changed.
func (r *lifecycleReconciler) setSchedulable(ctx context.Context, q *db.Queries, n db.Node) error {
	cs, err := fleet.DecodeConditions(n.Conditions)
	if err != nil {
		return fmt.Errorf("node %s: %w", n.ID, err)
	}
	cs, changed, _ := fleet.SetCondition(cs, Schedulable(n), time.Now())
	if !changed {
		return nil
	}
	return q.SetNodeConditions(ctx, db.SetNodeConditionsParams{ID: n.ID, Conditions: fleet.EncodeConditions(cs)})
}

// Schedulable is the Schedulable condition of a node: True when new work may be placed on it
// (ready, online and not revoked), False with the reason otherwise.
func Schedulable(n db.Node) fleet.Condition {
	c := fleet.Condition{Type: fleet.ConditionSchedulable, Status: fleet.StatusFalse}
	switch {
	case n.State == fleet.StateRetired: // retiring also revokes; "Retired" says more
		c.Reason, c.Message = "Retired", "the node is retired"
	case n.RevokedAt != nil:
		c.Reason, c.Message = "Revoked", "the node's identity is revoked"
	case n.State == fleet.StateJoining:
		c.Reason, c.Message = "Joining", "the node's daemon has not said hello yet"
	case n.State == fleet.StateCordoned:
		c.Reason, c.Message = "Cordoned", "the node is cordoned"
	case n.State == fleet.StateDraining:
		c.Reason, c.Message = "Draining", "the node is draining"
	case n.State == fleet.StateDrained:
		c.Reason, c.Message = "Drained", "the node is drained"
	case !n.Online:
		c.Reason, c.Message = "Offline", "the node's heartbeats stopped"
		if n.OnlineChangedAt == nil {
			c.Message = "the node has not been online yet"
		}
	default:
		c.Status, c.Reason, c.Message = fleet.StatusTrue, "Ready", "the node is ready and online"
	}
	return c
}

func isNoRows(err error) bool { return errors.Is(err, pgx.ErrNoRows) }
