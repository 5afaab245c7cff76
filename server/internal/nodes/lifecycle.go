package nodes

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/google/uuid"

	"google.golang.org/protobuf/proto"

	"github.com/better-compute/better-compute/gen/db"
	nodesv1 "github.com/better-compute/better-compute/gen/go/bettercompute/nodes/v1"
	"github.com/better-compute/better-compute/internal/admission"
	"github.com/better-compute/better-compute/internal/apierr"
	"github.com/better-compute/better-compute/internal/auth"
	"github.com/better-compute/better-compute/internal/command"
	"github.com/better-compute/better-compute/internal/event"
	"github.com/better-compute/better-compute/internal/fleet"
)

// transition is a lifecycle change the API makes.
type transition struct {
	to fleet.State
	// from are the states it leaves; in to itself (and same) it changes nothing.
	from []fleet.State
	same []fleet.State
	// event is emitted when the state changes.
	event func(event.NodeTransition) event.Event
	// rule is said when the node is in a state it cannot leave this way.
	rule string
	// revokes also revokes the node's identity (as nodes/revoke does): a retired node's
	// certificate is not renewed, it fetches no secrets, and its session ends.
	revokes bool
}

var (
	cordon = transition{
		to: fleet.StateCordoned, from: []fleet.State{fleet.StateJoining, fleet.StateReady},
		event: func(p event.NodeTransition) event.Event { return event.NodeCordoned{NodeTransition: p} },
		rule:  "only joining and ready nodes can be cordoned",
	}
	uncordon = transition{
		to: fleet.StateReady, from: []fleet.State{fleet.StateCordoned, fleet.StateDraining, fleet.StateDrained},
		event: func(p event.NodeTransition) event.Event { return event.NodeUncordoned{NodeTransition: p} },
		rule:  "only cordoned, draining and drained nodes can be uncordoned",
	}
	drain = transition{
		to: fleet.StateDraining, from: []fleet.State{fleet.StateJoining, fleet.StateReady, fleet.StateCordoned},
		same:  []fleet.State{fleet.StateDrained},
		event: func(p event.NodeTransition) event.Event { return event.NodeDraining{NodeTransition: p} },
		rule:  "only joining, ready and cordoned nodes can be drained",
	}
	retire = transition{
		to: fleet.StateRetired, from: []fleet.State{fleet.StateDrained},
		event: func(p event.NodeTransition) event.Event { return event.NodeRetired{NodeTransition: p} },
		rule:  "only drained nodes can be retired; drain it first", revokes: true,
	}
)

// Cordon stops new placements on a node.
func (s *Service) Cordon(ctx context.Context, req *nodesv1.CordonRequest) (*nodesv1.CordonResponse, error) {
	return transit(ctx, s, req, req.GetId(), cordon, func(n *nodesv1.Node) *nodesv1.CordonResponse { return &nodesv1.CordonResponse{Node: n} })
}

// Uncordon makes a node ready again.
func (s *Service) Uncordon(ctx context.Context, req *nodesv1.UncordonRequest) (*nodesv1.UncordonResponse, error) {
	return transit(ctx, s, req, req.GetId(), uncordon, func(n *nodesv1.Node) *nodesv1.UncordonResponse { return &nodesv1.UncordonResponse{Node: n} })
}

// Drain makes a node draining; the lifecycle reconciler makes it drained.
func (s *Service) Drain(ctx context.Context, req *nodesv1.DrainRequest) (*nodesv1.DrainResponse, error) {
	return transit(ctx, s, req, req.GetId(), drain, func(n *nodesv1.Node) *nodesv1.DrainResponse { return &nodesv1.DrainResponse{Node: n} })
}

// Retire takes a drained node out of service for good and revokes its identity: after the
// commit the gateways refuse its renewals, secret fetches and sessions, and the notifier tells
// them to end its session now.
func (s *Service) Retire(ctx context.Context, req *nodesv1.RetireRequest) (*nodesv1.RetireResponse, error) {
	return transit(ctx, s, req, req.GetId(), retire, func(n *nodesv1.Node) *nodesv1.RetireResponse { return &nodesv1.RetireResponse{Node: n} })
}

