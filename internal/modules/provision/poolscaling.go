package provision

import (
	"context"
	"errors"
	"fmt"
	"time"

	"connectrpc.com/connect"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/better-compute/better-compute/gen/db"
	provisionmodulev1 "github.com/better-compute/better-compute/gen/go/bettercompute/modules/provision/v1"
	provisiondb "github.com/better-compute/better-compute/gen/modules/provision/db"
	"github.com/better-compute/better-compute/internal/admission"
	"github.com/better-compute/better-compute/internal/apierr"
	"github.com/better-compute/better-compute/internal/auth"
	"github.com/better-compute/better-compute/internal/page"
	"github.com/better-compute/better-compute/internal/reconcile"
)

// Bounds of a pool's scaling settings.
const (
	maxScaleUpDelay  = time.Hour
	minScaleDownIdle = time.Second
	maxScaleDownIdle = 7 * 24 * time.Hour
	// decisionsShown is how many of the latest decisions poolScaling/get returns.
	decisionsShown = 20
	// machinesShown bounds the machines poolScaling/get returns.
	machinesShown = 200
)

// SetPoolScaling makes a pool of the caller's tenant autoscale with a class of the tenant, or
// changes its settings, and wakes the autoscaler for it.
func (s *service) SetPoolScaling(ctx context.Context, req *provisionmodulev1.SetPoolScalingRequest) (*provisionmodulev1.SetPoolScalingResponse, error) {
	poolID, err := apierr.ParseID("poolId", req.GetPoolId())
	if err != nil {
		return nil, err
	}
	if !namePattern.MatchString(req.GetClass()) {
		return nil, apierr.InvalidArgument("class", nameRule)
	}
	limits := s.cfg.Autoscaling.withDefaults()
	most := int32(limits.MaxMachinesPerPool)
	switch {
	case req.GetMax() < 1 || req.GetMax() > most:
		return nil, apierr.InvalidArgument("max", "must be 1 to %d (modules.provision.autoscaling.maxMachinesPerPool)", most)
	case req.GetMin() < 0 || req.GetMin() > req.GetMax():
		return nil, apierr.InvalidArgument("min", "must be 0 to max (%d)", req.GetMax())
	case req.GetScaleUpDelayMs() < 0 || req.GetScaleUpDelayMs() > maxScaleUpDelay.Milliseconds():
		return nil, apierr.InvalidArgument("scaleUpDelayMs", "must be 0 to %d (%s)", maxScaleUpDelay.Milliseconds(), maxScaleUpDelay)
	case req.GetScaleDownIdleMs() < minScaleDownIdle.Milliseconds() || req.GetScaleDownIdleMs() > maxScaleDownIdle.Milliseconds():
		return nil, apierr.InvalidArgument("scaleDownIdleMs", "must be %d to %d (%s to %s)",
			minScaleDownIdle.Milliseconds(), maxScaleDownIdle.Milliseconds(), minScaleDownIdle, maxScaleDownIdle)
	}
	p := auth.Caller(ctx)
	return admission.Do(ctx, s.admit, req, func(ctx context.Context, tx *admission.Tx) (*provisionmodulev1.SetPoolScalingResponse, error) {
		tx.Target("pool", poolID)
		q := provisiondb.New(tx.DB())
		if _, err := q.GetTenantPool(ctx, provisiondb.GetTenantPoolParams{TenantID: p.TenantID, ID: poolID}); err != nil {
			if errors.Is(err, pgx.ErrNoRows) {
				return nil, apierr.InvalidArgument("poolId", "pool %s not found", poolID)
			}
			return nil, err
		}
		c, err := q.GetClass(ctx, provisiondb.GetClassParams{TenantID: p.TenantID, Name: req.GetClass()})
		if errors.Is(err, pgx.ErrNoRows) {
			return nil, apierr.InvalidArgument("class", "machine class %q not found", req.GetClass())
		}
		if err != nil {
			return nil, err
		}
		shape, ok, err := classShape(c.Provider, c.Params)
		if err != nil || !ok {
			return nil, apierr.InvalidArgument("class", "machine class %q has no machine shape: set params.shape {gpus, gpuModel, cpus, memoryBytes}", c.Name)
		}
		if _, err := q.GetPoolScaling(ctx, provisiondb.GetPoolScalingParams{TenantID: p.TenantID, PoolID: poolID}); errors.Is(err, pgx.ErrNoRows) {
			n, err := q.CountPoolScalings(ctx, p.TenantID)
			if err != nil {
				return nil, err
			}
			if most := int64(limits.MaxPoolsPerTenant); n >= most {
				return nil, &apierr.Error{Code: connect.CodeResourceExhausted, Msg: fmt.Sprintf(
					"modules.provision.autoscaling.maxPoolsPerTenant: the tenant has %d scaled pools and may have at most %d", n, most)}
			}
		} else if err != nil {
			return nil, err
		}
		row, err := q.UpsertPoolScaling(ctx, provisiondb.UpsertPoolScalingParams{
			PoolID: poolID, TenantID: p.TenantID, Class: req.GetClass(), MinMachines: req.GetMin(), MaxMachines: req.GetMax(),
			ScaleUpDelayMs: req.GetScaleUpDelayMs(), ScaleDownIdleMs: req.GetScaleDownIdleMs(),
		})
		if err != nil {
			return nil, fmt.Errorf("set the scaling of pool %s: %w", poolID, err)
		}
		// The pool can now grow by max machines of the class's shape: leases/create and the
		// placer take leases its members cannot hold but such machines can.
		if err := tx.Q.SetPoolGrowth(ctx, db.SetPoolGrowthParams{
			PoolID: poolID, GpuModel: shape.GPUModel, Gpus: shape.GPUs, Cpus: shape.CPUs,
			MemoryBytes: shape.MemoryBytes, Machines: req.GetMax(),
		}); err != nil {
			return nil, fmt.Errorf("set the growth of pool %s: %w", poolID, err)
		}
		if err := reconcile.Enqueue(ctx, tx.Q, AutoscalerKind, poolID.String()); err != nil {
			return nil, err
		}
		tx.Wake(AutoscalerKind)
		out, err := s.scalingProto(ctx, q, row)
		if err != nil {
			return nil, err
		}
		return &provisionmodulev1.SetPoolScalingResponse{Scaling: out}, nil
	})
}

