// Package pools implements bettercompute.pools.v1.PoolsService: the pools of the caller's
// tenant, their membership (a label selector, explicit node ids, and the nodes that joined with
// a join token naming the pool), their capacity computed from the members' inventories, the
// tenant's quota in each, and their grants to other tenants (grants.go). A pool granted to the
// caller's tenant is shown with the grant and without its membership; other tenants' pools are
// simply not found.
package pools

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"time"

	"connectrpc.com/connect"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/better-compute/better-compute/gen/db"
	poolsv1 "github.com/better-compute/better-compute/gen/go/bettercompute/pools/v1"
	"github.com/better-compute/better-compute/gen/go/bettercompute/pools/v1/poolsv1connect"
	"github.com/better-compute/better-compute/internal/admission"
	"github.com/better-compute/better-compute/internal/apierr"
	"github.com/better-compute/better-compute/internal/auth"
	"github.com/better-compute/better-compute/internal/capacity"
	"github.com/better-compute/better-compute/internal/database"
	"github.com/better-compute/better-compute/internal/event"
	"github.com/better-compute/better-compute/internal/fleet"
	"github.com/better-compute/better-compute/internal/gpuhealth"
	"github.com/better-compute/better-compute/internal/page"
	"github.com/better-compute/better-compute/internal/quota"
)

// Limits of a pool.
const (
	maxDescriptionLen = 500
	MaxNodeIDs        = 10000
)

var poolName = regexp.MustCompile(`^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$`)

// Service answers PoolsService calls.
type Service struct {
	pool  *pgxpool.Pool
	admit *admission.Admitter
}

var _ poolsv1connect.PoolsServiceHandler = (*Service)(nil)

// New returns the service.
func New(pool *pgxpool.Pool, admit *admission.Admitter) *Service {
	return &Service{pool: pool, admit: admit}
}

// nodeIDs parses and deduplicates member ids, keeping their order.
func nodeIDs(in []string) ([]uuid.UUID, error) {
	if len(in) > MaxNodeIDs {
		return nil, apierr.InvalidArgument("node_ids", "at most %d nodes, got %d", MaxNodeIDs, len(in))
	}
	out := make([]uuid.UUID, 0, len(in))
	seen := make(map[uuid.UUID]bool, len(in))
	for _, s := range in {
		id, err := uuid.Parse(s)
		if err != nil {
			return nil, apierr.InvalidArgument("node_ids", "%q is not a UUID", s)
		}
		if !seen[id] {
			seen[id] = true
			out = append(out, id)
		}
	}
	return out, nil
}

// checkMembers refuses node ids that are not nodes of the tenant.
func checkMembers(ctx context.Context, q *db.Queries, tenant uuid.UUID, ids []uuid.UUID) error {
	if len(ids) == 0 {
		return nil
	}
	found, err := q.TenantNodesAmong(ctx, db.TenantNodesAmongParams{TenantID: tenant, Ids: ids})
	if err != nil {
		return err
	}
	for _, id := range ids {
		if !slices.Contains(found, id) {
			return &apierr.Error{Code: connect.CodeFailedPrecondition, Field: "node_ids", Msg: fmt.Sprintf("node %s is not a node of the tenant", id)}
		}
	}
	return nil
}

func checkDescription(d string) error {
	if len(d) > maxDescriptionLen {
		return apierr.InvalidArgument("description", "must be at most %d characters", maxDescriptionLen)
	}
	return nil
}

// preemptionGrace reads a pool's grace period, in the milliseconds pools store: whole
// milliseconds from 0 to capacity.MaxPreemptionGrace.
func preemptionGrace(d *durationpb.Duration) (int64, error) {
	const field = "preemption_grace_period"
	if err := d.CheckValid(); err != nil {
		return 0, apierr.InvalidArgument(field, "%v", err)
	}
	v := d.AsDuration()
	switch {
	case v < 0 || v > capacity.MaxPreemptionGrace:
		return 0, apierr.InvalidArgument(field, "must be 0s to %v, got %v", capacity.MaxPreemptionGrace, v)
	case v%time.Millisecond != 0:
		return 0, apierr.InvalidArgument(field, "must be whole milliseconds, got %v", v)
	}
	return v.Milliseconds(), nil
}

