package pools

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/better-compute/better-compute/gen/db"
	poolsv1 "github.com/better-compute/better-compute/gen/go/bettercompute/pools/v1"
	"github.com/better-compute/better-compute/internal/admission"
	"github.com/better-compute/better-compute/internal/apierr"
	"github.com/better-compute/better-compute/internal/auth"
	"github.com/better-compute/better-compute/internal/capacity"
	"github.com/better-compute/better-compute/internal/event"
	"github.com/better-compute/better-compute/internal/page"
)

// Bounds of ListPreemptions' period.
const (
	defaultPreemptionsSince = 24 * time.Hour
	maxPreemptionsSince     = 31 * 24 * time.Hour
)

// revokedReason is the reason of the grantee's pending leases that a revoke fails.
const revokedReason = "the pool's grant to the tenant was revoked"

// toResources is an amount of capacity from the API as capacity.Resources; nil is nothing.
func toResources(r *poolsv1.Resources) capacity.Resources {
	return capacity.Resources{GPUs: maps.Clone(r.GetGpus()), CPUs: r.GetCpus(), MemoryBytes: r.GetMemoryBytes()}
}

// resourcesToProto is capacity.Resources in the API's form.
func resourcesToProto(r capacity.Resources) *poolsv1.Resources {
	return &poolsv1.Resources{Gpus: maps.Clone(r.GPUs), Cpus: r.CPUs, MemoryBytes: r.MemoryBytes}
}

// gpuField names one GPU model of an amount of capacity, as apierr's paths do.
func gpuField(field, model string) string { return fmt.Sprintf("%s.gpus[%q]", field, model) }

// checkResources checks the bounds of a requested amount of capacity, named field: at most
// capacity.MaxModels models, and every amount from 0 to capacity.MaxAmount (memory to
// capacity.MaxMemoryBytes).
func checkResources(field string, r capacity.Resources) error {
	if len(r.GPUs) > capacity.MaxModels {
		return apierr.InvalidArgument(field+".gpus", "at most %d models, got %d", capacity.MaxModels, len(r.GPUs))
	}
	var errs []error
	for _, m := range r.Models() {
		if n := r.GPUs[m]; n < 0 || n > capacity.MaxAmount {
			errs = append(errs, apierr.InvalidArgument(gpuField(field, m), "must be 0 to %d, got %d", capacity.MaxAmount, n))
		}
	}
	if r.CPUs < 0 || r.CPUs > capacity.MaxAmount {
		errs = append(errs, apierr.InvalidArgument(field+".cpus", "must be 0 to %d, got %d", capacity.MaxAmount, r.CPUs))
	}
	if r.MemoryBytes < 0 || r.MemoryBytes > capacity.MaxMemoryBytes {
		errs = append(errs, apierr.InvalidArgument(field+".memory_bytes", "must be 0 to %d, got %d", capacity.MaxMemoryBytes, r.MemoryBytes))
	}
	return apierr.Join(errs...)
}

// checkModels refuses GPU models the pool does not have.
func checkModels(field string, r capacity.Resources, have []db.PoolGPUModelsRow) error {
	names := make([]string, len(have))
	for i, m := range have {
		names[i] = m.Model
	}
	var errs []error
	for _, m := range r.Models() {
		if !slices.Contains(names, m) {
			has := "none"
			if len(names) > 0 {
				has = strings.Join(names, ", ")
			}
			errs = append(errs, apierr.FailedPreconditionField(gpuField(field, m), "the pool has no %q GPUs (it has %s)", m, has))
		}
	}
	return apierr.Join(errs...)
}

// less is a less b, resource by resource and never below zero; GPU models left with none are
// left out.
func less(a, b capacity.Resources) capacity.Resources {
	out := capacity.Resources{CPUs: max(0, a.CPUs-b.CPUs), MemoryBytes: max(0, a.MemoryBytes-b.MemoryBytes)}
	for m, n := range a.GPUs {
		if d := n - b.GPUs[m]; d > 0 {
			if out.GPUs == nil {
				out.GPUs = map[string]int32{}
			}
			out.GPUs[m] = d
		}
	}
	return out
}

