// Package usage implements bettercompute.usage.v1.UsageService: metered usage, from the hourly
// totals that the usage job (workers/usage) adds up from the metering records. By default a
// tenant reads its own leases' usage, in whichever pools it leased from; with the owned-pools
// scope, a pool's owner reads every tenant's usage of its pools, by tenant, to charge grantees
// back. Query returns amounts in quantity-seconds; Export returns hours, for billing systems.
// Both carry the part of the GPU usage held on a GPU while it was unhealthy, for credits.
package usage

import (
	"context"
	"sync/atomic"
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
	// MaxTotalRows is the most totals a query returns; a period with more is refused (read
	// MaxTotalRows+1 at most), since totals cut short would read as complete.
	MaxTotalRows = 10_000
)

// Service answers UsageService calls.
type Service struct {
	pool *pgxpool.Pool
	// rowsRead counts the export rows read from the database, for the tests: a refused export
	// must read none, and a page no more than its size (and one to learn that another follows).
	rowsRead atomic.Int64
}

var _ usagev1connect.UsageServiceHandler = (*Service)(nil)

// New returns the service.
func New(pool *pgxpool.Pool) *Service { return &Service{pool: pool} }

// filter is what Query and Export read the same way: the period, the pool and the scope.
type filter struct {
	start, end time.Time
	poolID     *uuid.UUID
	// ownedPools is SCOPE_OWNED_POOLS: every tenant's usage in the caller's tenant's pools,
	// instead of the caller's tenant's own usage.
	ownedPools bool
}

// readFilter validates the fields Query and Export share.
func readFilter(start, end *timestamppb.Timestamp, poolID string, scope usagev1.Scope) (filter, error) {
	var f filter
	if start == nil {
		return f, apierr.InvalidArgument("start_time", "is required")
	}
	if end == nil {
		return f, apierr.InvalidArgument("end_time", "is required")
	}
	if err := start.CheckValid(); err != nil {
		return f, apierr.InvalidArgument("start_time", "%v", err)
	}
	if err := end.CheckValid(); err != nil {
		return f, apierr.InvalidArgument("end_time", "%v", err)
	}
	f.start, f.end = start.AsTime(), end.AsTime()
	switch {
	case !f.end.After(f.start):
		return f, apierr.InvalidArgument("end_time", "must be after start_time")
	case f.end.Sub(f.start) > MaxPeriod:
		return f, apierr.InvalidArgument("end_time", "the period must be at most %v", MaxPeriod)
	}
	switch scope {
	case usagev1.Scope_SCOPE_UNSPECIFIED:
	case usagev1.Scope_SCOPE_OWNED_POOLS:
		f.ownedPools = true
	default:
		return f, apierr.InvalidArgument("scope", "must be SCOPE_UNSPECIFIED or SCOPE_OWNED_POOLS, got %d", scope)
	}
	if poolID != "" {
		id, err := uuid.Parse(poolID)
		if err != nil {
			return f, apierr.InvalidArgument("pool_id", "must be a UUID, got %q", poolID)
		}
		f.poolID = &id
	}
	return f, nil
}

// Query returns the usage of the hours that start in the period.
//
// With the default scope it is the caller's tenant's own leases' usage, in its pools and in
// pools granted to it; a pool_id filter narrows that, so a grantee filtering by the owner's
// pool sees only its own usage there. With SCOPE_OWNED_POOLS it is every tenant's usage (the
// owner's and its grantees') in the pools the caller's tenant owns now, by tenant: usage
// metered in a pool deleted since is kept, but no longer attributable to an owner, so it is not
// in this scope (each tenant still reads its own with the default scope).
func (s *Service) Query(ctx context.Context, req *usagev1.QueryRequest) (*usagev1.QueryResponse, error) {
	f, err := readFilter(req.GetStartTime(), req.GetEndTime(), req.GetPoolId(), req.GetScope())
	if err != nil {
		return nil, err
	}
	tenant := auth.Caller(ctx).TenantID
	q := db.New(s.pool)
	res := &usagev1.QueryResponse{}
	if f.ownedPools {
		err = ownedPoolsUsage(ctx, q, tenant, f, req.GetHourly(), res)
	} else {
		err = ownUsage(ctx, q, tenant, f, req.GetHourly(), res)
	}
	if err != nil {
		return nil, err
	}
	n, lag, err := capacity.UsageBacklog(ctx, s.pool)
	if err != nil {
		return nil, err
	}
	res.UnaggregatedRecords, res.AggregationLag = n, durationpb.New(lag)
	return res, nil
}

