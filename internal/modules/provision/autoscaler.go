package provision

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/better-compute/better-compute/gen/db"
	provisiondb "github.com/better-compute/better-compute/gen/modules/provision/db"
	"github.com/better-compute/better-compute/internal/capacity"
	"github.com/better-compute/better-compute/internal/enqueue"
	"github.com/better-compute/better-compute/internal/event"
	"github.com/better-compute/better-compute/internal/gpuhealth"
	"github.com/better-compute/better-compute/internal/reconcile"
)

// AutoscalerKind is the autoscaler's reconcile kind; its keys are the ids of scaled pools.
const AutoscalerKind = "provision.autoscaler"

const (
	// maxScaleLeases bounds the pending leases one decision plans.
	maxScaleLeases = 5000
	// minLookAgain is the soonest the autoscaler looks at a pool again.
	minLookAgain = 50 * time.Millisecond
)

// The actions of decisions (provision_scaling_decisions.action).
const (
	actionScaleUp       = "scale_up"
	actionScaleDown     = "scale_down"
	actionReplaceFailed = "replace_failed"
	actionBlocked       = "blocked"
)

// Autoscaler sizes scaled pools: a reconciler keyed by pool id that decides, in one transaction
// holding the pool's scaling row, which machines to ask for and which to delete, and records
// the decision, its event and its effect (the requested machines, the machine moved to deleting
// and its node drained) together. The lifecycle controller carries the effect out. A process
// that dies after a decision committed finds its machines as incoming capacity, so it neither
// provisions twice nor deletes twice; one that dies before it committed decided nothing.
type Autoscaler struct {
	pool *pgxpool.Pool
	log  *slog.Logger
	cfg  Config
}

// NewAutoscaler returns the autoscaler over the database with the module's configuration.
func NewAutoscaler(pool *pgxpool.Pool, log *slog.Logger, cfg Config) *Autoscaler {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Autoscaler{pool: pool, log: log.With("kind", AutoscalerKind), cfg: cfg}
}

// Registration runs the autoscaler in the controllers role, resyncing every scaled pool.
func (a *Autoscaler) Registration() reconcile.Registration {
	return reconcile.Registration{
		Reconciler: a, Role: reconcile.RoleControllers, Timeout: time.Minute,
		Resync: func(ctx context.Context) ([]string, error) {
			ids, err := provisiondb.New(a.pool).ListScaledPoolIDs(ctx)
			if err != nil {
				return nil, err
			}
			return enqueue.Keys(ids), nil
		},
	}
}

// Kind is AutoscalerKind.
func (a *Autoscaler) Kind() string { return AutoscalerKind }

// Reconcile makes one decision about the pool and looks again after the configured interval,
// or sooner when a pending lease's scale-up delay ends before.
func (a *Autoscaler) Reconcile(ctx context.Context, key string) error {
	id, err := uuid.Parse(key)
	if err != nil {
		return nil // not a pool
	}
	again, gone := a.cfg.Autoscaling.withDefaults().Interval, false
	err = pgx.BeginFunc(ctx, a.pool, func(tx pgx.Tx) error {
		sc, err := provisiondb.New(tx).LockScaledPool(ctx, id)
		if errors.Is(err, pgx.ErrNoRows) {
			gone = true // no longer scaled
			return nil
		}
		if err != nil {
			return fmt.Errorf("lock the scaling of pool %s: %w", id, err)
		}
		d := &decision{a: a, tx: tx, q: provisiondb.New(tx), cq: db.New(tx), sc: sc, now: time.Now()}
		next, err := d.make(ctx)
		if !next.IsZero() {
			again = min(again, max(time.Until(next), minLookAgain))
		}
		return err
	})
	if err != nil {
		return fmt.Errorf("pool %s: %w", id, err)
	}
	if gone {
		return nil
	}
	if err := db.New(a.pool).DeferReconcile(ctx, db.DeferReconcileParams{Kind: AutoscalerKind, Key: key, DelayMs: again.Milliseconds()}); err != nil {
		return fmt.Errorf("look at pool %s again later: %w", id, err)
	}
	return nil
}

// decision is one reconcile's view of a scaled pool, inside its transaction.
type decision struct {
	a   *Autoscaler
	tx  pgx.Tx
	q   *provisiondb.Queries
	cq  *db.Queries
	sc  provisiondb.LockScaledPoolRow
	now time.Time

	machines []provisiondb.PoolMachinesRow
	live     int
}

