package placer_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/better-compute/better-compute/internal/capacity"
	"github.com/better-compute/better-compute/internal/capacity/capacitytest"
	"github.com/better-compute/better-compute/internal/dbtest"
	"github.com/better-compute/better-compute/internal/fleet"
	"github.com/better-compute/better-compute/workers/internal/placer"
)

func TestMain(m *testing.M) { dbtest.Main(m) }

var ctx = context.Background()

// place runs one reconcile of a pool and fails the test on error.
func place(t testing.TB, p *placer.Placer, poolID uuid.UUID) placer.Result {
	t.Helper()
	res, err := p.ReconcilePool(ctx, poolID.String())
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// heldDevices maps each lease to the devices it holds, with their node.
func heldDevices(t testing.TB, pool *pgxpool.Pool) map[uuid.UUID][]uuid.UUID {
	t.Helper()
	rows, err := pool.Query(ctx, `SELECT lease_id, node_id FROM allocations WHERE ended_at IS NULL ORDER BY id`)
	if err != nil {
		t.Fatal(err)
	}
	out := map[uuid.UUID][]uuid.UUID{}
	for rows.Next() {
		var l, n uuid.UUID
		if err := rows.Scan(&l, &n); err != nil {
			t.Fatal(err)
		}
		out[l] = append(out[l], n)
	}
	return out
}

func TestBinPackingFillsNodesBeforeOpeningOthers(t *testing.T) {
	t.Parallel()
	pool := dbtest.Pool(t)
	tenant := capacitytest.RootTenant(t, pool)
	capacitytest.Nodes(t, pool, tenant, 4, capacitytest.NodeSpec{GPUs: 8, Model: "H100", Labels: map[string]string{"gpu": "h100"}})
	pid := capacitytest.Pool(t, pool, tenant, "h100", map[string]string{"gpu": "h100"})
	// 3 + 3 + 2 fill one node; the 4-GPU lease opens a second node; 2 + 2 then fill that one.
	var ids []uuid.UUID
	for _, g := range []int32{3, 3, 2, 4, 2, 2} {
		ids = append(ids, capacitytest.Leases(t, pool, tenant, pid, 1, capacitytest.LeaseSpec{GPUs: g, Model: "H100"})...)
	}
	p := placer.New(pool, placer.Options{})
	if res := place(t, p, pid); res.Placed != 6 {
		t.Fatalf("placed %d leases, want 6", res.Placed)
	}
	held := heldDevices(t, pool)
	nodesUsed := map[uuid.UUID]int{}
	for _, id := range ids {
		for _, n := range held[id] {
			nodesUsed[n]++
		}
	}
	if len(nodesUsed) != 2 {
		t.Fatalf("bin packing used %d nodes (%v), want 2 full ones", len(nodesUsed), nodesUsed)
	}
	for n, c := range nodesUsed {
		if c != 8 {
			t.Errorf("node %s holds %d GPUs, want 8", n, c)
		}
	}
	capacitytest.AssertNoOvercommit(t, pool)
	capacitytest.AssertUsageCounted(t, pool)

	// Spread leases go to the emptiest nodes, one per node.
	spread := capacitytest.Leases(t, pool, tenant, pid, 2, capacitytest.LeaseSpec{GPUs: 1, Model: "H100", Spread: true})
	place(t, p, pid)
	held = heldDevices(t, pool)
	if a, b := held[spread[0]], held[spread[1]]; len(a) != 1 || len(b) != 1 || a[0] == b[0] {
		t.Fatalf("spread leases on %v and %v, want two different empty nodes", a, b)
	}
	for _, n := range append(held[spread[0]], held[spread[1]]...) {
		if nodesUsed[n] > 0 {
			t.Errorf("spread lease placed on a busy node %s", n)
		}
	}
}

func TestMultiNodeLeaseAndNeverFits(t *testing.T) {
	t.Parallel()
	pool := dbtest.Pool(t)
	tenant := capacitytest.RootTenant(t, pool)
	capacitytest.Nodes(t, pool, tenant, 3, capacitytest.NodeSpec{GPUs: 8, Model: "H100", Labels: map[string]string{"gpu": "h100"}})
	pid := capacitytest.Pool(t, pool, tenant, "h100", map[string]string{"gpu": "h100"})
	big := capacitytest.Leases(t, pool, tenant, pid, 1, capacitytest.LeaseSpec{GPUs: 16, Model: "H100"})
	// Admission refuses these; inserted directly, the placer fails them.
	tooBig := capacitytest.Leases(t, pool, tenant, pid, 1, capacitytest.LeaseSpec{GPUs: 25, Model: "H100"})
	wrong := capacitytest.Leases(t, pool, tenant, pid, 1, capacitytest.LeaseSpec{GPUs: 1, Model: "A100"})
	p := placer.New(pool, placer.Options{})
	if res := place(t, p, pid); res.Placed != 1 || res.Failed != 2 {
		t.Fatalf("result %+v, want 1 placed and 2 failed", res)
	}
	held := heldDevices(t, pool)[big[0]]
	perNode := map[uuid.UUID]int{}
	for _, n := range held {
		perNode[n]++
	}
	if len(held) != 16 || len(perNode) != 2 {
		t.Fatalf("the 16-GPU lease holds %d GPUs on %d nodes, want 16 on 2", len(held), len(perNode))
	}
	if s := capacitytest.States(t, pool, append(tooBig, wrong...)); s[capacity.LeaseFailed] != 2 {
		t.Fatalf("states %v, want both failed", s)
	}
	var reasons []string
	rows, _ := pool.Query(ctx, `SELECT reason FROM pool_leases WHERE id = ANY($1) ORDER BY reason`, append(tooBig, wrong...))
	reasons, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	if reasons[0] != `the pool has no "A100" GPUs` || reasons[1] != `the pool has only 24 "H100" GPUs` {
		t.Errorf("reasons %q", reasons)
	}
	var events int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM outbox WHERE type IN ('lease.placed', 'lease.failed')`).Scan(&events); err != nil || events != 3 {
		t.Errorf("%d placed/failed events, %v; want 3", events, err)
	}
}

func TestUnschedulableNodesGetNoPlacement(t *testing.T) {
	t.Parallel()
	pool := dbtest.Pool(t)
	tenant := capacitytest.RootTenant(t, pool)
	sel := map[string]string{"gpu": "h100"}
	var unschedulable []uuid.UUID
	for _, spec := range []capacitytest.NodeSpec{
		{State: "drained"}, {State: "draining"}, {State: "cordoned"}, {State: "joining"}, {Offline: true},
		{Taints: []fleet.Taint{{Key: "maintenance", Effect: "NoSchedule"}}},
	} {
		spec.GPUs, spec.Model, spec.Labels = 8, "H100", sel
		unschedulable = append(unschedulable, capacitytest.Nodes(t, pool, tenant, 1, spec)...)
	}
	pid := capacitytest.Pool(t, pool, tenant, "h100", sel)
	leases := capacitytest.Leases(t, pool, tenant, pid, 4, capacitytest.LeaseSpec{GPUs: 1, Model: "H100"})
	p := placer.New(pool, placer.Options{})
	if res := place(t, p, pid); res.Placed != 0 || res.Failed != 0 {
		t.Fatalf("result %+v: nothing is schedulable, the leases should wait", res)
	}
	if s := capacitytest.States(t, pool, leases); s[capacity.LeasePending] != 4 {
		t.Fatalf("states %v, want all pending", s)
	}
	// A lease that tolerates the taint goes to the tainted node, and only there.
	tol := capacitytest.Leases(t, pool, tenant, pid, 1, capacitytest.LeaseSpec{GPUs: 1, Model: "H100",
		Tolerations: []fleet.Toleration{{Key: "maintenance", Operator: "Exists"}}})
	if res := place(t, p, pid); res.Placed != 1 {
		t.Fatalf("result %+v, want the tolerating lease placed", res)
	}
	if held := heldDevices(t, pool)[tol[0]]; len(held) != 1 || held[0] != unschedulable[5] {
		t.Fatalf("tolerating lease on %v, want the tainted node", held)
	}
	// A ready node arrives: the pending leases go there, none to the others.
	ready := capacitytest.Nodes(t, pool, tenant, 1, capacitytest.NodeSpec{GPUs: 8, Model: "H100", Labels: sel})
	if res := place(t, p, pid); res.Placed != 4 {
		t.Fatalf("result %+v, want 4 placed", res)
	}
	for _, l := range leases {
		if held := heldDevices(t, pool)[l]; len(held) != 1 || held[0] != ready[0] {
			t.Fatalf("lease %s on %v, want the ready node", l, held)
		}
	}
	capacitytest.AssertNoOvercommit(t, pool)
	capacitytest.AssertUsageCounted(t, pool)
}

func TestOfflineNodeLeasesAtRiskAndBack(t *testing.T) {
	t.Parallel()
	pool := dbtest.Pool(t)
	tenant := capacitytest.RootTenant(t, pool)
	nodes := capacitytest.Nodes(t, pool, tenant, 2, capacitytest.NodeSpec{GPUs: 4, Model: "H100", Labels: map[string]string{"gpu": "h100"}})
	pid := capacitytest.Pool(t, pool, tenant, "h100", map[string]string{"gpu": "h100"})
	leases := capacitytest.Leases(t, pool, tenant, pid, 2, capacitytest.LeaseSpec{GPUs: 4, Model: "H100"})
	p := placer.New(pool, placer.Options{})
	place(t, p, pid)
	held := heldDevices(t, pool)
	down := held[leases[0]][0]

	// The node goes offline, as the liveness job would do it.
	setOnline := func(online bool, hook func(context.Context, pgx.Tx, []uuid.UUID) error) {
		t.Helper()
		err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, `UPDATE nodes SET online = $2 WHERE id = $1`, down, online); err != nil {
				return err
			}
			return hook(ctx, tx, []uuid.UUID{down})
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	setOnline(false, placer.MarkAtRisk)
	s := capacitytest.States(t, pool, leases[:1])
	if s[capacity.LeaseAtRisk] != 1 {
		t.Fatalf("state %v, want at_risk", s)
	}
	if s := capacitytest.States(t, pool, leases[1:]); s[capacity.LeasePlaced] != 1 {
		t.Fatalf("the other node's lease is %v, want placed", s)
	}
	if n, err := placer.ActiveLeases(ctx, pool, down); err != nil || n != 1 {
		t.Fatalf("ActiveLeases = %d, %v; want 1 (an at-risk lease still holds its devices)", n, err)
	}
	// Nothing new goes to the offline node, and the at-risk lease keeps its devices.
	more := capacitytest.Leases(t, pool, tenant, pid, 1, capacitytest.LeaseSpec{GPUs: 1, Model: "H100"})
	place(t, p, pid)
	if st := capacitytest.States(t, pool, more); st[capacity.LeasePending] != 1 {
		t.Fatalf("new lease %v, want pending (the only free capacity is offline)", st)
	}
	capacitytest.AssertNoOvercommit(t, pool)
	capacitytest.AssertUsageCounted(t, pool)

	setOnline(true, placer.MarkPlaced)
	if s := capacitytest.States(t, pool, leases[:1]); s[capacity.LeasePlaced] != 1 {
		t.Fatalf("state %v after the node came back, want placed", s)
	}
	var types []string
	rows, _ := pool.Query(ctx, `SELECT type FROM outbox WHERE subject = $1 ORDER BY id`, "lease/"+leases[0].String())
	types, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(types) != "[lease.placed lease.at_risk lease.placed]" {
		t.Errorf("events %v", types)
	}
	// MarkPlaced enqueued the pool.
	var queued int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM reconcile_queue WHERE kind = $1 AND key = $2`, capacity.PlacerKind, pid.String()).Scan(&queued); err != nil || queued != 1 {
		t.Errorf("pool queued %d times, %v", queued, err)
	}
	_ = nodes
}