// GetPoolScaling returns a scaled pool's settings, its machines and the latest decisions.
func (s *service) GetPoolScaling(ctx context.Context, req *provisionmodulev1.GetPoolScalingRequest) (*provisionmodulev1.GetPoolScalingResponse, error) {
	poolID, err := apierr.ParseID("poolId", req.GetPoolId())
	if err != nil {
		return nil, err
	}
	q := provisiondb.New(s.pool)
	row, err := q.GetPoolScaling(ctx, provisiondb.GetPoolScalingParams{TenantID: auth.Caller(ctx).TenantID, PoolID: poolID})
	if err != nil {
		return nil, apierr.NotFoundIfNoRows(err, "pool %s does not autoscale", poolID)
	}
	out, err := s.scalingProto(ctx, q, row)
	if err != nil {
		return nil, err
	}
	res := &provisionmodulev1.GetPoolScalingResponse{Scaling: out}
	ms, err := q.ListPoolMachines(ctx, provisiondb.ListPoolMachinesParams{PoolID: &poolID, Lim: machinesShown})
	if err != nil {
		return nil, err
	}
	for _, m := range ms {
		res.Machines = append(res.Machines, machineProto(m, nil))
	}
	ds, err := q.ListScalingDecisions(ctx, provisiondb.ListScalingDecisionsParams{PoolID: poolID, Lim: decisionsShown})
	if err != nil {
		return nil, err
	}
	for _, d := range ds {
		pd := &provisionmodulev1.ScalingDecision{Action: d.Action, Count: d.Count, Reason: d.Reason, Time: timestamppb.New(d.At)}
		for _, id := range d.MachineIds {
			pd.MachineIds = append(pd.MachineIds, id.String())
		}
		res.Decisions = append(res.Decisions, pd)
	}
	return res, nil
}

