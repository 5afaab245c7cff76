// Package nodes implements bettercompute.nodes.v1.NodesService: listing, reading, revoking,
// labelling and changing the lifecycle state and spec of the nodes of the caller's tenant. Ids of
// other tenants' nodes are simply not found. Changes enqueue the reconcilers of workers/nodes in
// their transaction; those carry them out.
package nodes

import (
	"context"
	"errors"
	"fmt"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/better-compute/better-compute/gen/db"
	nodesv1 "github.com/better-compute/better-compute/gen/go/bettercompute/nodes/v1"
	"github.com/better-compute/better-compute/gen/go/bettercompute/nodes/v1/nodesv1connect"
	"github.com/better-compute/better-compute/internal/admission"
	"github.com/better-compute/better-compute/internal/apierr"
	"github.com/better-compute/better-compute/internal/auth"
	"github.com/better-compute/better-compute/internal/event"
	"github.com/better-compute/better-compute/internal/fleet"
	"github.com/better-compute/better-compute/internal/page"
)

// RevocationNotifier learns of nodes revoked by a committed API call, so the gateways holding
// their sessions can end them at once. It is an accelerator: gateways also poll for revoked
// nodes, so a notification that is lost only delays the end of a session. NodesRevoked is
// called on the request's goroutine after the commit, with a context that is not cancelled when
// the caller goes away; it should return quickly (bounded by its own timeouts).
type RevocationNotifier interface {
	NodesRevoked(ctx context.Context, nodeIDs []uuid.UUID)
}

// Service answers NodesService calls.
type Service struct {
	pool     *pgxpool.Pool
	admit    *admission.Admitter
	notifier RevocationNotifier
}

var _ nodesv1connect.NodesServiceHandler = (*Service)(nil)

// New returns the service. notifier may be nil.
func New(pool *pgxpool.Pool, admit *admission.Admitter, notifier RevocationNotifier) *Service {
	return &Service{pool: pool, admit: admit, notifier: notifier}
}

// nodeInTx describes a node of the caller's tenant as the transaction sees it.
func (s *Service) nodeInTx(ctx context.Context, tx *admission.Tx, id uuid.UUID) (*nodesv1.Node, error) {
	n, err := tx.Q.GetNodeWithSession(ctx, db.GetNodeWithSessionParams{TenantID: auth.Caller(ctx).TenantID, ID: id})
	if err != nil {
		return nil, apierr.NotFoundIfNoRows(err, "node %s not found", id)
	}
	return nodeToProto(db.ListNodesRow(n), false)
}

// List lists the tenant's nodes matching the request's filters, ordered by id, with their GPU
// health (and their GPUs', with the inventory).
func (s *Service) List(ctx context.Context, req *nodesv1.ListRequest) (*nodesv1.ListResponse, error) {
	f, err := parseFilter(req, req.Online)
	if err != nil {
		return nil, err
	}
	size, after, err := page.Of(req.GetPageSize(), req.GetPageToken(), uuid.Nil)
	if err != nil {
		return nil, err
	}
	tenant := auth.Caller(ctx).TenantID
	q := db.New(s.pool)
	rows, err := q.ListNodesFiltered(ctx, db.ListNodesFilteredParams{
		TenantID: tenant, After: after, Lim: size + 1,
		Selector: f.selector, States: f.states, Online: f.online,
		GpuModel: f.gpuModel, Pool: f.pool, HostnamePrefix: f.hostnamePrefix,
	})
	if err != nil {
		return nil, fmt.Errorf("list nodes: %w", err)
	}
	rows, next := page.Next(rows, size, func(n db.ListNodesFilteredRow) uuid.UUID { return n.ID })
	res := &nodesv1.ListResponse{NextPageToken: next, Nodes: make([]*nodesv1.Node, 0, len(rows))}
	for _, n := range rows {
		pn, err := nodeToProto(db.ListNodesRow(n), req.GetIncludeInventory())
		if err != nil {
			return nil, err
		}
		res.Nodes = append(res.Nodes, pn)
	}
	if err := addGPUHealth(ctx, q, tenant, res.Nodes); err != nil {
		return nil, err
	}
	return res, nil
}