// make decides: replace failed machines, keep min, provision for leases that have waited too
// long, delete idle machines above min. It returns when a lease's delay ends, if one will.
func (d *decision) make(ctx context.Context) (time.Time, error) {
	var err error
	if d.machines, err = d.q.PoolMachines(ctx, &d.sc.PoolID); err != nil {
		return time.Time{}, fmt.Errorf("read the pool's machines: %w", err)
	}
	for _, m := range d.machines {
		if liveStates[m.State] {
			d.live++
		}
	}
	replaced, err := d.deleteFailed(ctx)
	if err != nil || replaced {
		return time.Time{}, err // replacements wait a round, so a failing provider is not hammered
	}
	if d.live < int(d.sc.MinMachines) {
		n := int(d.sc.MinMachines) - d.live
		reason := fmt.Sprintf("the pool has %d machines and keeps at least %d", d.live, d.sc.MinMachines)
		if _, err := d.create(ctx, n, reason); err != nil {
			return time.Time{}, err
		}
	}
	rows, err := d.q.ScalePendingLeases(ctx, provisiondb.ScalePendingLeasesParams{PoolID: d.sc.PoolID, Lim: maxScaleLeases})
	if err != nil {
		return time.Time{}, fmt.Errorf("read the pool's pending leases: %w", err)
	}
	dem := demandOf(rows, d.now, time.Duration(d.sc.ScaleUpDelayMs)*time.Millisecond)
	nodes, err := d.cq.PlacerNodes(ctx, db.PlacerNodesParams{PoolID: d.sc.PoolID, QuarantineTaint: gpuhealth.QuarantineTaintKey})
	if err != nil {
		return time.Time{}, fmt.Errorf("read the pool's members: %w", err)
	}
	devices, err := d.cq.PlacerDevices(ctx, d.sc.PoolID)
	if err != nil {
		return time.Time{}, fmt.Errorf("read the pool's devices: %w", err)
	}
	sup := supplyOf(nodes, devices, d.machines)
	if placeableNow(d.now, sup, dem) {
		// The placer is behind: wake it, and leave idle machines alone this round.
		return dem.nextOld, capacity.EnqueuePlacer(ctx, d.cq, d.sc.PoolID)
	}
	grew, err := d.grow(ctx, sup, dem)
	if err != nil || grew {
		return dem.nextOld, err
	}
	return dem.nextOld, d.shrink(ctx)
}

// grow provisions the fewest machines that make the leases that waited too long fit, within the
// pool's max and the tenant's cap, and records once why it cannot when it cannot.
func (d *decision) grow(ctx context.Context, sup supply, dem demand) (bool, error) {
	if len(dem.old) == 0 {
		return false, d.setBlocked(ctx, "")
	}
	c, err := d.q.GetClass(ctx, provisiondb.GetClassParams{TenantID: d.sc.TenantID, Name: d.sc.Class})
	if errors.Is(err, pgx.ErrNoRows) {
		return false, d.blocked(ctx, fmt.Sprintf("machine class %q not found", d.sc.Class))
	}
	if err != nil {
		return false, fmt.Errorf("read class %s: %w", d.sc.Class, err)
	}
	shape, ok, err := classShape(c.Provider, c.Params)
	if err != nil || !ok {
		return false, d.blocked(ctx, fmt.Sprintf("machine class %q has no machine shape", d.sc.Class))
	}
	room := int(d.sc.MaxMachines) - d.live
	tenantRoom, err := d.tenantRoom(ctx)
	if err != nil {
		return false, err
	}
	n, waiting, unfit := scaleUp(d.now, sup, shape, dem, min(room, tenantRoom))
	if n > 0 {
		reason := fmt.Sprintf("%d pending leases could not fit for over %s; %d machines of %s make %d of them fit",
			waiting, time.Duration(d.sc.ScaleUpDelayMs)*time.Millisecond, n, shapeString(shape), waiting-unfit)
		if _, err := d.create(ctx, n, reason); err != nil {
			return false, err
		}
	}
	switch {
	case unfit == 0:
		return n > 0, d.setBlocked(ctx, "")
	case room <= n:
		return n > 0, d.blocked(ctx, fmt.Sprintf("pending leases cannot fit: the pool is at its max of %d machines", d.sc.MaxMachines))
	case tenantRoom <= n:
		return n > 0, d.blocked(ctx, fmt.Sprintf("pending leases cannot fit: the tenant is at modules.provision.maxMachinesPerTenant (%d)", d.a.cfg.MaxMachinesPerTenant))
	default:
		return n > 0, d.blocked(ctx, fmt.Sprintf("pending leases cannot fit on machines of class %s (%s)", d.sc.Class, shapeString(shape)))
	}
}

// tenantRoom is how many more machines the tenant may have, under the tenant's machine lock.
func (d *decision) tenantRoom(ctx context.Context) (int, error) {
	n, err := d.q.CountLiveMachines(ctx, d.sc.TenantID)
	if err != nil {
		return 0, fmt.Errorf("count the tenant's machines: %w", err)
	}
	return max(d.a.cfg.MaxMachinesPerTenant-int(n), 0), nil
}