func TestExpiryFreesDevicesAndReschedules(t *testing.T) {
	t.Parallel()
	pool := dbtest.Pool(t)
	tenant := capacitytest.RootTenant(t, pool)
	capacitytest.Nodes(t, pool, tenant, 1, capacitytest.NodeSpec{GPUs: 2, Model: "H100", Labels: map[string]string{"gpu": "h100"}})
	pid := capacitytest.Pool(t, pool, tenant, "h100", map[string]string{"gpu": "h100"})
	first := capacitytest.Leases(t, pool, tenant, pid, 1, capacitytest.LeaseSpec{GPUs: 2, Model: "H100", Duration: 30 * time.Minute})
	second := capacitytest.Leases(t, pool, tenant, pid, 1, capacitytest.LeaseSpec{GPUs: 2, Model: "H100", Duration: time.Hour})
	now := time.Date(2031, 3, 4, 10, 15, 0, 0, time.UTC)
	p := placer.New(pool, placer.Options{Now: func() time.Time { return now }})
	if res := place(t, p, pid); res.Placed != 1 {
		t.Fatalf("result %+v", res)
	}
	// The key is due again when the first lease ends (30 minutes, by the database's clock).
	var delay float64
	if err := pool.QueryRow(ctx, `SELECT EXTRACT(EPOCH FROM due_at - now()) FROM reconcile_queue WHERE kind = $1 AND key = $2`, capacity.PlacerKind, pid.String()).Scan(&delay); err != nil {
		t.Fatal(err)
	}
	if delay < 29*60 || delay > 30*60+1 {
		t.Errorf("due in %.0fs, want about 1800s", delay)
	}
	now = now.Add(45 * time.Minute)
	if res := place(t, p, pid); res.Expired != 1 || res.Placed != 1 {
		t.Fatalf("result %+v, want the first expired and the second placed", res)
	}
	var endedAt, placedAt time.Time
	if err := pool.QueryRow(ctx, `SELECT ended_at FROM pool_leases WHERE id = $1`, first[0]).Scan(&endedAt); err != nil {
		t.Fatal(err)
	}
	if want := time.Date(2031, 3, 4, 10, 45, 0, 0, time.UTC); !endedAt.Equal(want) {
		t.Errorf("first lease ended at %v, want its end %v", endedAt, want)
	}
	if err := pool.QueryRow(ctx, `SELECT placed_at FROM pool_leases WHERE id = $1`, second[0]).Scan(&placedAt); err != nil {
		t.Fatal(err)
	}
	if !placedAt.Equal(now) {
		t.Errorf("second lease placed at %v, want %v", placedAt, now)
	}
	capacitytest.AssertNoOvercommit(t, pool)
	capacitytest.AssertUsageCounted(t, pool)
}