// describeGrants turns grants into their API form with what each grantee's placed and at-risk
// leases in the pool hold (used), the part beyond nominal (borrowed), and what it may still
// borrow, in one statement however many grants there are. tenant is the caller's, which sees
// every grant given.
func describeGrants(ctx context.Context, q *db.Queries, tenant uuid.UUID, rows []db.PoolGrant) ([]*poolsv1.Grant, error) {
	out := make([]*poolsv1.Grant, len(rows))
	if len(rows) == 0 {
		return out, nil
	}
	ids := make([]uuid.UUID, len(rows))
	for i, g := range rows {
		ids[i] = g.ID
	}
	usage, err := q.PoolGrantUsage(ctx, db.PoolGrantUsageParams{Ids: ids, TenantID: tenant})
	if err != nil {
		return nil, err
	}
	used := make(map[uuid.UUID]*capacity.Resources, len(rows))
	for _, u := range usage {
		r := used[u.GrantID]
		if r == nil {
			r = &capacity.Resources{}
			used[u.GrantID] = r
		}
		if u.Gpus > 0 {
			if r.GPUs == nil {
				r.GPUs = map[string]int32{}
			}
			r.GPUs[u.GpuModel] += int32(u.Gpus)
		}
		r.CPUs += int32(u.Cpus)
		r.MemoryBytes += u.MemoryBytes
	}
	for i, g := range rows {
		nominal, err := capacity.DecodeResources(g.Nominal)
		if err != nil {
			return nil, fmt.Errorf("grant %s: nominal: %w", g.ID, err)
		}
		limit, err := capacity.DecodeResources(g.BorrowingLimit)
		if err != nil {
			return nil, fmt.Errorf("grant %s: borrowing limit: %w", g.ID, err)
		}
		var u capacity.Resources
		if r := used[g.ID]; r != nil {
			u = *r
		}
		borrowed := less(u, nominal)
		out[i] = &poolsv1.Grant{
			Id: g.ID.String(), PoolId: g.PoolID.String(), TenantId: g.TenantID.String(),
			Nominal: resourcesToProto(nominal), BorrowingLimit: resourcesToProto(limit), Weight: g.Weight,
			Used: resourcesToProto(u), Borrowed: resourcesToProto(borrowed), Borrowable: resourcesToProto(less(limit, borrowed)),
			CreateTime: timestamppb.New(g.CreatedAt), UpdateTime: timestamppb.New(g.UpdatedAt),
		}
		if g.RevokedAt != nil {
			out[i].RevokeTime = timestamppb.New(*g.RevokedAt)
		}
	}
	return out, nil
}

// describeGrant is describeGrants of one grant.
func describeGrant(ctx context.Context, q *db.Queries, tenant uuid.UUID, g db.PoolGrant) (*poolsv1.Grant, error) {
	out, err := describeGrants(ctx, q, tenant, []db.PoolGrant{g})
	if err != nil {
		return nil, err
	}
	return out[0], nil
}

// grantEvent is the payload of a grant's events.
func grantEvent(g db.PoolGrant) event.PoolGrantChange {
	return event.PoolGrantChange{
		ID: g.PoolID, GrantID: g.ID, TenantID: g.TenantID,
		Nominal: g.Nominal, BorrowingLimit: g.BorrowingLimit, Weight: g.Weight,
	}
}

// Grant shares a pool of the caller's tenant with another, active tenant, or changes the active
// grant it has; after a revoke it grants anew. The placer then counts the new quotas.
func (s *Service) Grant(ctx context.Context, req *poolsv1.GrantRequest) (*poolsv1.GrantResponse, error) {
	p := auth.Caller(ctx)
	poolID, poolErr := apierr.ParseID("pool_id", req.GetPoolId())
	grantee, tenantErr := apierr.ParseID("tenant_id", req.GetTenantId())
	if tenantErr == nil && grantee == p.TenantID {
		tenantErr = apierr.InvalidArgument("tenant_id", "is the caller's tenant: a pool is granted to other tenants")
	}
	weight, weightErr := req.GetWeight(), error(nil)
	switch {
	case weight == 0:
		weight = 1
	case weight < 1 || weight > capacity.MaxWeight:
		weightErr = apierr.InvalidArgument("weight", "must be 1 to %d (0 means 1), got %d", capacity.MaxWeight, weight)
	}
	nominal, limit := toResources(req.GetNominal()), toResources(req.GetBorrowingLimit())
	if err := apierr.Join(poolErr, tenantErr, checkResources("nominal", nominal), checkResources("borrowing_limit", limit), weightErr); err != nil {
		return nil, err
	}
	nominalJSON, err := nominal.Encode()
	if err != nil {
		return nil, err
	}
	limitJSON, err := limit.Encode()
	if err != nil {
		return nil, err
	}
	return admission.Do(ctx, s.admit, req, func(ctx context.Context, tx *admission.Tx) (*poolsv1.GrantResponse, error) {
		if _, err := tx.Q.LockPool(ctx, db.LockPoolParams{TenantID: p.TenantID, ID: poolID}); err != nil {
			return nil, apierr.NotFoundIfNoRows(err, "pool %s not found", poolID)
		}
		t, err := tx.Q.GranteeTenant(ctx, grantee)
		if errors.Is(err, pgx.ErrNoRows) || err == nil && (t.SuspendedAt != nil || t.DeletedAt != nil) {
			// One answer for all three, so that whether a tenant exists says nothing more.
			return nil, apierr.FailedPreconditionField("tenant_id", "%s is not an active tenant", grantee)
		}
		if err != nil {
			return nil, err
		}
		models, err := tx.Q.PoolGPUModels(ctx, poolID)
		if err != nil {
			return nil, err
		}
		if err := apierr.Join(checkModels("nominal", nominal, models), checkModels("borrowing_limit", limit, models)); err != nil {
			return nil, err
		}
		row, err := tx.Q.UpsertPoolGrant(ctx, db.UpsertPoolGrantParams{
			ID: uuid.Must(uuid.NewV7()), PoolID: poolID, OwnerTenantID: p.TenantID, TenantID: grantee,
			Nominal: nominalJSON, BorrowingLimit: limitJSON, Weight: weight,
		})
		if err != nil {
			return nil, err
		}
		tx.Target("grant", row.ID)
		for _, t := range []uuid.UUID{p.TenantID, grantee} {
			if err := tx.Emit(t, event.PoolGranted{PoolGrantChange: grantEvent(row)}); err != nil {
				return nil, err
			}
		}
		// The quotas the placer shares the pool by changed.
		if err := capacity.EnqueuePlacer(ctx, tx.Q, poolID); err != nil {
			return nil, err
		}
		tx.Wake(capacity.PlacerKind)
		g, err := describeGrant(ctx, tx.Q, p.TenantID, row)
		if err != nil {
			return nil, err
		}
		return &poolsv1.GrantResponse{Grant: g}, nil
	})
}

