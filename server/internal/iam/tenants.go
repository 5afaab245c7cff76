package iam

import (
	"context"
	"fmt"

	"github.com/google/uuid"
	"google.golang.org/protobuf/proto"

	"github.com/better-compute/better-compute/gen/db"
	iamv1 "github.com/better-compute/better-compute/gen/go/bettercompute/iam/v1"
	"github.com/better-compute/better-compute/internal/admission"
	"github.com/better-compute/better-compute/internal/apierr"
	"github.com/better-compute/better-compute/internal/auth"
	"github.com/better-compute/better-compute/internal/capacity"
	"github.com/better-compute/better-compute/internal/event"
	"github.com/better-compute/better-compute/internal/fleet"
)

// tenantDeletedReason is why a forced deletion ends a tenant's leases.
const tenantDeletedReason = "the tenant was deleted"

// SuspendTenant suspends a tenant below the caller's: from its commit on, every key of the
// tenant is refused (see auth.Embedded.Authenticate). Nodes, sessions and leases carry on.
func (s *Service) SuspendTenant(ctx context.Context, req *iamv1.SuspendTenantRequest) (*iamv1.SuspendTenantResponse, error) {
	t, err := s.setSuspended(ctx, req, req.GetId(), true)
	if err != nil {
		return nil, err
	}
	return &iamv1.SuspendTenantResponse{Tenant: t}, nil
}

// ResumeTenant lifts a tenant's suspension: its keys work again.
func (s *Service) ResumeTenant(ctx context.Context, req *iamv1.ResumeTenantRequest) (*iamv1.ResumeTenantResponse, error) {
	t, err := s.setSuspended(ctx, req, req.GetId(), false)
	if err != nil {
		return nil, err
	}
	return &iamv1.ResumeTenantResponse{Tenant: t}, nil
}

// setSuspended suspends or resumes a child tenant of the caller's, emitting tenant.suspended or
// tenant.resumed when that changes something.
func (s *Service) setSuspended(ctx context.Context, req proto.Message, rawID string, suspended bool) (*iamv1.Tenant, error) {
	id, err := apierr.ParseID("id", rawID)
	if err != nil {
		return nil, err
	}
	p := auth.Caller(ctx)
	return admission.Do(ctx, s.admit, req, func(ctx context.Context, tx *admission.Tx) (*iamv1.Tenant, error) {
		tx.Target("tenant", id)
		t, err := lockChild(ctx, tx.Q, p, id)
		if err != nil {
			return nil, err
		}
		if t.DeletedAt != nil {
			return nil, apierr.FailedPrecondition("tenant %s (%s) is deleted", t.Name, id)
		}
		if (t.SuspendedAt != nil) == suspended {
			return tenantToProto(t), nil
		}
		if t, err = tx.Q.SetTenantSuspended(ctx, db.SetTenantSuspendedParams{ID: id, Suspended: suspended}); err != nil {
			return nil, fmt.Errorf("set tenant %s suspended=%v: %w", id, suspended, err)
		}
		ref := event.TenantRef{ID: id, Name: t.Name}
		var ev event.Event = event.TenantResumed{TenantRef: ref}
		if suspended {
			ev = event.TenantSuspended{TenantRef: ref}
		}
		if err := tx.Emit(p.TenantID, ev); err != nil {
			return nil, err
		}
		return tenantToProto(t), nil
	})
}

