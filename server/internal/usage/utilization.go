package usage

import (
	"context"
	"fmt"
	"time"

	"github.com/google/uuid"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/better-compute/better-compute/gen/db"
	usagev1 "github.com/better-compute/better-compute/gen/go/bettercompute/usage/v1"
	"github.com/better-compute/better-compute/internal/apierr"
	"github.com/better-compute/better-compute/internal/auth"
)

// Bounds of a utilisation series: a step is whole minutes from MinStep to MaxStep, and a period
// at most MaxPoints steps (and MaxPeriod), so a call reads and returns at most MaxPoints points.
const (
	MinStep   = time.Minute
	MaxStep   = 24 * time.Hour
	MaxPoints = 1440
)

// Utilization returns the per-minute utilisation of the GPUs in scope summed into steps: of the
// caller's tenant's own leases, or with SCOPE_OWNED_POOLS of every tenant's leases in the pools
// the caller's tenant owns now, narrowed to a lease or a pool when asked. A lease or pool outside
// the scope gives no points, as one without samples does: a caller learns nothing of another
// tenant's leases by naming them.
func (s *Service) Utilization(ctx context.Context, req *usagev1.UtilizationRequest) (*usagev1.UtilizationResponse, error) {
	f, err := readFilter(req.GetStartTime(), req.GetEndTime(), req.GetPoolId(), req.GetScope())
	if err != nil {
		return nil, err
	}
	if req.GetStep() == nil {
		return nil, apierr.InvalidArgument("step", "is required")
	}
	if err := req.GetStep().CheckValid(); err != nil {
		return nil, apierr.InvalidArgument("step", "%v", err)
	}
	step := req.GetStep().AsDuration()
	switch {
	case step < MinStep || step > MaxStep:
		return nil, apierr.InvalidArgument("step", "must be from %v to %v, got %v", MinStep, MaxStep, step)
	case step%time.Minute != 0:
		return nil, apierr.InvalidArgument("step", "must be whole minutes, got %v", step)
	case f.end.Sub(f.start) > step*MaxPoints:
		return nil, apierr.InvalidArgument("step", "the period is more than %d steps of %v: widen the step or narrow the period", MaxPoints, step)
	}
	var lease *uuid.UUID
	if id := req.GetLeaseId(); id != "" {
		l, err := uuid.Parse(id)
		if err != nil {
			return nil, apierr.InvalidArgument("lease_id", "must be a UUID, got %q", id)
		}
		lease = &l
	}
	rows, err := db.New(s.pool).UtilizationSeries(ctx, db.UtilizationSeriesParams{
		StepSeconds: int64(step / time.Second), StartsAt: f.start, EndsAt: f.end, LeaseID: lease, PoolID: f.poolID,
		Owned: f.ownedPools, TenantID: auth.Caller(ctx).TenantID, Lim: MaxPoints,
	})
	if err != nil {
		return nil, fmt.Errorf("read the utilisation series: %w", err)
	}
	res := &usagev1.UtilizationResponse{Points: make([]*usagev1.UtilizationPoint, 0, len(rows))}
	for _, r := range rows {
		res.Points = append(res.Points, point(r, step, f.end))
	}
	return res, nil
}

// point is a step's sums as a UtilizationPoint; the last step, cut at end, is averaged over its
// own length.
func point(r db.UtilizationSeriesRow, step time.Duration, end time.Time) *usagev1.UtilizationPoint {
	width := min(step, end.Sub(r.StepStart))
	p := &usagev1.UtilizationPoint{
		Time: timestamppb.New(r.StepStart), PeakMemoryBytes: r.MemoryPeakBytes,
		GpuSecondsHeld: r.GpuSeconds, GpuSecondsActive: r.ActiveGpuSeconds,
	}
	if width > 0 {
		p.HeldGpus = float64(r.GpuSeconds) / width.Seconds()
	}
	if r.GpuSeconds > 0 {
		p.ActiveShare = float64(r.ActiveGpuSeconds) / float64(r.GpuSeconds)
	}
	if m := meanUtilization(r.UtilSum, r.UtilGpus); m != nil {
		p.MeanUtilization = *m
	}
	return p
}