// RevokeGrant ends the active grant of a pool of the caller's tenant to a tenant, failing the
// grantee's pending leases in the pool in the same transaction; its placed leases run to their
// end. With no active grant it returns the latest revoked one unchanged.
func (s *Service) RevokeGrant(ctx context.Context, req *poolsv1.RevokeGrantRequest) (*poolsv1.RevokeGrantResponse, error) {
	poolID, poolErr := apierr.ParseID("pool_id", req.GetPoolId())
	grantee, tenantErr := apierr.ParseID("tenant_id", req.GetTenantId())
	if err := apierr.Join(poolErr, tenantErr); err != nil {
		return nil, err
	}
	p := auth.Caller(ctx)
	return admission.Do(ctx, s.admit, req, func(ctx context.Context, tx *admission.Tx) (*poolsv1.RevokeGrantResponse, error) {
		if _, err := tx.Q.LockPool(ctx, db.LockPoolParams{TenantID: p.TenantID, ID: poolID}); err != nil {
			return nil, apierr.NotFoundIfNoRows(err, "pool %s not found", poolID)
		}
		key := db.RevokePoolGrantParams{OwnerTenantID: p.TenantID, PoolID: poolID, TenantID: grantee}
		row, err := tx.Q.RevokePoolGrant(ctx, key)
		if errors.Is(err, pgx.ErrNoRows) {
			// Revoked before, or never granted.
			if row, err = tx.Q.LatestPoolGrant(ctx, db.LatestPoolGrantParams(key)); err != nil {
				return nil, apierr.NotFoundIfNoRows(err, "pool %s has no grant to tenant %s", poolID, grantee)
			}
			tx.Target("grant", row.ID)
			g, err := describeGrant(ctx, tx.Q, p.TenantID, row)
			if err != nil {
				return nil, err
			}
			return &poolsv1.RevokeGrantResponse{Grant: g}, nil
		}
		if err != nil {
			return nil, err
		}
		tx.Target("grant", row.ID)
		pending, err := tx.Q.LockPendingGranteeLeases(ctx, db.LockPendingGranteeLeasesParams{
			OwnerTenantID: p.TenantID, PoolID: poolID, GranteeTenantID: grantee,
		})
		if err != nil {
			return nil, err
		}
		if _, err := capacity.EndLeases(ctx, tx.Q, pending, capacity.LeaseFailed, revokedReason, nil, tx.Emit); err != nil {
			return nil, err
		}
		for _, t := range []uuid.UUID{p.TenantID, grantee} {
			if err := tx.Emit(t, event.PoolGrantRevoked{PoolGrantChange: grantEvent(row)}); err != nil {
				return nil, err
			}
		}
		// The owner's nominal quota grew by the grant's.
		if err := capacity.EnqueuePlacer(ctx, tx.Q, poolID); err != nil {
			return nil, err
		}
		tx.Wake(capacity.PlacerKind)
		g, err := describeGrant(ctx, tx.Q, p.TenantID, row)
		if err != nil {
			return nil, err
		}
		return &poolsv1.RevokeGrantResponse{Grant: g}, nil
	})
}