// Create makes a pool.
func (s *Service) Create(ctx context.Context, req *poolsv1.CreateRequest) (*poolsv1.CreateResponse, error) {
	if !poolName.MatchString(req.GetName()) {
		return nil, apierr.InvalidArgument("name", "must be 1 to 63 lower-case letters, digits and '-', starting and ending with a letter or digit")
	}
	if err := checkDescription(req.GetDescription()); err != nil {
		return nil, err
	}
	if err := fleet.ValidateLabels("node_selector", req.GetNodeSelector()); err != nil {
		return nil, err
	}
	ids, err := nodeIDs(req.GetNodeIds())
	if err != nil {
		return nil, err
	}
	grace := capacity.DefaultPreemptionGrace.Milliseconds()
	if req.GetPreemptionGracePeriod() != nil {
		if grace, err = preemptionGrace(req.GetPreemptionGracePeriod()); err != nil {
			return nil, err
		}
	}
	ports, err := fleet.ValidateTunnelPorts("tunnel_ports", req.GetTunnelPorts())
	if err != nil {
		return nil, err
	}
	var policy []byte
	if req.GetGpuHealthPolicy() != nil {
		if policy, err = healthPolicy(req.GetGpuHealthPolicy()); err != nil {
			return nil, err
		}
	}
	levels, err := topologyLevels(req.GetTopologyLevels())
	if err != nil {
		return nil, err
	}
	wait, err := gangReservationWait(req.GetGangReservationWait())
	if err != nil {
		return nil, err
	}
	idlePol, err := idlePolicy(req.GetIdlePolicy())
	if err != nil {
		return nil, err
	}
	rem, err := remediationPolicy(req.GetRemediation(), DefaultFailureDomainLabel)
	if err != nil {
		return nil, err
	}
	p := auth.Caller(ctx)
	return admission.Do(ctx, s.admit, req, func(ctx context.Context, tx *admission.Tx) (*poolsv1.CreateResponse, error) {
		if err := checkMembers(ctx, tx.Q, p.TenantID, ids); err != nil {
			return nil, err
		}
		if err := quota.Check(ctx, tx.Q, p.TenantID, quota.Pools, 1); err != nil {
			return nil, err
		}
		id := uuid.Must(uuid.NewV7())
		row, err := tx.Q.CreatePool(ctx, db.CreatePoolParams{
			ID: id, TenantID: p.TenantID, Name: req.GetName(), Description: req.GetDescription(),
			NodeSelector: fleet.EncodeLabels(req.GetNodeSelector()), NodeIds: ids,
			PreemptionGraceMs: &grace, PriorityPreemption: req.GetPriorityPreemption(), TunnelPorts: ports,
			GpuHealthPolicy: policy, TopologyLevels: levels, GangReservationWaitMs: &wait,
			RemediationAuto: &rem.auto, RemediationMaxNodes: &rem.maxNodes, RemediationDomain: &rem.domain,
			RemediationOverride: rem.override, IdlePolicy: idlePol,
		})
		if database.IsUniqueViolation(err) {
			return nil, apierr.AlreadyExists("the tenant has a pool named %q", req.GetName())
		}
		if err != nil {
			return nil, err
		}
		tx.Target("pool", id)
		// The members with signals are judged again: by the pool's policy, and by the other
		// pools' no longer alone.
		if err := enqueueHealth(ctx, tx.Q, p.TenantID, id); err != nil {
			return nil, err
		}
		tx.Wake(gpuhealth.ReconcileKind)
		if err := tx.Emit(p.TenantID, event.PoolCreated{PoolDefinition: eventData(row)}); err != nil {
			return nil, err
		}
		out, err := describe(ctx, tx.Q, p.TenantID, []db.Pool{row}, nil)
		if err != nil {
			return nil, err
		}
		return &poolsv1.CreateResponse{Pool: out[0]}, nil
	})
}

