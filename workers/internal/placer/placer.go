// Package placer is the capacity placer: the reconciler "capacity.placer" of the scheduler role,
// which binds pending pool leases (the API's leases) to concrete nodes and devices, and expires
// leases whose time is up.
//
// Its key is a pool id. The reconcile runtime never runs one key twice at once, so each pool has
// one placer at a time; pools place in parallel. A reconcile of a pool
//
//  1. expires the pool's placed leases whose end has come, freeing and metering their devices,
//     and gives lent leases that woke their GPUs back, preempting the leases that borrowed them
//     (loans.go);
//  2. takes a snapshot of the pool's members (schedulable ones: ready, online, not revoked),
//     their free devices, CPUs and memory, their taints and the reservations that cover them;
//  3. places pending leases in creation order, in memory against the snapshot, a batch at a
//     time: bin packing by default (the node with the fewest free matching GPUs that still
//     fit), spread (the most free) when the lease asks; a lease that does not fit now waits, and
//     later, smaller ones may still be placed; one that can never fit fails. On the node chosen
//     a lease of several GPUs gets the best-connected free set (placement.Tier), recorded on its
//     allocations; one whose topology is required goes only where it gets its tier;
//  4. writes each batch in one transaction: the leases, their allocations (bulk inserts) and
//     their events. The database is the final guard: an exclusion constraint refuses a device
//     held twice (a node may be in several pools, placed by different keys at once) and a
//     trigger refuses CPUs or memory a node does not have; the key is then retried;
//  5. schedules itself for the next lease end or reservation boundary.
//
// Hooks for the node lifecycle: MarkAtRisk, MarkPlaced, EnqueuePools and ActiveLeases.
package placer

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/better-compute/better-compute/gen/db"
	"github.com/better-compute/better-compute/internal/capacity"
	"github.com/better-compute/better-compute/internal/enqueue"
	"github.com/better-compute/better-compute/internal/event"
	"github.com/better-compute/better-compute/internal/fleet"
	"github.com/better-compute/better-compute/internal/gpuhealth"
	"github.com/better-compute/better-compute/internal/placement"
	"github.com/better-compute/better-compute/internal/reconcile"
)

// Defaults of Options.
const (
	DefaultBatch       = 5000
	DefaultResyncEvery = time.Minute
	DefaultConcurrency = 4
)

// Options configure the placer; zero values take the defaults.
type Options struct {
	// Now is the placer's clock; nil uses the database's, as the API does.
	Now func() time.Time
	// Batch is how many pending leases are planned and written per transaction.
	Batch int
	// ResyncEvery is how often every pool is enqueued, in case a wake-up was lost.
	ResyncEvery time.Duration
	// Concurrency is how many pools one process places at once.
	Concurrency int
	Logger      *slog.Logger
}

// Placer reconciles pools.
type Placer struct {
	pool *pgxpool.Pool
	opts Options
	log  *slog.Logger
}

var _ reconcile.Reconciler = (*Placer)(nil)

