// Package leases implements bettercompute.leases.v1.LeasesService: leases of capacity from
// the pools of the caller's tenant and the pools granted to it (called pool leases in the code,
// after their table, pool_leases). leases/create admits a lease in one transaction: the pool's
// members must be able to hold it at all; in its own pool the tenant's pending and running leases
// must stay within its quota, in a granted pool the lease must fit the grant's nominal quota and
// borrowing limit together; the placer (workers/placer) then binds it to nodes and devices,
// borrowing and preempting as the grants say. Other tenants' leases are simply not found, and a
// lease is its tenant's even in another tenant's pool.
package leases

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/better-compute/better-compute/gen/db"
	leasesv1 "github.com/better-compute/better-compute/gen/go/bettercompute/leases/v1"
	"github.com/better-compute/better-compute/gen/go/bettercompute/leases/v1/leasesv1connect"
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

// Limits of a lease.
const (
	MaxDuration    = 366 * 24 * time.Hour
	maxTolerations = 20
	maxTaintPart   = 253
)

// Service answers LeasesService calls.
type Service struct {
	pool  *pgxpool.Pool
	admit *admission.Admitter
	pokes pokes
	// shapes keeps what each pool's members offer, for admission (shape.go).
	shapes shapes
}

var _ leasesv1connect.LeasesServiceHandler = (*Service)(nil)

// New returns the service.
func New(pool *pgxpool.Pool, admit *admission.Admitter) *Service {
	return &Service{pool: pool, admit: admit}
}

// pokeAfterCommit has the placer queued for a pool once tx commits, and then woken.
func (s *Service) pokeAfterCommit(tx *admission.Tx, poolID uuid.UUID) {
	tx.AfterCommit(func(ctx context.Context) { s.pokes.run(ctx, poolID, s.poke) })
	tx.Wake(capacity.PlacerKind)
}

// poke queues the placer for a pool after a commit. It runs outside the call's transaction on
// purpose: every leases/create of a pool would otherwise queue on the lock of the pool's one
// queue row until its commit. A lost poke only delays placement until the placer's resync.
func (s *Service) poke(ctx context.Context, poolID uuid.UUID) {
	_ = capacity.EnqueuePlacer(context.WithoutCancel(ctx), db.New(s.pool), poolID) // on error the resync finds the pool
}

func validateTolerations(in []*leasesv1.Toleration) ([]fleet.Toleration, error) {
	if len(in) > maxTolerations {
		return nil, apierr.InvalidArgument("tolerations", "at most %d", maxTolerations)
	}
	out := make([]fleet.Toleration, 0, len(in))
	for i, t := range in {
		field := fmt.Sprintf("tolerations[%d]", i)
		switch t.GetOperator() {
		case "", "Equal":
			if t.GetKey() == "" {
				return nil, apierr.InvalidArgument(field+".key", "is required unless the operator is Exists")
			}
		case "Exists":
			if t.GetValue() != "" {
				return nil, apierr.InvalidArgument(field+".value", "must be empty with the operator Exists")
			}
		default:
			return nil, apierr.InvalidArgument(field+".operator", "must be Equal or Exists, got %q", t.GetOperator())
		}
		switch t.GetEffect() {
		case "", "NoSchedule", "PreferNoSchedule", "NoExecute":
		default:
			return nil, apierr.InvalidArgument(field+".effect", "must be empty, NoSchedule, PreferNoSchedule or NoExecute, got %q", t.GetEffect())
		}
		if len(t.GetKey()) > maxTaintPart || len(t.GetValue()) > maxTaintPart {
			return nil, apierr.InvalidArgument(field, "key and value must be at most %d characters", maxTaintPart)
		}
		out = append(out, fleet.Toleration{Key: t.GetKey(), Operator: t.GetOperator(), Value: t.GetValue(), Effect: t.GetEffect()})
	}
	return out, nil
}