// Get returns a pool of the caller's tenant with its capacity, or a pool granted to it with the
// grant; any other id is not found.
func (s *Service) Get(ctx context.Context, req *poolsv1.GetRequest) (*poolsv1.GetResponse, error) {
	id, err := apierr.ParseID("id", req.GetId())
	if err != nil {
		return nil, err
	}
	tenant := auth.Caller(ctx).TenantID
	q := db.New(s.pool)
	row, err := q.GetPool(ctx, db.GetPoolParams{TenantID: tenant, ID: id})
	var grants map[uuid.UUID]db.PoolGrant
	if errors.Is(err, pgx.ErrNoRows) {
		var g db.GetGrantedPoolRow
		g, err = q.GetGrantedPool(ctx, db.GetGrantedPoolParams{TenantID: tenant, ID: id})
		row, grants = g.Pool, map[uuid.UUID]db.PoolGrant{id: g.PoolGrant}
	}
	if err != nil {
		return nil, apierr.NotFoundIfNoRows(err, "pool %s not found", id)
	}
	out, err := describe(ctx, q, tenant, []db.Pool{row}, grants)
	if err != nil {
		return nil, err
	}
	return &poolsv1.GetResponse{Pool: out[0]}, nil
}

// listKey is where a page of List starts: after pool ID among the caller's tenant's own pools,
// or, once those are done (Granted), among the pools granted to it.
type listKey struct {
	Granted bool      `json:"g,omitempty"`
	ID      uuid.UUID `json:"i"`
}

// List lists the pools of the caller's tenant, oldest first, with their capacity, then the pools
// granted to it by id, with the grant.
func (s *Service) List(ctx context.Context, req *poolsv1.ListRequest) (*poolsv1.ListResponse, error) {
	size, after, err := page.Of(req.GetPageSize(), req.GetPageToken(), listKey{})
	if err != nil {
		return nil, err
	}
	tenant := auth.Caller(ctx).TenantID
	q := db.New(s.pool)
	var rows []db.Pool
	grants := map[uuid.UUID]db.PoolGrant{}
	if !after.Granted {
		if rows, err = q.ListPools(ctx, db.ListPoolsParams{TenantID: tenant, After: after.ID, Lim: size + 1}); err != nil {
			return nil, err
		}
		after = listKey{Granted: true}
	}
	// Granted pools fill what the tenant's own leave of the page, and one more to tell whether
	// another page follows.
	if n := int32(len(rows)); n <= size {
		granted, err := q.ListGrantedPools(ctx, db.ListGrantedPoolsParams{TenantID: tenant, After: after.ID, Lim: size - n + 1})
		if err != nil {
			return nil, err
		}
		for _, g := range granted {
			rows = append(rows, g.Pool)
			grants[g.Pool.ID] = g.PoolGrant
		}
	}
	rows, next := page.Next(rows, size, func(p db.Pool) listKey { return listKey{Granted: p.TenantID != tenant, ID: p.ID} })
	out, err := describe(ctx, q, tenant, rows, grants)
	if err != nil {
		return nil, err
	}
	return &poolsv1.ListResponse{Pools: out, NextPageToken: next}, nil
}

// updatable lists the fields Update changes, for its errors.
const updatable = "description, node_selector, node_ids, preemption_grace_period, priority_preemption, tunnel_ports, gpu_health_policy, topology_levels, gang_reservation_wait, remediation and idle_policy"