// New returns a placer.
func New(pool *pgxpool.Pool, opts Options) *Placer {
	if opts.Batch <= 0 {
		opts.Batch = DefaultBatch
	}
	if opts.ResyncEvery <= 0 {
		opts.ResyncEvery = DefaultResyncEvery
	}
	if opts.Concurrency <= 0 {
		opts.Concurrency = DefaultConcurrency
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	return &Placer{pool: pool, opts: opts, log: opts.Logger.With("kind", capacity.PlacerKind)}
}

// Registration is the placer as the worker runtime runs it: role scheduler, resynced every
// ResyncEvery.
func Registration(pool *pgxpool.Pool, opts Options) reconcile.Registration {
	p := New(pool, opts)
	return reconcile.Registration{
		Reconciler:  p,
		Role:        reconcile.RoleScheduler,
		Concurrency: p.opts.Concurrency,
		Resync:      p.resync,
		ResyncEvery: p.opts.ResyncEvery,
	}
}

// Kind is capacity.PlacerKind.
func (p *Placer) Kind() string { return capacity.PlacerKind }

func (p *Placer) resync(ctx context.Context) ([]string, error) {
	ids, err := db.New(p.pool).ListAllPoolIDs(ctx)
	if err != nil {
		return nil, err
	}
	return enqueue.Keys(ids), nil
}

// now reads the placer's clock: the injected one, or the database's.
func (p *Placer) now(ctx context.Context, q *db.Queries) (time.Time, error) {
	if p.opts.Now != nil {
		return p.opts.Now(), nil
	}
	t, err := q.PlacerNow(ctx)
	if err != nil {
		return time.Time{}, fmt.Errorf("read the clock: %w", err)
	}
	return t, nil
}

// Result is what one reconcile of a pool did.
type Result struct {
	Expired, Placed, Failed, Preempted int
	// Returned is how many lent leases got their GPUs back (loans.go).
	Returned int
	// More is true when pending leases were left for the next reconcile (out of time).
	More bool
}

// Reconcile expires, places and reschedules one pool.
func (p *Placer) Reconcile(ctx context.Context, key string) error {
	_, err := p.ReconcilePool(ctx, key)
	return err
}

// ReconcilePool is Reconcile, reporting what it did.
func (p *Placer) ReconcilePool(ctx context.Context, key string) (Result, error) {
	var res Result
	poolID, err := uuid.Parse(key)
	if err != nil {
		p.log.Warn("dropping a key that is not a pool id", "key", key)
		return res, nil
	}
	q := db.New(p.pool)
	pl, err := q.PlacerPool(ctx, poolID)
	if errors.Is(err, pgx.ErrNoRows) {
		return res, nil // deleted
	}
	if err != nil {
		return res, err
	}
	now, err := p.now(ctx, q)
	if err != nil {
		return res, err
	}
	if res.Expired, err = p.expire(ctx, pl, now); err != nil {
		return res, err
	}
	if res.Preempted, res.Returned, err = p.returnLoans(ctx, pl, now); err != nil {
		return res, err
	}
	if err := p.place(ctx, pl, &res); err != nil {
		return res, err
	}
	return res, p.schedule(ctx, pl, res.More)
}

// expire ends the pool's placed leases whose end has come, at their end.
func (p *Placer) expire(ctx context.Context, pl db.PlacerPoolRow, now time.Time) (int, error) {
	total := 0
	for {
		ids, err := db.New(p.pool).DuePoolLeases(ctx, db.DuePoolLeasesParams{PoolID: pl.ID, Now: now, Lim: int32(p.opts.Batch)})
		if err != nil || len(ids) == 0 {
			return total, err
		}
		err = pgx.BeginFunc(ctx, p.pool, func(tx pgx.Tx) error {
			q := db.New(tx)
			var ev event.Batch
			rows, err := capacity.EndLeases(ctx, q, ids, capacity.LeaseExpired, "", &now, ev.Add)
			if err != nil {
				return err
			}
			total += len(rows)
			return ev.Emit(ctx, q)
		})
		if err != nil {
			return total, fmt.Errorf("expire leases: %w", err)
		}
		if len(ids) < p.opts.Batch {
			return total, nil
		}
	}
}

// snapshot reads the pool's members, grants and running leases as one consistent view, and
// returns the running leases whose borrowing the planner counted differently from the database.
func (p *Placer) snapshot(ctx context.Context, pl db.PlacerPoolRow) (*placement.Planner, []placement.Recount, error) {
	var (
		planner  *placement.Planner
		now      time.Time
		recounts []placement.Recount
	)
	err := pgx.BeginTxFunc(ctx, p.pool, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly}, func(tx pgx.Tx) error {
		q := db.New(tx)
		var err error
		// First: the clock is then no earlier than any end the snapshot sees.
		if now, err = p.now(ctx, q); err != nil {
			return err
		}
		rows, err := q.PlacerNodes(ctx, db.PlacerNodesParams{PoolID: pl.ID, QuarantineTaint: gpuhealth.QuarantineTaintKey})
		if err != nil {
			return fmt.Errorf("read nodes: %w", err)
		}
		devices, err := q.PlacerDevices(ctx, pl.ID)
		if err != nil {
			return fmt.Errorf("read devices: %w", err)
		}
		nodes := make([]*placement.Node, len(rows))
		byID := make(map[uuid.UUID]*placement.Node, len(rows))
		ids := make([]uuid.UUID, len(rows))
		for i, r := range rows {
			n := &placement.Node{
				ID: r.ID, Schedulable: r.State == "ready" && r.Online, Name: r.Hostname,
				CPUs: r.Cpus, CPUsUsed: r.CpusUsed, Memory: r.MemoryBytes, MemoryUsed: r.MemoryUsed,
			}
			if len(pl.TopologyLevels) > 0 {
				n.Domain = domainOf(pl.TopologyLevels, r.Labels)
			}
			var taints []fleet.Taint
			if err := json.Unmarshal(r.Taints, &taints); err != nil {
				p.log.Warn("node taints unreadable; keeping leases off the node", "node", r.ID, "err", err)
				n.Schedulable = false
			}
			for _, t := range taints {
				if t.Blocks() {
					n.Taints = append(n.Taints, t)
				}
			}
			nodes[i], byID[r.ID], ids[i] = n, n, r.ID
		}
		for _, d := range devices {
			if n := byID[d.NodeID]; n != nil {
				dev := placement.Device{ID: d.ID, Index: d.Idx, Model: d.Model, Held: d.Held, NUMA: d.NumaNode}
				if len(d.Links) > 2 { // not "[]"
					if err := json.Unmarshal(d.Links, &dev.Links); err != nil {
						p.log.Warn("GPU links unreadable; placing as if unknown", "device", d.ID, "err", err)
					}
				}
				n.Devices = append(n.Devices, dev)
			}
		}
		nres, err := q.PlacerNodeReservations(ctx, db.PlacerNodeReservationsParams{TenantID: pl.TenantID, Now: now, NodeIds: ids})
		if err != nil {
			return fmt.Errorf("read reservations: %w", err)
		}
		for _, r := range nres {
			if n := byID[r.NodeID]; n != nil {
				n.Reservations = append(n.Reservations, placement.Window{ID: r.ID, Start: r.StartsAt, End: r.EndsAt})
			}
		}
		pres, err := q.PlacerPoolReservations(ctx, db.PlacerPoolReservationsParams{PoolID: pl.ID, Now: now})
		if err != nil {
			return fmt.Errorf("read reservations: %w", err)
		}
		own := make([]placement.Window, len(pres))
		for i, r := range pres {
			own[i] = placement.Window{ID: r.ID, Start: r.StartsAt, End: r.EndsAt}
		}
		planner = placement.NewPlanner(now, nodes, own)
		planner.SetTopology(placement.Topology{
			Levels: pl.TopologyLevels, ReserveAfter: time.Duration(pl.GangReservationWaitMs) * time.Millisecond,
		})
		switch g, err := q.GetPoolGrowth(ctx, pl.ID); {
		case err == nil:
			planner.Grow(g)
		case !errors.Is(err, pgx.ErrNoRows):
			return fmt.Errorf("read the pool's growth: %w", err)
		}
		sharing, err := readSharing(ctx, q, pl)
		if err != nil {
			return err
		}
		recounts = planner.Share(sharing)
		return nil
	})
	return planner, recounts, err
}