// Create admits a pending lease.
func (s *Service) Create(ctx context.Context, req *leasesv1.CreateRequest) (*leasesv1.CreateResponse, error) {
	poolID, err := apierr.ParseID("pool_id", req.GetPoolId())
	if err != nil {
		return nil, err
	}
	g, err := gangOf(req)
	if err != nil {
		return nil, err
	}
	// What admission counts: a gang's GPUs all together.
	areq := g.withGPUs(req)
	switch {
	case req.GetGpus() < 0:
		return nil, apierr.InvalidArgument("gpus", "must not be negative")
	case req.GetCpus() < 0:
		return nil, apierr.InvalidArgument("cpus", "must not be negative")
	case req.GetMemoryBytes() < 0:
		return nil, apierr.InvalidArgument("memory_bytes", "must not be negative")
	case areq.GetGpus() == 0 && req.GetCpus() == 0 && req.GetMemoryBytes() == 0:
		return nil, apierr.InvalidArgument("gpus", "ask for GPUs, or for CPUs and memory")
	case req.GetGpus() > 0 && (req.GetCpus() > 0 || req.GetMemoryBytes() > 0):
		return nil, apierr.InvalidArgument("cpus", "a lease takes GPUs, or CPUs and memory, not both")
	case req.GetGpus() == 0 && req.GetGpuModel() != "":
		return nil, apierr.InvalidArgument("gpu_model", "only goes with gpus")
	}
	if pr := req.GetPriority(); pr < capacity.MinPriority || pr > capacity.MaxPriority {
		return nil, apierr.InvalidArgument("priority", "must be %d to %d, got %d", capacity.MinPriority, capacity.MaxPriority, pr)
	}
	topology, err := topologyFromProto(req.GetTopology())
	if err != nil {
		return nil, err
	}
	d, err := duration("duration", req.GetDuration())
	if err != nil {
		return nil, err
	}
	tols, err := validateTolerations(req.GetTolerations())
	if err != nil {
		return nil, err
	}
	var resID *uuid.UUID
	if req.GetReservationId() != "" {
		id, err := apierr.ParseID("reservation_id", req.GetReservationId())
		if err != nil {
			return nil, err
		}
		resID = &id
	}
	tolJSON, err := encodeTolerations(tols)
	if err != nil {
		return nil, err
	}
	p := auth.Caller(ctx)
	lease := func(model string) db.CreatePoolLeaseParams {
		return db.CreatePoolLeaseParams{
			ID: uuid.Must(uuid.NewV7()), TenantID: p.TenantID, PoolID: poolID, PrincipalID: &p.ID, ReservationID: resID,
			Gpus: areq.GetGpus(), GpuModel: model, Cpus: req.GetCpus(), MemoryBytes: req.GetMemoryBytes(),
			Spread: req.GetSpread(), Tolerations: tolJSON, DurationMs: d.Milliseconds(), Priority: req.GetPriority(),
			Topology: topology, Nodes: g.nodes, GpusPerNode: g.perNode, GangLevel: g.level, GangLevelRequired: g.required,
			OnUnhealthyMember: string(g.onUnhealthy), IdleOptOut: req.GetIdleOptOut(),
		}
	}
	// The common lease (no gang level, reservation or idle opt-out) in a pool of the tenant's own
	// whose cached shape admits it needs none of the checks before the insert but the pool's
	// lookup, which the insert does itself (createOwn).
	quick := g.level == "" && resID == nil && !req.GetIdleOptOut()
	return admission.Do(ctx, s.admit, req, func(ctx context.Context, tx *admission.Tx) (*leasesv1.CreateResponse, error) {
		row, u, ok, err := s.createOwn(ctx, tx, quick, p.TenantID, poolID, areq, lease)
		if err != nil {
			return nil, err
		}
		if !ok {
			if row, err = s.create(ctx, tx.Q, p.TenantID, poolID, g, req, areq, resID, lease); err != nil {
				return nil, err
			}
			if u, err = tx.Q.LeaseAdmissionUsage(ctx, db.LeaseAdmissionUsageParams{TenantID: p.TenantID, PoolID: poolID}); err != nil {
				return nil, fmt.Errorf("read lease usage: %w", err)
			}
		}
		id := row.ID
		if err := admitUsage(ctx, u, areq); err != nil {
			return nil, err
		}
		tx.Target("lease", id)
		if err := tx.Emit(p.TenantID, event.LeaseCreated{LeaseChange: event.LeaseChange{
			ID: id, PoolID: poolID, State: string(capacity.LeasePending),
		}}); err != nil {
			return nil, err
		}
		s.pokeAfterCommit(tx, poolID)
		return &leasesv1.CreateResponse{Lease: toProto(row, nil)}, nil
	})
}