// ownUsage fills res with the tenant's own leases' usage.
func ownUsage(ctx context.Context, q *db.Queries, tenant uuid.UUID, f filter, hourly bool, res *usagev1.QueryResponse) error {
	totals, err := q.QueryUsageTotals(ctx, db.QueryUsageTotalsParams{TenantID: tenant, StartsAt: f.start, EndsAt: f.end, PoolID: f.poolID, Lim: MaxTotalRows + 1})
	if err != nil {
		return err
	}
	if len(totals) > MaxTotalRows {
		return tooManyTotals()
	}
	for _, t := range totals {
		res.Totals = append(res.Totals, &usagev1.Usage{
			TenantId: tenant.String(), PoolId: t.PoolID.String(), Resource: t.Resource, Model: t.Model, Amount: t.Amount, UnhealthyAmount: t.UnhealthyAmount,
			ActiveAmount: t.ActiveAmount, MeanUtilization: meanUtilization(t.UtilSum, t.UtilGpus),
		})
	}
	if !hourly {
		return nil
	}
	hours, err := q.QueryUsageHourly(ctx, db.QueryUsageHourlyParams{TenantID: tenant, StartsAt: f.start, EndsAt: f.end, PoolID: f.poolID, Lim: maxHourRows})
	if err != nil {
		return err
	}
	for _, h := range hours {
		res.Hours = append(res.Hours, &usagev1.Usage{
			TenantId: tenant.String(), PoolId: h.PoolID.String(), Resource: h.Resource, Model: h.Model, Amount: h.Amount,
			UnhealthyAmount: h.UnhealthyAmount, Hour: timestamppb.New(h.Hour),
			ActiveAmount: h.ActiveAmount, MeanUtilization: meanUtilization(h.UtilSum, h.UtilGpus),
		})
	}
	return nil
}

// ownedPoolsUsage fills res with every tenant's usage in the pools the tenant owns.
func ownedPoolsUsage(ctx context.Context, q *db.Queries, owner uuid.UUID, f filter, hourly bool, res *usagev1.QueryResponse) error {
	totals, err := q.QueryOwnedPoolsUsageTotals(ctx, db.QueryOwnedPoolsUsageTotalsParams{TenantID: owner, StartsAt: f.start, EndsAt: f.end, PoolID: f.poolID, Lim: MaxTotalRows + 1})
	if err != nil {
		return err
	}
	if len(totals) > MaxTotalRows {
		return tooManyTotals()
	}
	for _, t := range totals {
		res.Totals = append(res.Totals, &usagev1.Usage{
			TenantId: t.TenantID.String(), PoolId: t.PoolID.String(), Resource: t.Resource, Model: t.Model, Amount: t.Amount, UnhealthyAmount: t.UnhealthyAmount,
			ActiveAmount: t.ActiveAmount, MeanUtilization: meanUtilization(t.UtilSum, t.UtilGpus),
		})
	}
	if !hourly {
		return nil
	}
	hours, err := q.QueryOwnedPoolsUsageHourly(ctx, db.QueryOwnedPoolsUsageHourlyParams{
		TenantID: owner, StartsAt: f.start, EndsAt: f.end, PoolID: f.poolID, Lim: maxHourRows,
	})
	if err != nil {
		return err
	}
	for _, h := range hours {
		res.Hours = append(res.Hours, &usagev1.Usage{
			TenantId: h.TenantID.String(), PoolId: h.PoolID.String(), Resource: h.Resource, Model: h.Model, Amount: h.Amount,
			UnhealthyAmount: h.UnhealthyAmount, Hour: timestamppb.New(h.Hour),
			ActiveAmount: h.ActiveAmount, MeanUtilization: meanUtilization(h.UtilSum, h.UtilGpus),
		})
	}
	return nil
}

// tooManyTotals refuses a query of more than MaxTotalRows totals.
func tooManyTotals() error {
	return apierr.FailedPreconditionField("end_time", "the period has more than %d totals: narrow the period, pick a pool or use usage/export", MaxTotalRows)
}

// meanUtilization is the mean of utilisation samples from their sum and count; nil without any,
// so that "no sample" does not read as an idle 0%.
func meanUtilization(sum float64, n int64) *float64 {
	if n <= 0 {
		return nil
	}
	m := sum / float64(n)
	return &m
}