// readSharing reads the pool's grants and the leases that hold anything in it, with what they
// hold, for placement.Planner.Share.
func readSharing(ctx context.Context, q *db.Queries, pl db.PlacerPoolRow) (placement.Sharing, error) {
	s := placement.Sharing{Owner: pl.TenantID, PriorityPreemption: pl.PriorityPreemption, NoGrace: pl.PreemptionGraceMs == 0}
	grants, err := q.PlacerGrants(ctx, pl.ID)
	if err != nil {
		return s, fmt.Errorf("read grants: %w", err)
	}
	for _, g := range grants {
		grant, err := capacity.GrantFromRow(uuid.Nil, pl.ID, pl.TenantID, g.TenantID, g.Nominal, g.BorrowingLimit, g.Weight)
		if err != nil {
			return s, err
		}
		a := &placement.Account{Tenant: g.TenantID, Nominal: placement.AmountsOf(grant.Nominal), Limit: placement.AmountsOf(grant.Most()), Weight: int64(g.Weight)}
		s.Grants = append(s.Grants, a)
	}
	leases, err := q.PlacerHoldingLeases(ctx, pl.ID)
	if err != nil {
		return s, fmt.Errorf("read running leases: %w", err)
	}
	byID := make(map[uuid.UUID]*placement.Running, len(leases))
	for _, l := range leases {
		r := placement.NewRunning(l.ID, l.TenantID, derefSeq(l.Seq), l.Priority, l.Gpus, l.GpuModel, l.Cpus, l.MemoryBytes, l.Borrowing, l.State == capacity.LeasePreempted)
		if l.EndsAt != nil {
			r.End = *l.EndsAt
		}
		s.Running = append(s.Running, r)
		byID[l.ID] = r
	}
	allocs, err := q.PlacerHoldingAllocations(ctx, pl.ID)
	if err != nil {
		return s, fmt.Errorf("read allocations: %w", err)
	}
	for _, a := range allocs {
		if r := byID[a.LeaseID]; r != nil {
			r.Holds = append(r.Holds, placement.Held{Node: a.NodeID, Device: a.DeviceID, Model: a.Model, CPUs: a.Cpus, Memory: a.MemoryBytes})
		}
	}
	return s, nil
}