// createOwn inserts the lease in one statement with the pool's lookup, and reads the usage
// admitUsage checks in the same round trip, when quick says the lease needs no other check
// before its insert and the pool's cached shape admits it: one round trip instead of three. ok is
// false, and nothing was inserted, when the shape is not cached or the pool is not the tenant's
// own (it may be granted to it), and create must then admit the lease. Either way the checks run
// in the order create runs them: the shape only ever admits here, so the first error of a lease
// that reaches the insert is still the usage's.
func (s *Service) createOwn(ctx context.Context, tx *admission.Tx, quick bool, tenant, poolID uuid.UUID, areq *leasesv1.CreateRequest, lease func(model string) db.CreatePoolLeaseParams) (db.PoolLease, db.LeaseAdmissionUsageRow, bool, error) {
	var none db.LeaseAdmissionUsageRow
	if !quick {
		return db.PoolLease{}, none, false, nil
	}
	model, ok := s.shapes.admits(poolID, areq)
	if !ok {
		return db.PoolLease{}, none, false, nil
	}
	// The usage read goes right after the insert, in its round trip: it sees the counters the
	// insert's trigger bumped and locked (admitUsage).
	usage := db.New(tx.Following())
	params := db.LeaseAdmissionUsageParams{TenantID: tenant, PoolID: poolID}
	if _, err := usage.LeaseAdmissionUsage(ctx, params); !errors.Is(err, database.ErrFollowing) {
		return db.PoolLease{}, none, false, fmt.Errorf("queue the lease usage read: %w", err)
	}
	row, err := tx.Q.CreateOwnPoolLease(ctx, db.CreateOwnPoolLeaseParams(lease(model)))
	u, uerr := usage.LeaseAdmissionUsage(ctx, params) // read it in every case, to free the slot
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return db.PoolLease{}, none, false, nil
	case err != nil:
		return db.PoolLease{}, none, false, err
	case uerr != nil:
		return db.PoolLease{}, none, false, fmt.Errorf("read lease usage: %w", uerr)
	}
	return row, u, true, nil
}

// create checks that the tenant may ask the pool for the lease and that the pool can hold it,
// then inserts it.
func (s *Service) create(ctx context.Context, q *db.Queries, tenant, poolID uuid.UUID, g gang, req, areq *leasesv1.CreateRequest, resID *uuid.UUID, lease func(model string) db.CreatePoolLeaseParams) (db.PoolLease, error) {
	grant, levels, err := poolAccess(ctx, q, tenant, poolID)
	if err != nil {
		return db.PoolLease{}, err
	}
	if err := g.checkLevel(levels); err != nil {
		return db.PoolLease{}, err
	}
	if req.GetIdleOptOut() {
		if err := admitIdleOptOut(ctx, q, tenant, poolID); err != nil {
			return db.PoolLease{}, err
		}
	}
	model, err := s.admitShape(ctx, q, poolID, areq)
	if err != nil {
		return db.PoolLease{}, err
	}
	if grant != nil {
		if resID != nil {
			return db.PoolLease{}, apierr.FailedPreconditionField("reservation_id", "reservations are for the pool's own tenant; pool %s is granted to the caller's", poolID)
		}
		if err := admitGrant(*grant, model, areq); err != nil {
			return db.PoolLease{}, err
		}
	}
	if resID != nil {
		r, err := q.GetReservation(ctx, db.GetReservationParams{TenantID: tenant, ID: *resID})
		switch {
		case errors.Is(err, pgx.ErrNoRows) || (err == nil && r.PoolID != poolID):
			return db.PoolLease{}, apierr.FailedPreconditionField("reservation_id", "the pool has no reservation %s", *resID)
		case err != nil:
			return db.PoolLease{}, err
		case r.State != "active":
			return db.PoolLease{}, apierr.FailedPreconditionField("reservation_id", "reservation %s is %s", *resID, r.State)
		case !r.EndsAt.After(time.Now()):
			return db.PoolLease{}, apierr.FailedPreconditionField("reservation_id", "reservation %s ended at %s", *resID, r.EndsAt.UTC().Format(time.RFC3339))
		}
	}
	return q.CreatePoolLease(ctx, lease(model))
}