// DeleteTenant tombstones a tenant below the caller's: principals, bindings and keys deleted,
// join tokens revoked, and, with force, nodes revoked and leases ended. Without force a tenant
// that still has live nodes or active leases is refused.
func (s *Service) DeleteTenant(ctx context.Context, req *iamv1.DeleteTenantRequest) (*iamv1.DeleteTenantResponse, error) {
	id, err := apierr.ParseID("id", req.GetId())
	if err != nil {
		return nil, err
	}
	p := auth.Caller(ctx)
	var revoked []uuid.UUID
	res, err := admission.Do(ctx, s.admit, req, func(ctx context.Context, tx *admission.Tx) (*iamv1.DeleteTenantResponse, error) {
		tx.Target("tenant", id)
		t, err := lockChild(ctx, tx.Q, p, id)
		if err != nil {
			return nil, err
		}
		if t.DeletedAt != nil {
			return &iamv1.DeleteTenantResponse{Tenant: tenantToProto(t)}, nil
		}
		nodeCount, err := tx.Q.CountTenantLiveNodes(ctx, id)
		if err != nil {
			return nil, err
		}
		leases, err := tx.Q.TenantActiveLeaseIDs(ctx, id)
		if err != nil {
			return nil, err
		}
		if !req.GetForce() && (nodeCount > 0 || len(leases) > 0) {
			return nil, apierr.FailedPreconditionField("force", "tenant %s has %d nodes that are not revoked and %d leases that have not ended; "+
				"revoke or release them first, or set force to revoke and end them with the tenant", t.Name, nodeCount, len(leases))
		}
		res := &iamv1.DeleteTenantResponse{}
		if revoked, err = s.revokeTenantNodes(ctx, tx, id); err != nil {
			return nil, err
		}
		res.RevokedNodes = int64(len(revoked))
		if res.EndedLeases, err = endTenantLeases(ctx, tx, id, leases); err != nil {
			return nil, err
		}
		if err := tx.Q.RevokeTenantGrants(ctx, id); err != nil {
			return nil, fmt.Errorf("revoke grants of tenant %s: %w", id, err)
		}
		if err := tx.Q.RevokeTenantJoinTokens(ctx, id); err != nil {
			return nil, fmt.Errorf("revoke join tokens of tenant %s: %w", id, err)
		}
		if res.RevokedApiKeys, err = tx.Q.DeleteTenantAPIKeys(ctx, id); err != nil {
			return nil, fmt.Errorf("delete API keys of tenant %s: %w", id, err)
		}
		if _, err := tx.Q.DeleteTenantPrincipals(ctx, id); err != nil {
			return nil, fmt.Errorf("delete principals of tenant %s: %w", id, err)
		}
		if t, err = tx.Q.TombstoneTenant(ctx, id); err != nil {
			return nil, fmt.Errorf("tombstone tenant %s: %w", id, err)
		}
		if err := tx.Emit(p.TenantID, event.TenantDeleted{
			TenantRef: event.TenantRef{ID: id, Name: t.Name}, RevokedApiKeys: res.RevokedApiKeys,
			RevokedNodes: res.RevokedNodes, EndedLeases: res.EndedLeases,
		}); err != nil {
			return nil, err
		}
		res.Tenant = tenantToProto(t)
		return res, nil
	})
	if err != nil {
		return nil, err
	}
	if s.notifier != nil && len(revoked) > 0 {
		s.notifier.NodesRevoked(context.WithoutCancel(ctx), revoked)
	}
	return res, nil
}

// revokeTenantNodes revokes every live node of a tenant, as nodes/revoke does one: a
// node.revoked event each, and the lifecycle reconciler enqueued (the node is unschedulable).
func (s *Service) revokeTenantNodes(ctx context.Context, tx *admission.Tx, tenant uuid.UUID) ([]uuid.UUID, error) {
	rows, err := tx.Q.RevokeTenantNodes(ctx, tenant)
	if err != nil {
		return nil, fmt.Errorf("revoke nodes of tenant %s: %w", tenant, err)
	}
	ids := make([]uuid.UUID, len(rows))
	for i, n := range rows {
		ids[i] = n.ID
		if err := tx.Emit(tenant, event.NodeRevoked{ID: n.ID, Hostname: n.Hostname}); err != nil {
			return nil, err
		}
	}
	if len(ids) > 0 {
		if err := fleet.Enqueue(ctx, tx.Q, fleet.KindLifecycle, ids...); err != nil {
			return nil, err
		}
	}
	return ids, nil
}

// endTenantLeases ends a deleted tenant's active leases, and other tenants' leases in its pools,
// as failed, freeing and metering what they held, with a lease.failed event each to the lease's
// tenant.
func endTenantLeases(ctx context.Context, tx *admission.Tx, tenant uuid.UUID, ids []uuid.UUID) (int64, error) {
	rows, err := capacity.EndLeases(ctx, tx.Q, ids, capacity.LeaseFailed, tenantDeletedReason, nil, tx.Emit)
	if err != nil {
		return 0, fmt.Errorf("end leases of tenant %s: %w", tenant, err)
	}
	return int64(len(rows)), nil
}

// lockChild locks a tenant directly below the caller's. The IAM bridge already keeps these
// methods to the root tenant; the check here holds whatever the bridge. Tenants that are not
// the caller's children are not found, as other tenants' objects are everywhere.
func lockChild(ctx context.Context, q *db.Queries, p *auth.Principal, id uuid.UUID) (db.Tenant, error) {
	if !p.RootTenant {
		return db.Tenant{}, apierr.PermissionDenied("only principals of the root tenant may suspend, resume or delete tenants")
	}
	t, err := q.LockChildTenant(ctx, db.LockChildTenantParams{ID: id, ParentID: &p.TenantID})
	if err != nil {
		return db.Tenant{}, apierr.NotFoundIfNoRows(err, "tenant %s not found below tenant %s", id, p.TenantID)
	}
	return t, nil
}