// create asks for n machines of the pool's class, each requested and queued for the lifecycle
// controller, their join tokens to name the pool, and records the decision with its event.
func (d *decision) create(ctx context.Context, n int, reason string) ([]uuid.UUID, error) {
	room, err := d.tenantRoom(ctx)
	if err != nil {
		return nil, err
	}
	if n = min(n, room, int(d.sc.MaxMachines)-d.live); n <= 0 {
		return nil, d.blocked(ctx, "cannot add machines: the pool is at its max or the tenant at modules.provision.maxMachinesPerTenant")
	}
	if _, err := d.q.GetClass(ctx, provisiondb.GetClassParams{TenantID: d.sc.TenantID, Name: d.sc.Class}); err != nil {
		if errors.Is(err, pgx.ErrNoRows) {
			return nil, d.blocked(ctx, fmt.Sprintf("machine class %q not found", d.sc.Class))
		}
		return nil, fmt.Errorf("read class %s: %w", d.sc.Class, err)
	}
	ids := make([]uuid.UUID, 0, n)
	for range n {
		id := uuid.Must(uuid.NewV7())
		m, err := d.q.CreatePoolMachine(ctx, provisiondb.CreatePoolMachineParams{
			ID: id, TenantID: d.sc.TenantID, Class: d.sc.Class, Name: machineName(d.sc.PoolName, id),
			PoolID: &d.sc.PoolID, Pool: d.sc.PoolName,
		})
		if err != nil {
			return nil, fmt.Errorf("create a machine for pool %s: %w", d.sc.PoolName, err)
		}
		if err := d.q.AddMachineStep(ctx, provisiondb.AddMachineStepParams{
			MachineID: id, State: StateRequested, Detail: "class " + m.Class + ", pool " + d.sc.PoolName + " scaling up",
		}); err != nil {
			return nil, err
		}
		if err := reconcile.Enqueue(ctx, d.cq, Kind, id.String()); err != nil {
			return nil, err
		}
		d.machines = append(d.machines, provisiondb.PoolMachinesRow{ID: id, Name: m.Name, State: StateRequested, StateChangedAt: d.now})
		ids = append(ids, id)
	}
	d.live += n
	d.a.log.Info("pool scaled up", "pool", d.sc.PoolID, "machines", n, "reason", reason)
	return ids, d.record(ctx, actionScaleUp, ids, reason, event.PoolScaledUp{PoolScaling: d.payload(ids, reason)})
}

// deleteFailed moves the pool's failed machines to deleting, so their provider resources are
// destroyed and others take their place.
func (d *decision) deleteFailed(ctx context.Context) (bool, error) {
	var ids []uuid.UUID
	var reasons []string
	for _, m := range d.machines {
		if m.State != StateFailed {
			continue
		}
		ok, err := d.startDelete(ctx, m, "failed; the pool replaces it")
		if err != nil {
			return false, err
		}
		if !ok {
			continue
		}
		ids = append(ids, m.ID)
		reasons = append(reasons, m.Name)
	}
	if len(ids) == 0 {
		return false, nil
	}
	reason := "failed machines deleted: " + strings.Join(reasons, ", ")
	return true, d.record(ctx, actionReplaceFailed, ids, reason, event.PoolScaledDown{PoolScaling: d.payload(ids, reason)})
}

// shrink deletes the machines above min whose nodes held no lease for the idle time, the
// longest idle first, checking under each node's lock that it holds nothing.
func (d *decision) shrink(ctx context.Context) error {
	excess := d.live - int(d.sc.MinMachines)
	if excess <= 0 {
		return nil
	}
	idle := time.Duration(d.sc.ScaleDownIdleMs) * time.Millisecond
	var cands []provisiondb.PoolMachinesRow
	for _, m := range d.machines {
		if m.State == StateReady && m.NodeID != nil && !m.Held && !m.IdleSince.After(d.now.Add(-idle)) {
			cands = append(cands, m)
		}
	}
	slices.SortFunc(cands, func(x, y provisiondb.PoolMachinesRow) int { return x.IdleSince.Compare(y.IdleSince) })
	var ids []uuid.UUID
	for _, m := range cands[:min(excess, len(cands))] {
		if _, err := d.cq.LockNode(ctx, *m.NodeID); err != nil && !errors.Is(err, pgx.ErrNoRows) {
			return fmt.Errorf("lock node %s: %w", *m.NodeID, err)
		}
		held, err := d.q.NodeHoldsAllocations(ctx, *m.NodeID)
		if err != nil {
			return fmt.Errorf("read node %s's allocations: %w", *m.NodeID, err)
		}
		if held {
			continue
		}
		ok, err := d.startDelete(ctx, m, fmt.Sprintf("idle since %s; the pool scales down", m.IdleSince.UTC().Format(time.RFC3339)))
		if err != nil {
			return err
		}
		if !ok {
			continue
		}
		if err := drainNode(ctx, d.cq, d.sc.TenantID, *m.NodeID); err != nil {
			return err
		}
		ids = append(ids, m.ID)
	}
	if len(ids) == 0 {
		return nil
	}
	d.live -= len(ids)
	reason := fmt.Sprintf("%d machines held no lease for %s", len(ids), idle)
	d.a.log.Info("pool scaled down", "pool", d.sc.PoolID, "machines", len(ids), "reason", reason)
	return d.record(ctx, actionScaleDown, ids, reason, event.PoolScaledDown{PoolScaling: d.payload(ids, reason)})
}