// poolAccess finds the pool a lease is asked of: a pool of the tenant (nil grant), or a pool
// granted to it (its grant, share-locked until the transaction ends so that a revoke cannot slip
// between this check and the lease's commit), with the pool's topology levels. Any other pool is
// not the tenant's to see.
func poolAccess(ctx context.Context, q *db.Queries, tenant, poolID uuid.UUID) (*capacity.Grant, []string, error) {
	pool, err := q.GetPool(ctx, db.GetPoolParams{TenantID: tenant, ID: poolID})
	if err == nil {
		return nil, pool.TopologyLevels, nil
	}
	if !errors.Is(err, pgx.ErrNoRows) {
		return nil, nil, err
	}
	row, err := q.ShareActiveGrant(ctx, db.ShareActiveGrantParams{PoolID: poolID, TenantID: tenant})
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil, apierr.FailedPreconditionField("pool_id", "the tenant has no pool %s, and none is granted to it", poolID)
	}
	if err != nil {
		return nil, nil, err
	}
	g, err := capacity.GrantFromRow(row.ID, row.PoolID, row.OwnerTenantID, row.TenantID, row.Nominal, row.BorrowingLimit, row.Weight)
	if err != nil {
		return nil, nil, err
	}
	return &g, row.TopologyLevels, nil
}

// admitGrant refuses a lease larger than its tenant's grant lets it hold at once (nominal quota
// and borrowing limit together): such a lease could never be placed.
func admitGrant(g capacity.Grant, model string, req *leasesv1.CreateRequest) error {
	most := g.Most()
	switch {
	case req.GetGpus() > most.GPUs[model]:
		return apierr.FailedPreconditionField("gpus", "the tenant's grant of the pool allows at most %d %q GPUs at once (nominal %d, borrowing limit %d)",
			most.GPUs[model], model, g.Nominal.GPUs[model], g.BorrowingLimit.GPUs[model])
	case req.GetCpus() > most.CPUs:
		return apierr.FailedPreconditionField("cpus", "the tenant's grant of the pool allows at most %d CPUs at once (nominal %d, borrowing limit %d)",
			most.CPUs, g.Nominal.CPUs, g.BorrowingLimit.CPUs)
	case req.GetMemoryBytes() > most.MemoryBytes:
		return apierr.FailedPreconditionField("memory_bytes", "the tenant's grant of the pool allows at most %d bytes of memory at once (nominal %d, borrowing limit %d)",
			most.MemoryBytes, g.Nominal.MemoryBytes, g.BorrowingLimit.MemoryBytes)
	}
	return nil
}

// admitUsage refuses a lease, just inserted, that takes the tenant's pending and running leases
// in the pool past its quota, or its pending leases past the pendingLeases cap, as u
// (LeaseAdmissionUsage, read after the insert) says. The read follows the insert on purpose: the
// insert's trigger bumped the tenant's and the pool's usage counters (migration 0023_lease_usage)
// and holds them locked until the transaction ends, so concurrent admissions of one tenant queue
// there from the insert to the commit (a few statements, none of which grows with the leases),
// and each one reads counts with every earlier admission's lease in them. The caller's rollback
// of a refusal takes the lease and its counts out again. The quota is read, not locked: a
// concurrent pools/setQuota applies from the next admission.
func admitUsage(ctx context.Context, u db.LeaseAdmissionUsageRow, req *leasesv1.CreateRequest) error {
	over := func(field, what string, limit *int64, total, asked int64) error {
		if limit != nil && total > *limit {
			return apierr.FailedPreconditionField(field, "the tenant's quota in the pool is %d %s; %d are pending or running, and this lease asks for %d", *limit, what, total-asked, asked)
		}
		return nil
	}
	if err := errors.Join(
		over("pool_id", "leases", widen(u.MaxLeases), u.Leases, 1),
		over("gpus", "GPUs", widen(u.MaxGpus), u.Gpus, int64(req.GetGpus())),
		over("cpus", "CPUs", widen(u.MaxCpus), u.Cpus, int64(req.GetCpus())),
		over("memory_bytes", "bytes of memory", u.MaxMemoryBytes, u.MemoryBytes, req.GetMemoryBytes()),
	); err != nil {
		return err
	}
	return quota.Counted(ctx, quota.PendingLeases, u.Pending, 1)
}