// ListPoolScaling lists the caller tenant's scaled pools by pool id.
func (s *service) ListPoolScaling(ctx context.Context, req *provisionmodulev1.ListPoolScalingRequest) (*provisionmodulev1.ListPoolScalingResponse, error) {
	size, after, err := page.Of(req.GetPageSize(), req.GetPageToken(), uuid.Nil)
	if err != nil {
		return nil, err
	}
	q := provisiondb.New(s.pool)
	rows, err := q.ListPoolScalings(ctx, provisiondb.ListPoolScalingsParams{TenantID: auth.Caller(ctx).TenantID, After: after, Lim: size + 1})
	if err != nil {
		return nil, err
	}
	rows, next := page.Next(rows, size, func(r provisiondb.ProvisionPoolScaling) uuid.UUID { return r.PoolID })
	ids := make([]uuid.UUID, len(rows))
	for i, r := range rows {
		ids[i] = r.PoolID
	}
	counts, err := poolMachineCounts(ctx, q, ids)
	if err != nil {
		return nil, err
	}
	res := &provisionmodulev1.ListPoolScalingResponse{NextPageToken: next}
	for _, r := range rows {
		out := scalingProto(r)
		out.Machines = counts[r.PoolID]
		res.Scalings = append(res.Scalings, out)
	}
	return res, nil
}

// DeletePoolScaling stops autoscaling a pool of the caller's tenant; its machines stay.
func (s *service) DeletePoolScaling(ctx context.Context, req *provisionmodulev1.DeletePoolScalingRequest) (*provisionmodulev1.DeletePoolScalingResponse, error) {
	poolID, err := apierr.ParseID("poolId", req.GetPoolId())
	if err != nil {
		return nil, err
	}
	p := auth.Caller(ctx)
	return admission.Do(ctx, s.admit, req, func(ctx context.Context, tx *admission.Tx) (*provisionmodulev1.DeletePoolScalingResponse, error) {
		tx.Target("pool", poolID)
		n, err := provisiondb.New(tx.DB()).DeletePoolScaling(ctx, provisiondb.DeletePoolScalingParams{TenantID: p.TenantID, PoolID: poolID})
		if err != nil {
			return nil, err
		}
		if n == 0 {
			return nil, apierr.NotFound("pool %s does not autoscale", poolID)
		}
		if err := tx.Q.DeletePoolGrowth(ctx, poolID); err != nil {
			return nil, fmt.Errorf("delete the growth of pool %s: %w", poolID, err)
		}
		return &provisionmodulev1.DeletePoolScalingResponse{}, nil
	})
}

// scalingProto is a pool's scaling with its count of machines.
func (s *service) scalingProto(ctx context.Context, q *provisiondb.Queries, r provisiondb.ProvisionPoolScaling) (*provisionmodulev1.PoolScaling, error) {
	counts, err := poolMachineCounts(ctx, q, []uuid.UUID{r.PoolID})
	if err != nil {
		return nil, err
	}
	out := scalingProto(r)
	out.Machines = counts[r.PoolID]
	return out, nil
}

func poolMachineCounts(ctx context.Context, q *provisiondb.Queries, ids []uuid.UUID) (map[uuid.UUID]int32, error) {
	rows, err := q.CountPoolLiveMachines(ctx, ids)
	if err != nil {
		return nil, fmt.Errorf("count the pools' machines: %w", err)
	}
	out := make(map[uuid.UUID]int32, len(rows))
	for _, r := range rows {
		out[r.PoolID] = r.Machines
	}
	return out, nil
}

func scalingProto(r provisiondb.ProvisionPoolScaling) *provisionmodulev1.PoolScaling {
	return &provisionmodulev1.PoolScaling{
		PoolId: r.PoolID.String(), Class: r.Class, Min: r.MinMachines, Max: r.MaxMachines,
		ScaleUpDelayMs: r.ScaleUpDelayMs, ScaleDownIdleMs: r.ScaleDownIdleMs,
		CreateTime: timestamppb.New(r.CreatedAt), UpdateTime: timestamppb.New(r.UpdatedAt),
	}
}