// Update changes the fields named in the mask; the placer then places pending leases on the
// new members.
func (s *Service) Update(ctx context.Context, req *poolsv1.UpdateRequest) (*poolsv1.UpdateResponse, error) {
	id, err := apierr.ParseID("id", req.GetId())
	if err != nil {
		return nil, err
	}
	paths := req.GetUpdateMask().GetPaths()
	if len(paths) == 0 {
		return nil, apierr.InvalidArgument("update_mask", "name at least one of %s", updatable)
	}
	var params db.UpdatePoolParams
	// health: the members' GPU health may change (their policy or the members themselves do).
	health := false
	for _, path := range paths {
		switch path {
		case "description":
			if err := checkDescription(req.GetDescription()); err != nil {
				return nil, err
			}
			d := req.GetDescription()
			params.Description = &d
		case "node_selector":
			if err := fleet.ValidateLabels("node_selector", req.GetNodeSelector()); err != nil {
				return nil, err
			}
			params.NodeSelector = fleet.EncodeLabels(req.GetNodeSelector())
			health = true
		case "node_ids":
			if params.NodeIds, err = nodeIDs(req.GetNodeIds()); err != nil {
				return nil, err
			}
			health = true
		case healthPolicyField:
			if params.GpuHealthPolicy, err = healthPolicy(req.GetGpuHealthPolicy()); err != nil {
				return nil, err
			}
			health = true
		case "preemption_grace_period":
			if req.GetPreemptionGracePeriod() == nil {
				return nil, apierr.InvalidArgument("preemption_grace_period", "is required when update_mask names it (0s frees a preempted lease's devices at once)")
			}
			grace, err := preemptionGrace(req.GetPreemptionGracePeriod())
			if err != nil {
				return nil, err
			}
			params.PreemptionGraceMs = &grace
		case "priority_preemption":
			v := req.GetPriorityPreemption()
			params.PriorityPreemption = &v
		case "tunnel_ports":
			ports, err := fleet.ValidateTunnelPorts("tunnel_ports", req.GetTunnelPorts())
			if err != nil {
				return nil, err
			}
			if ports == nil {
				ports = []int32{} // none, rather than unchanged
			}
			params.TunnelPorts = ports
		case "topology_levels":
			if params.TopologyLevels, err = topologyLevels(req.GetTopologyLevels()); err != nil {
				return nil, err
			}
		case "gang_reservation_wait":
			if req.GetGangReservationWait() == nil {
				return nil, apierr.InvalidArgument("gang_reservation_wait", "is required when update_mask names it")
			}
			wait, err := gangReservationWait(req.GetGangReservationWait())
			if err != nil {
				return nil, err
			}
			params.GangReservationWaitMs = &wait
		case "idle_policy":
			if params.IdlePolicy, err = idlePolicy(req.GetIdlePolicy()); err != nil {
				return nil, err
			}
		case "remediation":
			rem, err := remediationPolicy(req.GetRemediation(), "")
			if err != nil {
				return nil, err
			}
			params.RemediationAuto, params.RemediationMaxNodes, params.RemediationDomain = &rem.auto, &rem.maxNodes, &rem.domain
			params.RemediationOverride = rem.override
		default:
			return nil, apierr.InvalidArgument("update_mask", "%q cannot be updated (%s)", path, updatable)
		}
	}
	p := auth.Caller(ctx)
	params.TenantID, params.ID = p.TenantID, id
	return admission.Do(ctx, s.admit, req, func(ctx context.Context, tx *admission.Tx) (*poolsv1.UpdateResponse, error) {
		tx.Target("pool", id)
		if _, err := tx.Q.LockPool(ctx, db.LockPoolParams{TenantID: p.TenantID, ID: id}); err != nil {
			return nil, apierr.NotFoundIfNoRows(err, "pool %s not found", id)
		}
		if err := checkMembers(ctx, tx.Q, p.TenantID, params.NodeIds); err != nil {
			return nil, err
		}
		if health {
			// The members before the change and after it: one that leaves is judged without
			// the pool's policy, one that joins with it.
			if err := enqueueHealth(ctx, tx.Q, p.TenantID, id); err != nil {
				return nil, err
			}
		}
		row, err := tx.Q.UpdatePool(ctx, params)
		if err != nil {
			return nil, apierr.NotFoundIfNoRows(err, "pool %s not found", id)
		}
		if health {
			if err := enqueueHealth(ctx, tx.Q, p.TenantID, id); err != nil {
				return nil, err
			}
			tx.Wake(gpuhealth.ReconcileKind)
		}
		if err := capacity.EnqueuePlacer(ctx, tx.Q, id); err != nil {
			return nil, err
		}
		tx.Wake(capacity.PlacerKind)
		if err := tx.Emit(p.TenantID, event.PoolUpdated{PoolDefinition: eventData(row)}); err != nil {
			return nil, err
		}
		out, err := describe(ctx, tx.Q, p.TenantID, []db.Pool{row}, nil)
		if err != nil {
			return nil, err
		}
		return &poolsv1.UpdateResponse{Pool: out[0]}, nil
	})
}