func widen(v *int32) *int64 {
	if v == nil {
		return nil
	}
	w := int64(*v)
	return &w
}

func duration(field string, d *durationpb.Duration) (time.Duration, error) {
	if d == nil {
		return 0, apierr.InvalidArgument(field, "is required")
	}
	if err := d.CheckValid(); err != nil {
		return 0, apierr.InvalidArgument(field, "%v", err)
	}
	v := d.AsDuration()
	switch {
	case v <= 0:
		return 0, apierr.InvalidArgument(field, "must be positive, got %v", v)
	case v < time.Millisecond:
		return 0, apierr.InvalidArgument(field, "must be at least 1ms, got %v", v)
	case v > MaxDuration:
		return 0, apierr.InvalidArgument(field, "must be at most %v, got %v", MaxDuration, v)
	}
	return v.Truncate(time.Millisecond), nil
}

// Get returns a lease of the caller's tenant with what it holds.
func (s *Service) Get(ctx context.Context, req *leasesv1.GetRequest) (*leasesv1.GetResponse, error) {
	id, err := apierr.ParseID("id", req.GetId())
	if err != nil {
		return nil, err
	}
	q := db.New(s.pool)
	row, err := q.GetPoolLease(ctx, db.GetPoolLeaseParams{TenantID: auth.Caller(ctx).TenantID, ID: id})
	if err != nil {
		return nil, apierr.NotFoundIfNoRows(err, "lease %s not found", id)
	}
	out, err := describe(ctx, q, []db.PoolLease{row})
	if err != nil {
		return nil, err
	}
	return &leasesv1.GetResponse{Lease: out[0]}, nil
}

// List lists the caller's tenant's leases, oldest first, optionally of one pool or state.
func (s *Service) List(ctx context.Context, req *leasesv1.ListRequest) (*leasesv1.ListResponse, error) {
	size, after, err := page.Of(req.GetPageSize(), req.GetPageToken(), uuid.Nil)
	if err != nil {
		return nil, err
	}
	params := db.ListPoolLeasesParams{TenantID: auth.Caller(ctx).TenantID, After: after, Lim: size + 1}
	if req.GetPoolId() != "" {
		id, err := apierr.ParseID("pool_id", req.GetPoolId())
		if err != nil {
			return nil, err
		}
		params.PoolID = &id
	}
	if st := req.GetState(); st != leasesv1.LeaseState_LEASE_STATE_UNSPECIFIED {
		name, ok := stateNames[st]
		if !ok {
			return nil, apierr.InvalidArgument("state", "unknown state %v", st)
		}
		params.State = &name
	}
	q := db.New(s.pool)
	rows, err := q.ListPoolLeases(ctx, params)
	if err != nil {
		return nil, err
	}
	rows, next := page.Next(rows, size, func(l db.PoolLease) uuid.UUID { return l.ID })
	out, err := describe(ctx, q, rows)
	if err != nil {
		return nil, err
	}
	return &leasesv1.ListResponse{Leases: out, NextPageToken: next}, nil
}