func derefSeq(p *int64) int64 {
	if p == nil {
		return 0
	}
	return *p
}

// place places the pool's pending leases, a batch per transaction.
func (p *Placer) place(ctx context.Context, pl db.PlacerPoolRow, res *Result) error {
	q := db.New(p.pool)
	var (
		afterSeq int64
		planner  *placement.Planner
		recounts []placement.Recount
	)
	for {
		if dl, ok := ctx.Deadline(); ok && time.Until(dl) < 5*time.Second {
			res.More = true
			return nil
		}
		rows, err := q.PendingPoolLeases(ctx, db.PendingPoolLeasesParams{PoolID: pl.ID, AfterSeq: afterSeq, Lim: int32(p.opts.Batch)})
		if err != nil {
			return fmt.Errorf("read pending leases: %w", err)
		}
		if len(rows) == 0 {
			// Nothing to place. Borrowing flags of running leases wait for the next round
			// with pending leases to be recounted: only planning depends on them, and it
			// recounts.
			return nil
		}
		if planner == nil {
			if planner, recounts, err = p.snapshot(ctx, pl); err != nil {
				return err
			}
		}
		leases := make([]*placement.Lease, 0, len(rows))
		var unplaceable []placement.Failure
		for _, r := range rows {
			l := &placement.Lease{
				ID: r.ID, Tenant: r.TenantID, GPUs: r.Gpus, Model: r.GpuModel, CPUs: r.Cpus, Memory: r.MemoryBytes,
				Spread: r.Spread, Duration: time.Duration(r.DurationMs) * time.Millisecond, Reservation: r.ReservationID,
				Priority: r.Priority, Seq: derefSeq(r.Seq), TopologyRequired: r.Topology == capacity.TopologyRequired,
				Since: r.CreatedAt,
			}
			afterSeq = l.Seq
			if err := json.Unmarshal(r.Tolerations, &l.Tolerations); err != nil {
				p.log.Warn("lease tolerations unreadable; placing as if none", "lease", r.ID, "err", err)
			}
			if r.Nodes > 0 {
				g, reason := gangOf(r, pl.TopologyLevels)
				if reason != "" {
					unplaceable = append(unplaceable, placement.Failure{Lease: l, Reason: reason})
					continue
				}
				l.Gang = g
			}
			leases = append(leases, l)
		}
		var b batch
		b.placed, b.failed, b.preempted = planner.Plan(leases)
		b.failed = append(b.failed, unplaceable...)
		b.recounts, recounts = recounts, nil
		if !b.empty() {
			if err := p.write(ctx, pl, b, res); err != nil {
				return err
			}
		}
		if len(rows) < p.opts.Batch || (planner.Exhausted() && !planner.MayPreempt()) {
			return p.noteReservations(ctx, pl, planner)
		}
	}
}

// noteReservations records, on the pool's pending gangs, when those the planner reserved a
// domain for expect to start, and clears it on the others: what leases/get reports. The planner
// reserves afresh each round, so this is what it did last, not a promise kept in the database.
func (p *Placer) noteReservations(ctx context.Context, pl db.PlacerPoolRow, planner *placement.Planner) error {
	reserved := planner.Reserved()
	arg := db.SetGangReservationsParams{PoolID: pl.ID, Ids: make([]uuid.UUID, 0, len(reserved)), Starts: make([]time.Time, 0, len(reserved))}
	for id, start := range reserved {
		arg.Ids = append(arg.Ids, id)
		arg.Starts = append(arg.Starts, start)
	}
	if err := db.New(p.pool).SetGangReservations(ctx, arg); err != nil {
		return fmt.Errorf("note gang reservations: %w", err)
	}
	return nil
}

// batch is what one planned batch of pending leases changes.
type batch struct {
	placed    []placement.Placement
	failed    []placement.Failure
	preempted []placement.Preemption
	recounts  []placement.Recount
}

func (b batch) empty() bool {
	return len(b.placed)+len(b.failed)+len(b.preempted)+len(b.recounts) == 0
}