func TestReservationsKeepOthersOff(t *testing.T) {
	t.Parallel()
	pool := dbtest.Pool(t)
	tenant := capacitytest.RootTenant(t, pool)
	capacitytest.Nodes(t, pool, tenant, 1, capacitytest.NodeSpec{GPUs: 8, Model: "H100", Labels: map[string]string{"gpu": "h100", "rack": "a"}})
	capacitytest.Nodes(t, pool, tenant, 1, capacitytest.NodeSpec{GPUs: 8, Model: "H100", Labels: map[string]string{"gpu": "h100", "rack": "b"}})
	all := capacitytest.Pool(t, pool, tenant, "h100", map[string]string{"gpu": "h100"})
	rackA := capacitytest.Pool(t, pool, tenant, "rack-a", map[string]string{"rack": "a"})
	now := time.Date(2031, 3, 4, 10, 0, 0, 0, time.UTC)
	// Rack a is reserved from 11:00 to 13:00.
	resID := uuid.Must(uuid.NewV7())
	if _, err := pool.Exec(ctx, `INSERT INTO reservations (id, tenant_id, pool_id, during) VALUES ($1, $2, $3, tstzrange($4, $5))`,
		resID, tenant, rackA, now.Add(time.Hour), now.Add(3*time.Hour)); err != nil {
		t.Fatal(err)
	}
	p := placer.New(pool, placer.Options{Now: func() time.Time { return now }})
	// Two-hour leases in the big pool must keep off rack a: 8 fit on rack b, 8 wait.
	long := capacitytest.Leases(t, pool, tenant, all, 16, capacitytest.LeaseSpec{GPUs: 1, Model: "H100", Duration: 2 * time.Hour})
	// A 30-minute lease ends before the window: rack a may take it.
	short := capacitytest.Leases(t, pool, tenant, all, 1, capacitytest.LeaseSpec{GPUs: 1, Model: "H100", Duration: 30 * time.Minute})
	// A lease of the reservation waits for its window.
	inRes := capacitytest.Leases(t, pool, tenant, rackA, 1, capacitytest.LeaseSpec{GPUs: 4, Model: "H100", Duration: 5 * time.Hour, Reservation: &resID})
	if res := place(t, p, all); res.Placed != 9 {
		t.Fatalf("result %+v, want 8 long leases on rack b and the short one on rack a", res)
	}
	if s := capacitytest.States(t, pool, long); s[capacity.LeasePlaced] != 8 || s[capacity.LeasePending] != 8 {
		t.Fatalf("long leases %v", s)
	}
	if s := capacitytest.States(t, pool, short); s[capacity.LeasePlaced] != 1 {
		t.Fatalf("short lease %v, want placed", s)
	}
	place(t, p, rackA)
	if s := capacitytest.States(t, pool, inRes); s[capacity.LeasePending] != 1 {
		t.Fatalf("reservation lease %v before its window, want pending", s)
	}
	now = now.Add(time.Hour) // the window opens; the short lease has expired
	if res := place(t, p, rackA); res.Placed != 1 {
		t.Fatalf("result %+v, want the reservation's lease placed", res)
	}
	var endsAt time.Time
	if err := pool.QueryRow(ctx, `SELECT ends_at FROM pool_leases WHERE id = $1`, inRes[0]).Scan(&endsAt); err != nil || !endsAt.Equal(now.Add(2*time.Hour)) {
		t.Fatalf("reservation lease ends at %v (%v), want the window's end", endsAt, err)
	}
	if res := place(t, p, all); res.Placed != 0 {
		t.Fatalf("result %+v: rack a is reserved, nothing else may go there", res)
	}
	capacitytest.AssertNoOvercommit(t, pool)
	capacitytest.AssertUsageCounted(t, pool)
}