// Extend adds to a lease's duration.
func (s *Service) Extend(ctx context.Context, req *leasesv1.ExtendRequest) (*leasesv1.ExtendResponse, error) {
	id, err := apierr.ParseID("id", req.GetId())
	if err != nil {
		return nil, err
	}
	by, err := duration("by", req.GetBy())
	if err != nil {
		return nil, err
	}
	p := auth.Caller(ctx)
	return admission.Do(ctx, s.admit, req, func(ctx context.Context, tx *admission.Tx) (*leasesv1.ExtendResponse, error) {
		tx.Target("lease", id)
		l, err := tx.Q.LockPoolLease(ctx, db.LockPoolLeaseParams{TenantID: p.TenantID, ID: id})
		if err != nil {
			return nil, apierr.NotFoundIfNoRows(err, "lease %s not found", id)
		}
		switch l.State {
		case capacity.LeaseReleased, capacity.LeaseExpired, capacity.LeaseFailed:
			return nil, apierr.FailedPrecondition("lease %s has ended (%s)", id, l.State)
		}
		if time.Duration(l.DurationMs)*time.Millisecond+by > MaxDuration {
			return nil, apierr.InvalidArgument("by", "the lease would run longer than %v", MaxDuration)
		}
		if l.EndsAt != nil {
			newEnd := l.EndsAt.Add(by)
			if l.ReservationID != nil {
				r, err := tx.Q.GetReservation(ctx, db.GetReservationParams{TenantID: p.TenantID, ID: *l.ReservationID})
				if err == nil && newEnd.After(r.EndsAt) {
					return nil, apierr.FailedPreconditionField("by", "the lease's reservation ends at %s", r.EndsAt.UTC().Format(time.RFC3339))
				}
			}
			blocking, err := tx.Q.ReservationsAgainstLease(ctx, db.ReservationsAgainstLeaseParams{
				LeaseID: id, StartsAt: *l.EndsAt, EndsAt: newEnd, OwnReservationID: l.ReservationID,
			})
			if err != nil {
				return nil, err
			}
			if len(blocking) > 0 {
				b := blocking[0]
				return nil, apierr.FailedPreconditionField("by", "a node the lease holds is reserved from %s (reservation %s of pool %s)",
					b.StartsAt.UTC().Format(time.RFC3339), b.ID, b.PoolID)
			}
		}
		row, err := tx.Q.ExtendPoolLease(ctx, db.ExtendPoolLeaseParams{ByMs: by.Milliseconds(), TenantID: p.TenantID, ID: id})
		if err != nil {
			return nil, apierr.NotFoundIfNoRows(err, "lease %s not found", id)
		}
		if err := tx.Emit(p.TenantID, event.LeaseExtended{LeaseChange: event.LeaseChange{
			ID: id, PoolID: row.PoolID, State: string(row.State), EndTime: row.EndsAt,
		}}); err != nil {
			return nil, err
		}
		out, err := describe(ctx, tx.Q, []db.PoolLease{row})
		if err != nil {
			return nil, err
		}
		return &leasesv1.ExtendResponse{Lease: out[0]}, nil
	})
}

// Release ends a lease now and frees what it holds. A preempted lease within its grace period
// frees what it holds early and stays preempted.
func (s *Service) Release(ctx context.Context, req *leasesv1.ReleaseRequest) (*leasesv1.ReleaseResponse, error) {
	id, err := apierr.ParseID("id", req.GetId())
	if err != nil {
		return nil, err
	}
	p := auth.Caller(ctx)
	var poolID uuid.UUID
	return admission.Do(ctx, s.admit, req, func(ctx context.Context, tx *admission.Tx) (*leasesv1.ReleaseResponse, error) {
		tx.Target("lease", id)
		l, err := tx.Q.LockPoolLease(ctx, db.LockPoolLeaseParams{TenantID: p.TenantID, ID: id})
		if err != nil {
			return nil, apierr.NotFoundIfNoRows(err, "lease %s not found", id)
		}
		poolID = l.PoolID
		if _, err := capacity.EndLeases(ctx, tx.Q, []uuid.UUID{id}, capacity.LeaseReleased, "released by "+p.Name, nil, tx.Emit); err != nil {
			return nil, err
		}
		if l, err = tx.Q.GetPoolLease(ctx, db.GetPoolLeaseParams{TenantID: p.TenantID, ID: id}); err != nil {
			return nil, err
		}
		out, err := describe(ctx, tx.Q, []db.PoolLease{l})
		if err != nil {
			return nil, err
		}
		s.pokeAfterCommit(tx, poolID) // what it held is free: pending leases may fit now
		return &leasesv1.ReleaseResponse{Lease: out[0]}, nil
	})
}