// Delete removes a pool without pending or running leases.
func (s *Service) Delete(ctx context.Context, req *poolsv1.DeleteRequest) (*poolsv1.DeleteResponse, error) {
	id, err := apierr.ParseID("id", req.GetId())
	if err != nil {
		return nil, err
	}
	p := auth.Caller(ctx)
	return admission.Do(ctx, s.admit, req, func(ctx context.Context, tx *admission.Tx) (*poolsv1.DeleteResponse, error) {
		tx.Target("pool", id)
		row, err := tx.Q.LockPool(ctx, db.LockPoolParams{TenantID: p.TenantID, ID: id})
		if err != nil {
			return nil, apierr.NotFoundIfNoRows(err, "pool %s not found", id)
		}
		n, err := tx.Q.CountActivePoolLeases(ctx, id)
		if err != nil {
			return nil, err
		}
		if n > 0 {
			return nil, apierr.FailedPrecondition("pool %s has %d pending or running leases; release them first", id, n)
		}
		// The members with signals are judged again, without the pool's policy.
		if err := enqueueHealth(ctx, tx.Q, p.TenantID, id); err != nil {
			return nil, err
		}
		tx.Wake(gpuhealth.ReconcileKind)
		if _, err := tx.Q.DeletePool(ctx, db.DeletePoolParams{TenantID: p.TenantID, ID: id}); err != nil {
			return nil, err
		}
		if err := tx.Emit(p.TenantID, event.PoolDeleted{ID: id, Name: row.Name}); err != nil {
			return nil, err
		}
		return &poolsv1.DeleteResponse{}, nil
	})
}

// SetQuota sets or (with no limit set) removes the caller's tenant's quota in a pool.
func (s *Service) SetQuota(ctx context.Context, req *poolsv1.SetQuotaRequest) (*poolsv1.SetQuotaResponse, error) {
	id, err := apierr.ParseID("pool_id", req.GetPoolId())
	if err != nil {
		return nil, err
	}
	qt := req.GetQuota()
	for field, v := range map[string]*int64{
		"quota.max_gpus": widen(qt.MaxGpus), "quota.max_cpus": widen(qt.MaxCpus),
		"quota.max_memory_bytes": qt.MaxMemoryBytes, "quota.max_leases": widen(qt.MaxLeases),
	} {
		if v != nil && *v < 0 {
			return nil, apierr.InvalidArgument(field, "must not be negative")
		}
	}
	p := auth.Caller(ctx)
	return admission.Do(ctx, s.admit, req, func(ctx context.Context, tx *admission.Tx) (*poolsv1.SetQuotaResponse, error) {
		tx.Target("pool", id)
		row, err := tx.Q.LockPool(ctx, db.LockPoolParams{TenantID: p.TenantID, ID: id})
		if err != nil {
			return nil, apierr.NotFoundIfNoRows(err, "pool %s not found", id)
		}
		key := db.DeletePoolQuotaParams{TenantID: p.TenantID, PoolID: id}
		if qt.MaxGpus == nil && qt.MaxCpus == nil && qt.MaxMemoryBytes == nil && qt.MaxLeases == nil {
			err = tx.Q.DeletePoolQuota(ctx, key)
		} else {
			_, err = tx.Q.UpsertPoolQuota(ctx, db.UpsertPoolQuotaParams{
				TenantID: p.TenantID, PoolID: id,
				MaxGpus: qt.MaxGpus, MaxCpus: qt.MaxCpus, MaxMemoryBytes: qt.MaxMemoryBytes, MaxLeases: qt.MaxLeases,
			})
		}
		if err != nil {
			return nil, err
		}
		if err := tx.Emit(p.TenantID, event.PoolQuotaSet{ID: id, TenantID: p.TenantID, Quota: event.PoolQuota{
			MaxGpus: qt.MaxGpus, MaxCpus: qt.MaxCpus, MaxMemoryBytes: qt.MaxMemoryBytes, MaxLeases: qt.MaxLeases,
		}}); err != nil {
			return nil, err
		}
		out, err := describe(ctx, tx.Q, p.TenantID, []db.Pool{row}, nil)
		if err != nil {
			return nil, err
		}
		return &poolsv1.SetQuotaResponse{Pool: out[0]}, nil
	})
}

func widen(v *int32) *int64 {
	if v == nil {
		return nil
	}
	w := int64(*v)
	return &w
}

// eventData is the payload of a pool's creation or change.
func eventData(p db.Pool) event.PoolDefinition {
	sel, _ := fleet.DecodeLabels(p.NodeSelector)
	return event.PoolDefinition{ID: p.ID, Name: p.Name, NodeSelector: sel, NodeIDs: append([]uuid.UUID{}, p.NodeIds...)}
}