// ListGrants lists, by id, the grants of the caller's tenant's pools and its own grants of
// other tenants' pools, with what each grantee uses and borrows.
func (s *Service) ListGrants(ctx context.Context, req *poolsv1.ListGrantsRequest) (*poolsv1.ListGrantsResponse, error) {
	poolID, poolErr := apierr.ParseOptionalID("pool_id", req.GetPoolId())
	size, after, pageErr := page.Of(req.GetPageSize(), req.GetPageToken(), uuid.Nil)
	if err := apierr.Join(poolErr, pageErr); err != nil {
		return nil, err
	}
	tenant := auth.Caller(ctx).TenantID
	q := db.New(s.pool)
	if poolID != nil {
		ok, err := q.PoolVisibleToTenant(ctx, db.PoolVisibleToTenantParams{PoolID: *poolID, TenantID: tenant})
		if err != nil {
			return nil, err
		}
		if !ok {
			return nil, apierr.NotFound("pool %s not found", *poolID)
		}
	}
	rows, err := q.ListPoolGrants(ctx, db.ListPoolGrantsParams{
		TenantID: tenant, PoolID: poolID, IncludeRevoked: req.GetIncludeRevoked(), After: after, Lim: size + 1,
	})
	if err != nil {
		return nil, err
	}
	rows, next := page.Next(rows, size, func(g db.PoolGrant) uuid.UUID { return g.ID })
	out, err := describeGrants(ctx, q, tenant, rows)
	if err != nil {
		return nil, err
	}
	return &poolsv1.ListGrantsResponse{Grants: out, NextPageToken: next}, nil
}

// preemptionKey is where a page of ListPreemptions starts: before the previous page's last
// preemption, newest first. The zero key is the first page.
type preemptionKey struct {
	At time.Time `json:"t"`
	ID uuid.UUID `json:"i"`
}

// ListPreemptions lists, newest first, the leases preempted in the caller's tenant's pools since
// since_time, whichever tenant held them.
func (s *Service) ListPreemptions(ctx context.Context, req *poolsv1.ListPreemptionsRequest) (*poolsv1.ListPreemptionsResponse, error) {
	poolID, poolErr := apierr.ParseOptionalID("pool_id", req.GetPoolId())
	size, before, pageErr := page.Of(req.GetPageSize(), req.GetPageToken(), preemptionKey{})
	now := time.Now()
	since, sinceErr := now.Add(-defaultPreemptionsSince), error(nil)
	if ts := req.GetSinceTime(); ts != nil {
		switch err := ts.CheckValid(); {
		case err != nil:
			sinceErr = apierr.InvalidArgument("since_time", "%v", err)
		case ts.AsTime().Before(now.Add(-maxPreemptionsSince)):
			sinceErr = apierr.InvalidArgument("since_time", "must be at most %v ago", maxPreemptionsSince)
		default:
			since = ts.AsTime()
		}
	}
	if err := apierr.Join(poolErr, sinceErr, pageErr); err != nil {
		return nil, err
	}
	tenant := auth.Caller(ctx).TenantID
	q := db.New(s.pool)
	if poolID != nil {
		if _, err := q.GetPool(ctx, db.GetPoolParams{TenantID: tenant, ID: *poolID}); err != nil {
			return nil, apierr.NotFoundIfNoRows(err, "pool %s not found", *poolID)
		}
	}
	params := db.ListPoolPreemptionsParams{TenantID: tenant, PoolID: poolID, Since: since, BeforeID: before.ID, Lim: size + 1}
	if !before.At.IsZero() {
		params.BeforeAt = &before.At
	}
	rows, err := q.ListPoolPreemptions(ctx, params)
	if err != nil {
		return nil, err
	}
	rows, next := page.Next(rows, size, func(r db.ListPoolPreemptionsRow) preemptionKey {
		return preemptionKey{At: r.PreemptedAt, ID: r.ID}
	})
	res := &poolsv1.ListPreemptionsResponse{NextPageToken: next}
	for _, r := range rows {
		res.Preemptions = append(res.Preemptions, &poolsv1.Preemption{
			LeaseId: r.ID.String(), PoolId: r.PoolID.String(), TenantId: r.TenantID.String(),
			Gpus: r.Gpus, GpuModel: r.GpuModel, Cpus: r.Cpus, MemoryBytes: r.MemoryBytes,
			Priority: r.Priority, Reason: r.Reason, PreemptTime: timestamppb.New(r.PreemptedAt),
		})
	}
	return res, nil
}