// startDelete moves a machine from the state it was read in to deleting, as machines/delete
// does; false when it moved on meanwhile.
func (d *decision) startDelete(ctx context.Context, m provisiondb.PoolMachinesRow, detail string) (bool, error) {
	cur, err := d.q.LockMachine(ctx, m.ID)
	if err != nil {
		return false, fmt.Errorf("lock machine %s: %w", m.ID, err)
	}
	if cur.State != m.State {
		return false, nil
	}
	if _, err := d.q.SetMachineState(ctx, provisiondb.SetMachineStateParams{ID: m.ID, State: StateDeleting, FromState: m.State, Reason: cur.Reason}); err != nil {
		return false, fmt.Errorf("move machine %s to deleting: %w", m.ID, err)
	}
	if err := d.q.AddMachineStep(ctx, provisiondb.AddMachineStepParams{MachineID: m.ID, State: StateDeleting, Detail: detail}); err != nil {
		return false, err
	}
	return true, reconcile.Enqueue(ctx, d.cq, Kind, m.ID.String())
}

// blocked records that pending leases cannot fit and why, once until the reason changes (the
// reasons name no counts, so a changing number of leases does not repeat them).
func (d *decision) blocked(ctx context.Context, reason string) error {
	if reason == d.sc.Blocked {
		return nil
	}
	if err := d.setBlocked(ctx, reason); err != nil {
		return err
	}
	d.a.log.Info("pool cannot scale up", "pool", d.sc.PoolID, "reason", reason)
	return d.record(ctx, actionBlocked, nil, reason, event.PoolScaleBlocked{PoolScaling: d.payload(nil, reason)})
}

func (d *decision) setBlocked(ctx context.Context, reason string) error {
	if reason == d.sc.Blocked {
		return nil
	}
	d.sc.Blocked = reason
	return d.q.SetScalingBlocked(ctx, provisiondb.SetScalingBlockedParams{PoolID: d.sc.PoolID, Blocked: reason})
}

// record writes the decision and its event in the decision's transaction.
func (d *decision) record(ctx context.Context, action string, ids []uuid.UUID, reason string, ev event.Event) error {
	if ids == nil {
		ids = []uuid.UUID{}
	}
	if err := d.q.AddScalingDecision(ctx, provisiondb.AddScalingDecisionParams{
		PoolID: d.sc.PoolID, Action: action, Count: int32(len(ids)), MachineIds: ids, Reason: reason,
	}); err != nil {
		return fmt.Errorf("record the decision: %w", err)
	}
	return event.Emit(ctx, d.cq, d.sc.TenantID, ev)
}

func (d *decision) payload(ids []uuid.UUID, reason string) event.PoolScaling {
	if ids == nil {
		ids = []uuid.UUID{}
	}
	return event.PoolScaling{
		ID: d.sc.PoolID, Class: d.sc.Class, Count: int32(len(ids)), MachineIDs: ids, Machines: int32(d.live), Reason: reason,
	}
}

// machineName names a pool's machine: "as-", the pool's name (cut) and the end of the machine's
// id, a valid machine name and hostname.
func machineName(pool string, id uuid.UUID) string {
	if len(pool) > 50 {
		pool = strings.TrimRight(pool[:50], "-")
	}
	s := id.String()
	return "as-" + pool + "-" + s[len(s)-8:]
}

func shapeString(s Shape) string {
	var parts []string
	if s.GPUs > 0 {
		parts = append(parts, fmt.Sprintf("%d %s GPUs", s.GPUs, s.GPUModel))
	}
	if s.CPUs > 0 {
		parts = append(parts, fmt.Sprintf("%d CPUs", s.CPUs))
	}
	if s.MemoryBytes > 0 {
		parts = append(parts, fmt.Sprintf("%d GiB", s.MemoryBytes>>30))
	}
	return strings.Join(parts, ", ")
}