// transit runs a lifecycle transition as one admitted transaction: the node is locked, checked,
// moved, its event emitted and its lifecycle reconciler enqueued.
func transit[Res proto.Message](ctx context.Context, s *Service, req proto.Message, rawID string, t transition, wrap func(*nodesv1.Node) Res) (Res, error) {
	var zero Res
	id, err := apierr.ParseID("id", rawID)
	if err != nil {
		return zero, err
	}
	p := auth.Caller(ctx)
	changed := false
	res, err := admission.Do(ctx, s.admit, req, func(ctx context.Context, tx *admission.Tx) (Res, error) {
		tx.Target("node", id)
		n, err := tx.Q.LockNodeOfTenant(ctx, db.LockNodeOfTenantParams{TenantID: p.TenantID, ID: id})
		if err != nil {
			return zero, apierr.NotFoundIfNoRows(err, "node %s not found", id)
		}
		if n.State != t.to && !slices.Contains(t.same, n.State) {
			if !slices.Contains(t.from, n.State) {
				return zero, apierr.FailedPrecondition("node %s is %s: %s", id, n.State, t.rule)
			}
			from := make([]string, len(t.from)) // as text: see SetNodeState
			for i, s := range t.from {
				from[i] = string(s)
			}
			moved, err := tx.Q.SetNodeState(ctx, db.SetNodeStateParams{TenantID: p.TenantID, ID: id, State: t.to, FromStates: from})
			if err != nil {
				return zero, fmt.Errorf("move node %s to %s: %w", id, t.to, err)
			}
			// A daemon told to drain keeps refusing work until it is told otherwise.
			if t.to == fleet.StateReady && (n.State == fleet.StateDraining || n.State == fleet.StateDrained) {
				if _, err := tx.Q.CreateCommand(ctx, db.CreateCommandParams{
					ID: uuid.Must(uuid.NewV7()), TenantID: p.TenantID, NodeID: id, Type: command.Undrain,
					Payload: []byte("{}"), IdempotencyKey: fmt.Sprintf("undrain-%d", moved.StateGeneration),
					Deadline: time.Now().Add(10 * time.Minute),
				}); err != nil {
					return zero, fmt.Errorf("tell node %s to undrain: %w", id, err)
				}
			}
			if err := tx.Emit(p.TenantID, t.event(event.NodeTransition{
				ID: id, Hostname: n.Hostname, From: string(n.State), To: string(t.to),
			})); err != nil {
				return zero, err
			}
			if err := fleet.Enqueue(ctx, tx.Q, fleet.KindLifecycle, id); err != nil {
				return zero, err
			}
			tx.Wake(fleet.KindLifecycle)
			changed = true
		}
		// Also for a node retired before retiring revoked (migration 0013 revokes those too).
		if t.revokes && n.RevokedAt == nil {
			if _, err := tx.Q.RevokeNode(ctx, db.RevokeNodeParams{TenantID: p.TenantID, ID: id}); err != nil {
				return zero, fmt.Errorf("revoke retired node %s: %w", id, err)
			}
			if err := tx.Emit(p.TenantID, event.NodeRevoked{ID: id, Hostname: n.Hostname}); err != nil {
				return zero, err
			}
			if !changed {
				if err := fleet.Enqueue(ctx, tx.Q, fleet.KindLifecycle, id); err != nil {
					return zero, err
				}
				tx.Wake(fleet.KindLifecycle)
				changed = true
			}
		}
		pn, err := s.nodeInTx(ctx, tx, id)
		if err != nil {
			return zero, err
		}
		return wrap(pn), nil
	})
	if err != nil {
		return zero, err
	}
	if t.revokes && s.notifier != nil {
		// Also when nothing changed: a session that outlived a lost notification ends now.
		s.notifier.NodesRevoked(context.WithoutCancel(ctx), []uuid.UUID{id})
	}
	return res, nil
}

// Label sets and removes labels of a node, and of its spec when the spec manages them.
func (s *Service) Label(ctx context.Context, req *nodesv1.LabelRequest) (*nodesv1.LabelResponse, error) {
	id, err := apierr.ParseID("id", req.GetId())
	if err != nil {
		return nil, err
	}
	if err := fleet.ValidateLabels("set", req.GetSet()); err != nil {
		return nil, err
	}
	for _, k := range req.GetRemove() {
		if !fleet.ValidLabelKey(k) {
			return nil, apierr.InvalidArgument("remove", "key %q must be 1 to 63 letters, digits, '-', '_', '.' and '/', starting and ending with a letter or digit", k)
		}
		if _, ok := req.GetSet()[k]; ok {
			return nil, apierr.InvalidArgument("remove", "key %q is both set and removed", k)
		}
	}
	if len(req.GetSet()) == 0 && len(req.GetRemove()) == 0 {
		return nil, apierr.InvalidArgument("set", "set or remove at least one label")
	}
	edit := func(m map[string]string) map[string]string {
		m = maps.Clone(m)
		if m == nil {
			m = map[string]string{}
		}
		maps.Copy(m, req.GetSet())
		for _, k := range req.GetRemove() {
			delete(m, k)
		}
		return m
	}
	p := auth.Caller(ctx)
	return admission.Do(ctx, s.admit, req, func(ctx context.Context, tx *admission.Tx) (*nodesv1.LabelResponse, error) {
		tx.Target("node", id)
		n, err := tx.Q.LockNodeOfTenant(ctx, db.LockNodeOfTenantParams{TenantID: p.TenantID, ID: id})
		if err != nil {
			return nil, apierr.NotFoundIfNoRows(err, "node %s not found", id)
		}
		have, err := fleet.DecodeLabels(n.Labels)
		if err != nil {
			return nil, fmt.Errorf("node %s: %w", id, err)
		}
		labels := edit(have)
		if err := fleet.ValidateLabels("set", labels); err != nil {
			return nil, err
		}
		if !maps.Equal(have, labels) {
			if err := tx.Q.SetNodeLabels(ctx, db.SetNodeLabelsParams{TenantID: p.TenantID, ID: id, Labels: fleet.EncodeLabels(labels)}); err != nil {
				return nil, fmt.Errorf("label node %s: %w", id, err)
			}
			if err := tx.Emit(p.TenantID, event.NodeLabeled{ID: id, Labels: labels}); err != nil {
				return nil, err
			}
		}
		spec, err := fleet.DecodeSpec(n.Spec)
		if err != nil {
			return nil, fmt.Errorf("node %s: %w", id, err)
		}
		if spec.Labels != nil {
			spec.Labels = edit(spec.Labels)
			if err := updateSpec(ctx, tx, n, spec); err != nil {
				return nil, err
			}
		}
		pn, err := s.nodeInTx(ctx, tx, id)
		if err != nil {
			return nil, err
		}
		return &nodesv1.LabelResponse{Node: pn}, nil
	})
}