func TestConcurrentPlacersNeverOvercommit(t *testing.T) {
	t.Parallel()
	pool := dbtest.Pool(t)
	tenant := capacitytest.RootTenant(t, pool)
	sel := map[string]string{"gpu": "h100"}
	capacitytest.Nodes(t, pool, tenant, 3, capacitytest.NodeSpec{GPUs: 4, Model: "H100", CPUs: 16, MemoryBytes: 64 << 30, Labels: sel})
	// Three pools over the same nodes: their placers run at once, under different keys, and
	// only the database can stop them from handing out one device twice.
	var pools []uuid.UUID
	for i := range 3 {
		pools = append(pools, capacitytest.Pool(t, pool, tenant, fmt.Sprintf("p%d", i), sel))
	}
	var leases []uuid.UUID
	for _, pid := range pools {
		leases = append(leases, capacitytest.Leases(t, pool, tenant, pid, 10, capacitytest.LeaseSpec{GPUs: 1, Model: "H100"})...)
		leases = append(leases, capacitytest.Leases(t, pool, tenant, pid, 5, capacitytest.LeaseSpec{CPUs: 4, MemoryBytes: 8 << 30})...)
	}
	var wg sync.WaitGroup
	var conflicts atomic.Int32
	for _, pid := range pools {
		for range 2 { // the same key twice at once, as a stale worker might
			wg.Go(func() {
				p := placer.New(pool, placer.Options{})
				for range 20 {
					if _, err := p.ReconcilePool(ctx, pid.String()); err != nil {
						var pgErr *pgconn.PgError
						if !errors.As(err, &pgErr) || pgErr.Code != "23P01" {
							t.Errorf("reconcile: %v", err)
						}
						conflicts.Add(1) // the database refused a conflicting placement: retried
					}
				}
			})
		}
	}
	wg.Wait()
	t.Logf("%d placements refused by the database and retried", conflicts.Load())
	if held := capacitytest.AssertNoOvercommit(t, pool); held != 12 {
		t.Fatalf("%d devices held, want all 12", held)
	}
	s := capacitytest.States(t, pool, leases)
	if s[capacity.LeasePlaced] != 12+12 || s[capacity.LeasePending] != 30+15-24 {
		t.Fatalf("states %v, want 12 GPU and 12 CPU leases placed (4 per node), the rest pending", s)
	}
}