// describe turns pools into their API form with capacity and quota, in a few statements however
// many pools there are. grants holds, by pool id, the grants to tenant (the caller's) of the pools
// of other tenants among rows: those are shown granted, with the grant, and without their
// membership or quota.
func describe(ctx context.Context, q *db.Queries, tenant uuid.UUID, rows []db.Pool, grants map[uuid.UUID]db.PoolGrant) ([]*poolsv1.Pool, error) {
	out := make([]*poolsv1.Pool, len(rows))
	if len(rows) == 0 {
		return out, nil
	}
	ids := make([]uuid.UUID, len(rows))
	var owned, grantIDs []uuid.UUID
	var granted []db.PoolGrant
	byID := make(map[uuid.UUID]*poolsv1.Pool, len(rows))
	tenantOf := make(map[uuid.UUID]uuid.UUID, len(rows))
	for i, r := range rows {
		policy, err := healthPolicyToProto(r.GpuHealthPolicy)
		if err != nil {
			return nil, fmt.Errorf("pool %s: %w", r.ID, err)
		}
		out[i] = &poolsv1.Pool{
			Id: r.ID.String(), TenantId: r.TenantID.String(), Name: r.Name, Description: r.Description,
			Capacity:   &poolsv1.Capacity{},
			CreateTime: timestamppb.New(r.CreatedAt), UpdateTime: timestamppb.New(r.UpdatedAt),
			PreemptionGracePeriod: durationpb.New(time.Duration(r.PreemptionGraceMs) * time.Millisecond),
			PriorityPreemption:    r.PriorityPreemption,
			TunnelPorts:           r.TunnelPorts,
			GpuHealthPolicy:       policy,
			TopologyLevels:        r.TopologyLevels,
			GangReservationWait:   durationpb.New(time.Duration(r.GangReservationWaitMs) * time.Millisecond),
			Remediation:           remediationToProto(r),
			IdlePolicy:            idlePolicyToProto(r.IdlePolicy),
		}
		ids[i], byID[r.ID], tenantOf[r.ID] = r.ID, out[i], r.TenantID
		if g, ok := grants[r.ID]; ok && r.TenantID != tenant {
			out[i].Granted = true
			granted, grantIDs = append(granted, g), append(grantIDs, r.ID)
			continue
		}
		owned = append(owned, r.ID)
		sel, err := fleet.DecodeLabels(r.NodeSelector)
		if err != nil {
			return nil, err
		}
		members := make([]string, len(r.NodeIds))
		for j, id := range r.NodeIds {
			members[j] = id.String()
		}
		out[i].NodeSelector, out[i].NodeIds = sel, members
	}
	if len(granted) > 0 {
		gs, err := describeGrants(ctx, q, tenant, granted)
		if err != nil {
			return nil, err
		}
		for i, g := range gs {
			byID[grantIDs[i]].Grant = g
		}
	}
	gpus, err := q.PoolGPUCapacity(ctx, ids)
	if err != nil {
		return nil, err
	}
	for _, g := range gpus {
		c := byID[g.PoolID].Capacity
		c.Gpus = append(c.Gpus, &poolsv1.GpuCapacity{
			Model: g.Model, Total: int32(g.Total), Schedulable: int32(g.Schedulable),
			Allocated: int32(g.Allocated), Available: int32(g.Available),
		})
	}
	caps, err := q.PoolNodeCapacity(ctx, ids)
	if err != nil {
		return nil, err
	}
	for _, n := range caps {
		c := byID[n.PoolID].Capacity
		c.Nodes, c.SchedulableNodes = int32(n.Nodes), int32(n.SchedulableNodes)
		c.Cpus, c.CpusAllocated, c.MemoryBytes, c.MemoryAllocatedBytes = n.Cpus, n.CpusUsed, n.MemoryBytes, n.MemoryUsed
	}
	if len(owned) == 0 {
		return out, nil
	}
	quotas, err := q.ListPoolQuotas(ctx, owned)
	if err != nil {
		return nil, err
	}
	for _, qt := range quotas {
		if tenantOf[qt.PoolID] == qt.TenantID {
			byID[qt.PoolID].Quota = quotaToProto(qt)
		}
	}
	return out, nil
}

func quotaToProto(q db.PoolQuota) *poolsv1.Quota {
	return &poolsv1.Quota{MaxGpus: q.MaxGpus, MaxCpus: q.MaxCpus, MaxMemoryBytes: q.MaxMemoryBytes, MaxLeases: q.MaxLeases}
}
