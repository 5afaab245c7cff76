// Package usage implements bettercompute.usage.v1.UsageService: the caller's tenant's metered
// usage, from the hourly totals that the usage job (workers/usage) adds up from the metering
// records.
package usage

import (
	"context"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/better-compute/better-compute/gen/db"
	usagev1 "github.com/better-compute/better-compute/gen/go/bettercompute/usage/v1"
	"github.com/better-compute/better-compute/gen/go/bettercompute/usage/v1/usagev1connect"
	"github.com/better-compute/better-compute/internal/apierr"
	"github.com/better-compute/better-compute/internal/auth"
	"github.com/better-compute/better-compute/internal/capacity"
)

// Limits of a query.
const (
	MaxPeriod   = 366 * 24 * time.Hour
	maxHourRows = 10000
)

// Service answers UsageService calls.
type Service struct {
	pool *pgxpool.Pool
}

var _ usagev1connect.UsageServiceHandler = (*Service)(nil)

// New returns the service.
func New(pool *pgxpool.Pool) *Service { return &Service{pool: pool} }

// Query returns the usage of the hours that start in the period.
func (s *Service) Query(ctx context.Context, req *usagev1.QueryRequest) (*usagev1.QueryResponse, error) {
	if req.GetStartTime() == nil {
		return nil, apierr.InvalidArgument("start_time", "is required")
	}
	if req.GetEndTime() == nil {
		return nil, apierr.InvalidArgument("end_time", "is required")
	}
	if err := req.GetStartTime().CheckValid(); err != nil {
		return nil, apierr.InvalidArgument("start_time", "%v", err)
	}
	if err := req.GetEndTime().CheckValid(); err != nil {
		return nil, apierr.InvalidArgument("end_time", "%v", err)
	}
	start, end := req.GetStartTime().AsTime(), req.GetEndTime().AsTime()
	switch {
	case !end.After(start):
		return nil, apierr.InvalidArgument("end_time", "must be after start_time")
	case end.Sub(start) > MaxPeriod:
		return nil, apierr.InvalidArgument("end_time", "the period must be at most %v", MaxPeriod)
	}
	var poolID *uuid.UUID
	if req.GetPoolId() != "" {
		id, err := uuid.Parse(req.GetPoolId())
		if err != nil {
			return nil, apierr.InvalidArgument("pool_id", "must be a UUID, got %q", req.GetPoolId())
		}
		poolID = &id
	}
	p := auth.Caller(ctx)
	q := db.New(s.pool)
	res := &usagev1.QueryResponse{}
	totals, err := q.QueryUsageTotals(ctx, db.QueryUsageTotalsParams{TenantID: p.TenantID, StartsAt: start, EndsAt: end, PoolID: poolID})
	if err != nil {
		return nil, err
	}
	for _, t := range totals {
		res.Totals = append(res.Totals, &usagev1.Usage{PoolId: t.PoolID.String(), Resource: t.Resource, Model: t.Model, Amount: t.Amount})
	}
	if req.GetHourly() {
		hours, err := q.QueryUsageHourly(ctx, db.QueryUsageHourlyParams{TenantID: p.TenantID, StartsAt: start, EndsAt: end, PoolID: poolID, Lim: maxHourRows})
		if err != nil {
			return nil, err
		}
		for _, h := range hours {
			res.Hours = append(res.Hours, &usagev1.Usage{
				PoolId: h.PoolID.String(), Resource: h.Resource, Model: h.Model, Amount: h.Amount, Hour: timestamppb.New(h.Hour),
			})
		}
	}
	n, lag, err := capacity.UsageBacklog(ctx, s.pool)
	if err != nil {
		return nil, err
	}
	res.UnaggregatedRecords, res.AggregationLag = n, durationpb.New(lag)
	return res, nil
}