var stateNames = map[leasesv1.LeaseState]capacity.LeaseState{
	leasesv1.LeaseState_LEASE_STATE_PENDING:   capacity.LeasePending,
	leasesv1.LeaseState_LEASE_STATE_PLACED:    capacity.LeasePlaced,
	leasesv1.LeaseState_LEASE_STATE_AT_RISK:   capacity.LeaseAtRisk,
	leasesv1.LeaseState_LEASE_STATE_RELEASED:  capacity.LeaseReleased,
	leasesv1.LeaseState_LEASE_STATE_EXPIRED:   capacity.LeaseExpired,
	leasesv1.LeaseState_LEASE_STATE_FAILED:    capacity.LeaseFailed,
	leasesv1.LeaseState_LEASE_STATE_PREEMPTED: capacity.LeasePreempted,
}

func stateToProto(s capacity.LeaseState) leasesv1.LeaseState {
	for k, v := range stateNames {
		if v == s {
			return k
		}
	}
	return leasesv1.LeaseState_LEASE_STATE_UNSPECIFIED
}

// topologyFromProto is the pool_leases.topology of a requested mode; unspecified is preferred.
func topologyFromProto(m leasesv1.TopologyMode) (string, error) {
	switch m {
	case leasesv1.TopologyMode_TOPOLOGY_MODE_UNSPECIFIED, leasesv1.TopologyMode_TOPOLOGY_MODE_PREFERRED:
		return capacity.TopologyPreferred, nil
	case leasesv1.TopologyMode_TOPOLOGY_MODE_REQUIRED:
		return capacity.TopologyRequired, nil
	}
	return "", apierr.InvalidArgument("topology", "unknown topology mode %d", int32(m))
}

func topologyToProto(t string) leasesv1.TopologyMode {
	if t == capacity.TopologyRequired {
		return leasesv1.TopologyMode_TOPOLOGY_MODE_REQUIRED
	}
	return leasesv1.TopologyMode_TOPOLOGY_MODE_PREFERRED
}

func optionalTime(t *time.Time) *timestamppb.Timestamp {
	if t == nil {
		return nil
	}
	return timestamppb.New(*t)
}

// describe turns leases into their API form with what they hold, in one more statement.
func describe(ctx context.Context, q *db.Queries, rows []db.PoolLease) ([]*leasesv1.Lease, error) {
	ids := make([]uuid.UUID, len(rows))
	for i, r := range rows {
		ids[i] = r.ID
	}
	allocs := map[uuid.UUID][]db.PoolLeaseAllocationsRow{}
	if len(ids) > 0 {
		as, err := q.PoolLeaseAllocations(ctx, ids)
		if err != nil {
			return nil, err
		}
		for _, a := range as {
			allocs[a.LeaseID] = append(allocs[a.LeaseID], a)
		}
	}
	var gangs []uuid.UUID
	for _, r := range rows {
		if r.Nodes > 0 && r.PlacedAt != nil {
			gangs = append(gangs, r.ID)
		}
	}
	var ms map[uuid.UUID][]*leasesv1.Member
	if len(gangs) > 0 {
		var err error
		// Every row is of the caller's tenant: the reads that give them are scoped to it.
		if ms, err = members(ctx, q, rows[0].TenantID, gangs); err != nil {
			return nil, err
		}
	}
	use := map[uuid.UUID]*leasesv1.Utilization{}
	if len(ids) > 0 {
		// Every row is of the caller's tenant: the reads that give them are scoped to it.
		us, err := q.LeaseUtilization(ctx, db.LeaseUtilizationParams{TenantID: rows[0].TenantID, LeaseIds: ids})
		if err != nil {
			return nil, err
		}
		for _, u := range us {
			use[u.LeaseID] = &leasesv1.Utilization{
				GpuSecondsHeld: u.GpuSecondsHeld, GpuSecondsActive: u.GpuSecondsActive,
				MeanUtilization: u.MeanUtilization, PeakMemoryBytes: u.PeakMemoryBytes,
				SampledMinutes: u.SampledMinutes, LastSampleTime: timestamppb.New(u.LastMinute),
			}
		}
	}
	lent, err := loans(ctx, q, rows, ids)
	if err != nil {
		return nil, err
	}
	out := make([]*leasesv1.Lease, len(rows))
	for i, r := range rows {
		out[i] = toProto(r, allocs[r.ID])
		out[i].Members = ms[r.ID]
		out[i].Utilization = use[r.ID]
		out[i].Lent = lent[r.ID]
	}
	return out, nil
}