// write commits one batch: the placed leases with their allocations, the failed ones, the
// preempted ones, the running leases whose borrowing was recounted, and the events. Leases no
// longer pending (released meanwhile) are left out of placing, and leases no longer running out
// of preempting.
func (p *Placer) write(ctx context.Context, pl db.PlacerPoolRow, b batch, res *Result) error {
	placed, failed := b.placed, b.failed
	var nPlaced, nFailed, nPreempted int
	err := pgx.BeginFunc(ctx, p.pool, func(tx pgx.Tx) error {
		nPlaced, nFailed, nPreempted = 0, 0, 0
		q := db.New(tx)
		now, err := p.now(ctx, q)
		if err != nil {
			return err
		}
		var ev event.Batch
		// Preemptions first: with no grace period what they free is placed below.
		if nPreempted, err = p.preempt(ctx, q, pl, now, b.preempted, &ev); err != nil {
			return err
		}
		if len(placed) > 0 {
			ids := make([]uuid.UUID, len(placed))
			var borrowing []uuid.UUID
			for i, pc := range placed {
				ids[i] = pc.Lease.ID
				if pc.Borrowing {
					borrowing = append(borrowing, pc.Lease.ID)
				}
			}
			rows, err := q.MarkPoolLeasesPlaced(ctx, db.MarkPoolLeasesPlacedParams{Now: now, Ids: ids, BorrowingIds: borrowing})
			if err != nil {
				return fmt.Errorf("mark leases placed: %w", err)
			}
			ends := make(map[uuid.UUID]*time.Time, len(rows))
			for _, r := range rows {
				ends[r.ID] = r.EndsAt
			}
			var dev db.InsertDeviceAllocationsParams
			var res db.InsertResourceAllocationsParams
			var gangs db.SetGangDomainsParams
			dev.Now, res.Now = now, now
			for _, pc := range placed {
				end, ok := ends[pc.Lease.ID]
				if !ok {
					continue
				}
				gang := pc.Lease.Gang != nil
				if gang {
					gangs.Ids = append(gangs.Ids, pc.Lease.ID)
					gangs.Domains = append(gangs.Domains, pc.Domain)
				}
				var nodes []uuid.UUID
				for _, h := range pc.Holds {
					if h.Device != 0 {
						dev.LeaseIds = append(dev.LeaseIds, pc.Lease.ID)
						dev.NodeIds = append(dev.NodeIds, h.Node)
						dev.DeviceIds = append(dev.DeviceIds, h.Device)
						dev.Models = append(dev.Models, h.Model)
						dev.Topologies = append(dev.Topologies, string(h.Topology))
						rank := int32(-1)
						if gang {
							rank = h.Rank
						}
						dev.Ranks = append(dev.Ranks, rank)
					} else {
						res.LeaseIds = append(res.LeaseIds, pc.Lease.ID)
						res.NodeIds = append(res.NodeIds, h.Node)
						res.Cpus = append(res.Cpus, h.CPUs)
						res.MemoryBytes = append(res.MemoryBytes, h.Memory)
					}
					if len(nodes) == 0 || nodes[len(nodes)-1] != h.Node {
						nodes = append(nodes, h.Node)
					}
				}
				if err := ev.Add(pc.Lease.Tenant, event.LeasePlaced{LeaseChange: event.LeaseChange{
					ID: pc.Lease.ID, PoolID: pl.ID, State: string(capacity.LeasePlaced), PreviousState: string(capacity.LeasePending),
					NodeIDs: nodes, EndTime: end,
				}}); err != nil {
					return err
				}
				nPlaced++
			}
			if len(dev.LeaseIds) > 0 {
				if err := q.InsertDeviceAllocations(ctx, dev); err != nil {
					return fmt.Errorf("allocate devices: %w", err)
				}
			}
			if len(res.LeaseIds) > 0 {
				if err := q.InsertResourceAllocations(ctx, res); err != nil {
					return fmt.Errorf("allocate CPUs and memory: %w", err)
				}
			}
			if len(gangs.Ids) > 0 {
				if err := q.SetGangDomains(ctx, gangs); err != nil {
					return fmt.Errorf("record gang domains: %w", err)
				}
			}
		}
		byReason := map[string][]uuid.UUID{}
		for _, f := range failed {
			byReason[f.Reason] = append(byReason[f.Reason], f.Lease.ID)
		}
		for reason, ids := range byReason {
			rows, err := capacity.EndLeases(ctx, q, ids, capacity.LeaseFailed, reason, &now, ev.Add)
			if err != nil {
				return err
			}
			nFailed += len(rows)
		}
		if err := recount(ctx, q, b.recounts); err != nil {
			return err
		}
		return ev.Emit(ctx, q)
	})
	if err != nil {
		return fmt.Errorf("write placements: %w", err)
	}
	res.Placed += nPlaced
	res.Failed += nFailed
	res.Preempted += nPreempted
	return nil
}