// Get returns a node of the tenant with its inventory and GPU health, or the reduced view of
// another tenant's node on which a placed or at-risk lease of the tenant holds an allocation (in
// a pool granted to it). Any other id is not found, with the same answer as an id that does not exist.
func (s *Service) Get(ctx context.Context, req *nodesv1.GetRequest) (*nodesv1.GetResponse, error) {
	id, err := apierr.ParseID("id", req.GetId())
	if err != nil {
		return nil, err
	}
	tenant := auth.Caller(ctx).TenantID
	q := db.New(s.pool)
	n, err := q.GetNodeWithSession(ctx, db.GetNodeWithSessionParams{TenantID: tenant, ID: id})
	if errors.Is(err, pgx.ErrNoRows) {
		leased, err := q.GetLeasedNode(ctx, db.GetLeasedNodeParams{TenantID: tenant, ID: id})
		if err != nil {
			return nil, apierr.NotFoundIfNoRows(err, "node %s not found", id)
		}
		pn, err := reducedNode(leased)
		if err != nil {
			return nil, err
		}
		return &nodesv1.GetResponse{Node: pn}, nil
	}
	if err != nil {
		return nil, err
	}
	pn, err := nodeToProto(db.ListNodesRow(n), true)
	if err != nil {
		return nil, err
	}
	if err := addGPUHealth(ctx, q, tenant, []*nodesv1.Node{pn}); err != nil {
		return nil, err
	}
	return &nodesv1.GetResponse{Node: pn}, nil
}

// Revoke revokes a node of the tenant; revoking a revoked node changes nothing. After the
// commit, the notifier tells the gateways to end the node's session.
func (s *Service) Revoke(ctx context.Context, req *nodesv1.RevokeRequest) (*nodesv1.RevokeResponse, error) {
	id, err := apierr.ParseID("id", req.GetId())
	if err != nil {
		return nil, err
	}
	p := auth.Caller(ctx)
	res, err := admission.Do(ctx, s.admit, req, func(ctx context.Context, tx *admission.Tx) (*nodesv1.RevokeResponse, error) {
		tx.Target("node", id)
		key := db.GetNodeWithSessionParams{TenantID: p.TenantID, ID: id}
		n, err := tx.Q.GetNodeWithSession(ctx, key)
		if err != nil {
			return nil, apierr.NotFoundIfNoRows(err, "node %s not found", id)
		}
		if n.RevokedAt == nil {
			if _, err := tx.Q.RevokeNode(ctx, db.RevokeNodeParams{TenantID: p.TenantID, ID: id}); err != nil {
				return nil, apierr.NotFoundIfNoRows(err, "node %s not found", id)
			}
			if n, err = tx.Q.GetNodeWithSession(ctx, key); err != nil {
				return nil, apierr.NotFoundIfNoRows(err, "node %s not found", id)
			}
			if err := tx.Emit(p.TenantID, event.NodeRevoked{ID: id, Hostname: n.Hostname}); err != nil {
				return nil, err
			}
			// A revoked node is no longer schedulable.
			if err := fleet.Enqueue(ctx, tx.Q, fleet.KindLifecycle, id); err != nil {
				return nil, err
			}
		}
		pn, err := nodeToProto(db.ListNodesRow(n), false)
		if err != nil {
			return nil, err
		}
		return &nodesv1.RevokeResponse{Node: pn}, nil
	})
	if err != nil {
		return nil, err
	}
	if s.notifier != nil {
		// Also for a node revoked before: a session that outlived a lost notification ends now.
		s.notifier.NodesRevoked(context.WithoutCancel(ctx), []uuid.UUID{id})
	}
	return res, nil
}