func toProto(l db.PoolLease, allocs []db.PoolLeaseAllocationsRow) *leasesv1.Lease {
	out := &leasesv1.Lease{
		Id: l.ID.String(), TenantId: l.TenantID.String(), PoolId: l.PoolID.String(),
		Gpus: l.Gpus, GpuModel: l.GpuModel, Cpus: l.Cpus, MemoryBytes: l.MemoryBytes, Spread: l.Spread,
		Duration: durationpb.New(time.Duration(l.DurationMs) * time.Millisecond),
		State:    stateToProto(l.State), Reason: l.Reason,
		CreateTime: timestamppb.New(l.CreatedAt), PlaceTime: optionalTime(l.PlacedAt), EndTime: optionalTime(l.EndsAt),
		Priority: l.Priority, Borrowing: l.Borrowing, PreemptTime: optionalTime(l.PreemptedAt),
		IdleSince: optionalTime(l.IdleSince),
		Topology:  topologyToProto(l.Topology),
		Nodes:     l.Nodes, GpusPerNode: l.GpusPerNode, GangDomain: l.GangDomain,
		OnUnhealthyMember: gpuhealth.LeaseActionToProto(gpuhealth.LeaseAction(l.OnUnhealthyMember)),
		ReservedStartTime: optionalTime(l.ReservedStart), IdleOptOut: l.IdleOptOut,
	}
	if l.Nodes > 0 {
		out.GangTopology = &leasesv1.GangTopology{Level: l.GangLevel, Mode: leasesv1.TopologyMode_TOPOLOGY_MODE_PREFERRED}
		if l.GangLevelRequired {
			out.GangTopology.Mode = leasesv1.TopologyMode_TOPOLOGY_MODE_REQUIRED
		}
	}
	if l.EndedAt != nil {
		out.EndTime = timestamppb.New(*l.EndedAt)
	}
	if l.ReservationID != nil {
		out.ReservationId = l.ReservationID.String()
	}
	for _, t := range decodeTolerations(l.Tolerations) {
		out.Tolerations = append(out.Tolerations, &leasesv1.Toleration{Key: t.Key, Operator: t.Operator, Value: t.Value, Effect: t.Effect})
	}
	for _, a := range allocs {
		pa := &leasesv1.Allocation{
			NodeId: a.NodeID.String(), Hostname: a.Hostname, GpuIndex: a.DeviceIndex, GpuUuid: a.DeviceUuid,
			GpuModel: a.Model, Cpus: a.Cpus, MemoryBytes: a.MemoryBytes,
			StartTime: timestamppb.New(a.StartedAt), EndTime: optionalTime(a.EndedAt), Topology: a.Topology,
		}
		out.Allocations = append(out.Allocations, pa)
	}
	return out
}

func encodeTolerations(tols []fleet.Toleration) ([]byte, error) {
	if len(tols) == 0 {
		return []byte("[]"), nil
	}
	return json.Marshal(tols)
}

func decodeTolerations(b []byte) []fleet.Toleration {
	var out []fleet.Toleration
	_ = json.Unmarshal(b, &out) // written by encodeTolerations
	return out
}