// preempt marks the preempted leases that are still running preempted, with their events; with
// no grace period it ends them at once, freeing and metering what they held.
func (p *Placer) preempt(ctx context.Context, q *db.Queries, pl db.PlacerPoolRow, now time.Time, preempted []placement.Preemption, ev *event.Batch) (int, error) {
	if len(preempted) == 0 {
		return 0, nil
	}
	byReason := map[string][]uuid.UUID{}
	forLease := make(map[uuid.UUID]*placement.Lease, len(preempted))
	for _, pe := range preempted {
		reason := "preempted: its capacity was reclaimed for a tenant within its nominal quota in the pool"
		if !pe.Reclaim {
			reason = "preempted for a higher-priority lease of the same tenant"
		}
		byReason[reason] = append(byReason[reason], pe.Lease.ID)
		forLease[pe.Lease.ID] = pe.For
	}
	var ended []uuid.UUID
	n := 0
	for reason, ids := range byReason {
		rows, err := q.PreemptPoolLeases(ctx, db.PreemptPoolLeasesParams{Now: now, Reason: reason, GraceMs: pl.PreemptionGraceMs, Ids: ids})
		if err != nil {
			return 0, fmt.Errorf("preempt leases: %w", err)
		}
		for _, r := range rows {
			e := event.LeasePreempted{
				LeaseChange: event.LeaseChange{
					ID: r.ID, PoolID: r.PoolID, State: string(capacity.LeasePreempted), PreviousState: string(capacity.LeasePlaced),
					Reason: reason, EndTime: r.EndsAt,
				},
				TenantID: r.TenantID, Priority: r.Priority, Borrowing: r.Borrowing,
			}
			// The owner sees which lease the capacity went to; the lease's tenant only when
			// that lease is its own.
			forID := forLease[r.ID].ID
			owners := e
			owners.ForLeaseID = &forID
			if forLease[r.ID].Tenant == r.TenantID || r.TenantID == pl.TenantID {
				e.ForLeaseID = &forID
			}
			if err := ev.Add(r.TenantID, e); err != nil {
				return 0, err
			}
			if r.TenantID != pl.TenantID {
				if err := ev.Add(pl.TenantID, owners); err != nil {
					return 0, err
				}
			}
			if r.EndedAt != nil {
				ended = append(ended, r.ID)
			}
			n++
		}
	}
	if len(ended) > 0 {
		if err := q.EndAllocations(ctx, ended); err != nil {
			return 0, fmt.Errorf("end allocations of preempted leases: %w", err)
		}
	}
	return n, nil
}

// recount records which running leases borrow, as the planner counted them.
func recount(ctx context.Context, q *db.Queries, recounts []placement.Recount) error {
	var on, off []uuid.UUID
	for _, r := range recounts {
		if r.Borrowing {
			on = append(on, r.ID)
		} else {
			off = append(off, r.ID)
		}
	}
	for _, set := range []struct {
		ids []uuid.UUID
		to  bool
	}{{on, true}, {off, false}} {
		if len(set.ids) == 0 {
			continue
		}
		if err := q.SetPoolLeasesBorrowing(ctx, db.SetPoolLeasesBorrowingParams{Borrowing: set.to, Ids: set.ids}); err != nil {
			return fmt.Errorf("record borrowing: %w", err)
		}
	}
	return nil
}

// schedule makes the pool's key due again at its next lease end or reservation boundary, or at
// once when leases were left over.
func (p *Placer) schedule(ctx context.Context, pl db.PlacerPoolRow, more bool) error {
	q := db.New(p.pool)
	var delay time.Duration
	if !more {
		now, err := p.now(ctx, q)
		if err != nil {
			return err
		}
		next, err := q.NextPoolWake(ctx, db.NextPoolWakeParams{PoolID: pl.ID, TenantID: pl.TenantID, Now: now})
		if err != nil {
			return fmt.Errorf("next wake: %w", err)
		}
		if next == 0 {
			return nil // nothing due: the key completes
		}
		sec, frac := math.Modf(next)
		delay = max(time.Unix(int64(sec), int64(frac*1e9)).Sub(now), 0)
	}
	if err := q.ScheduleReconcile(ctx, db.ScheduleReconcileParams{Kind: capacity.PlacerKind, Key: pl.ID.String(), DelayMs: delay.Milliseconds() + 1}); err != nil {
		return fmt.Errorf("schedule next reconcile: %w", err)
	}
	return nil
}