func TestDatabaseRefusesOvercommit(t *testing.T) {
	t.Parallel()
	pool := dbtest.Pool(t)
	tenant := capacitytest.RootTenant(t, pool)
	sel := map[string]string{"gpu": "h100"}
	node := capacitytest.Nodes(t, pool, tenant, 1, capacitytest.NodeSpec{GPUs: 1, Model: "H100", CPUs: 8, MemoryBytes: 1 << 30, Labels: sel})[0]
	pid := capacitytest.Pool(t, pool, tenant, "h100", sel)
	leases := capacitytest.Leases(t, pool, tenant, pid, 3, capacitytest.LeaseSpec{GPUs: 1, Model: "H100"})
	var device int64
	if err := pool.QueryRow(ctx, `SELECT id FROM devices WHERE node_id = $1`, node).Scan(&device); err != nil {
		t.Fatal(err)
	}
	alloc := func(lease uuid.UUID, start time.Time, end *time.Time) error {
		_, err := pool.Exec(ctx, `INSERT INTO allocations (lease_id, node_id, device_id, model, started_at, ended_at, metered_until)
			VALUES ($1, $2, $3, 'H100', $4, $5, $4)`, lease, node, device, start, end)
		return err
	}
	wantExclusion := func(err error) {
		t.Helper()
		var pgErr *pgconn.PgError
		if !errors.As(err, &pgErr) || pgErr.Code != "23P01" {
			t.Fatalf("error %v, want an exclusion violation (23P01)", err)
		}
	}
	t0 := time.Date(2031, 1, 1, 0, 0, 0, 0, time.UTC)
	t1 := t0.Add(time.Hour)
	if err := alloc(leases[0], t0, &t1); err != nil {
		t.Fatal(err)
	}
	wantExclusion(alloc(leases[1], t0.Add(30*time.Minute), nil)) // overlaps the first
	if err := alloc(leases[1], t1, nil); err != nil {            // starts as the first ends
		t.Fatal(err)
	}
	wantExclusion(alloc(leases[2], t1.Add(time.Minute), nil)) // held, open-ended
	// CPUs and memory: the node has 8 CPUs.
	cpu := func(lease uuid.UUID, cpus int) error {
		_, err := pool.Exec(ctx, `INSERT INTO allocations (lease_id, node_id, cpus, memory_bytes, started_at, metered_until)
			VALUES ($1, $2, $3, 1, now(), now())`, lease, node, cpus)
		return err
	}
	if err := cpu(leases[2], 6); err != nil {
		t.Fatal(err)
	}
	wantExclusion(cpu(leases[2], 3))
	if _, err := pool.Exec(ctx, `UPDATE allocations SET ended_at = now() WHERE cpus = 6`); err != nil {
		t.Fatal(err)
	}
	if err := cpu(leases[2], 8); err != nil {
		t.Fatalf("the node's CPUs were freed: %v", err)
	}
}
