package idlejob_test

import (
	"crypto/rand"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/better-compute/better-compute/gen/db"
	"github.com/better-compute/better-compute/internal/capacity"
	"github.com/better-compute/better-compute/internal/capacity/capacitytest"
	"github.com/better-compute/better-compute/internal/dbtest"
	"github.com/better-compute/better-compute/internal/event"
	"github.com/better-compute/better-compute/workers/internal/idlejob"
	"github.com/better-compute/better-compute/workers/internal/placer"
)

// lendBundle is a pool of nodes of 2 H100s owned by the root tenant, with a policy, holder leases
// of the owner placed an hour before now, one per node, and the clock.
type lendBundle struct {
	pool   *pgxpool.Pool
	owner  uuid.UUID
	pid    uuid.UUID
	nodes  []uuid.UUID
	leases []uuid.UUID
	now    time.Time
}

func setupLend(t *testing.T, policy string, nodes int, optOut ...bool) *lendBundle {
	t.Helper()
	b := &lendBundle{pool: dbtest.Pool(t), now: time.Now().UTC().Truncate(time.Minute)}
	b.owner = capacitytest.RootTenant(t, b.pool)
	sel := map[string]string{"gpu": "h100"}
	b.nodes = capacitytest.Nodes(t, b.pool, b.owner, nodes, capacitytest.NodeSpec{GPUs: 2, Model: "H100", Labels: sel})
	b.pid = capacitytest.Pool(t, b.pool, b.owner, "h100", sel)
	b.exec(t, `UPDATE pools SET idle_policy = $2::jsonb, preemption_grace_ms = 30000 WHERE id = $1`, b.pid, policy)
	b.leases = capacitytest.Leases(t, b.pool, b.owner, b.pid, nodes, capacitytest.LeaseSpec{GPUs: 2, Model: "H100", Duration: 24 * time.Hour})
	for i, l := range b.leases {
		capacitytest.PlaceOn(t, b.pool, l, b.nodes[i])
		if i < len(optOut) && optOut[i] {
			b.exec(t, `UPDATE pool_leases SET idle_opt_out = true WHERE id = $1`, l)
		}
	}
	hourAgo := b.now.Add(-time.Hour)
	b.exec(t, `UPDATE pool_leases SET placed_at = $1::timestamptz, ends_at = $1::timestamptz + interval '1 day' WHERE pool_id = $2`, hourAgo, b.pid)
	b.exec(t, `UPDATE allocations SET started_at = $1, metered_until = $1 WHERE lease_id = ANY($2)`, hourAgo, b.leases)
	// Every lease idled at 2% for the last 10 minutes.
	for i, l := range b.leases {
		for m := range 10 {
			b.exec(t, `INSERT INTO lease_gpu_minutes (lease_id, node_id, minute, tenant_id, pool_id, gpus, gpu_seconds,
					active_gpu_seconds, util_sum, util_gpus, util_max, memory_peak_bytes)
				VALUES ($1, $2, $3, $4, $5, 2, 120, 0, 4, 2, 2, 0)`,
				l, b.nodes[i], b.now.Add(-time.Duration(m+1)*time.Minute), b.owner, b.pid)
		}
	}
	return b
}

func (b *lendBundle) exec(t *testing.T, sql string, args ...any) {
	t.Helper()
	if _, err := b.pool.Exec(ctx, sql, args...); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
}

func (b *lendBundle) count(t *testing.T, sql string, args ...any) int {
	t.Helper()
	var n int
	if err := b.pool.QueryRow(ctx, sql, args...).Scan(&n); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	return n
}

func (b *lendBundle) idle(t *testing.T, at time.Time) idlejob.Stats {
	t.Helper()
	st, err := idlejob.RunOnce(ctx, b.pool, idlejob.Options{Now: func() time.Time { return at }})
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// devices are the devices a lease holds now, in order.
func (b *lendBundle) devices(t *testing.T, lease uuid.UUID) []int64 {
	t.Helper()
	rows, err := b.pool.Query(ctx, `SELECT device_id FROM allocations WHERE lease_id = $1 AND ended_at IS NULL ORDER BY device_id`, lease)
	if err != nil {
		t.Fatal(err)
	}
	var out []int64
	for rows.Next() {
		var d int64
		if err := rows.Scan(&d); err != nil {
			t.Fatal(err)
		}
		out = append(out, d)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestLendAndWake: under LEND (grace 0) an idle lease is told and lent at once: its allocations
// end and it stays placed; the placer places another tenant's lease on its GPUs, marked as on
// loan; the holder wakes (what leases/wake does): the placer preempts the borrower with the
// pool's grace (30s), then, once it has ended, gives the holder the same GPUs again (lease.woke).
// Lent time is not billed to the holder.
func TestLendAndWake(t *testing.T) {
	t.Parallel()
	b := setupLend(t, `{"minUtilization": 10, "windowMs": 600000, "action": "lend"}`, 1)
	holder := b.leases[0]
	before := b.devices(t, holder)
	if len(before) != 2 {
		t.Fatalf("holder holds %v", before)
	}
	other := capacitytest.Tenant(t, b.pool, "team-b")
	capacitytest.Grant(t, b.pool, b.pid, b.owner, other, capacitytest.GPUs("H100", 0), capacitytest.GPUs("H100", 2), 1)

	if st := b.idle(t, b.now); st.Told != 1 || st.Lent != 1 {
		t.Fatalf("idle run: %+v, want the lease told and lent", st)
	}
	if n := b.count(t, `SELECT count(*) FROM pool_leases WHERE id = $1 AND state = 'placed' AND lent_since = $2`, holder, b.now); n != 1 {
		t.Fatal("the lent lease is not placed and lent")
	}
	if d := b.devices(t, holder); len(d) != 0 {
		t.Fatalf("the lent lease still holds %v", d)
	}
	if n := b.count(t, `SELECT count(*) FROM outbox WHERE type = 'lease.lent'`); n != 1 {
		t.Fatalf("%d lease.lent events", n)
	}
	// A second run leaves a lent lease alone.
	if st := b.idle(t, b.now.Add(time.Minute)); st != (idlejob.Stats{}) {
		t.Fatalf("second run: %+v", st)
	}

	// Another tenant's lease is placed on the lent GPUs.
	p := placer.New(b.pool, placer.Options{Now: func() time.Time { return b.now.Add(time.Minute) }})
	borrower := capacitytest.Leases(t, b.pool, other, b.pid, 1, capacitytest.LeaseSpec{GPUs: 2, Model: "H100", Duration: time.Hour})[0]
	if res, err := p.ReconcilePool(ctx, b.pid.String()); err != nil || res.Placed != 1 {
		t.Fatalf("place the borrower: %+v, %v", res, err)
	}
	if d := b.devices(t, borrower); len(d) != 2 || d[0] != before[0] || d[1] != before[1] {
		t.Fatalf("borrower holds %v, want the lent %v", d, before)
	}
	if n := b.count(t, `SELECT count(*) FROM allocations WHERE lease_id = $1 AND lent_from = $2 AND ended_at IS NULL`, borrower, holder); n != 2 {
		t.Fatalf("%d of the borrower's allocations marked as on loan from the holder", n)
	}

	// The holder wakes, as leases/wake does it.
	wake := b.now.Add(2 * time.Minute)
	if _, err := db.New(b.pool).RequestLeaseWake(ctx, db.RequestLeaseWakeParams{TenantID: b.owner, ID: holder}); err != nil {
		t.Fatal(err)
	}
	p = placer.New(b.pool, placer.Options{Now: func() time.Time { return wake }})
	if res, err := p.ReconcilePool(ctx, b.pid.String()); err != nil || res.Preempted != 1 || res.Returned != 0 {
		t.Fatalf("wake: %+v, %v; want the borrower preempted", res, err)
	}
	if n := b.count(t, `SELECT count(*) FROM pool_leases WHERE id = $1 AND state = 'preempted' AND ends_at = $2`, borrower, wake.Add(30*time.Second)); n != 1 {
		t.Fatal("the borrower was not preempted with the pool's grace")
	}
	// A pending lease of the other tenant is not placed on the waking lease's GPUs meanwhile.
	capacitytest.Leases(t, b.pool, other, b.pid, 1, capacitytest.LeaseSpec{GPUs: 1, Model: "H100", Duration: time.Hour})
	if res, err := p.ReconcilePool(ctx, b.pid.String()); err != nil || res.Placed != 0 || res.Preempted != 0 {
		t.Fatalf("within the grace: %+v, %v", res, err)
	}

	// The grace passes: the borrower ends, the holder holds the same GPUs again.
	back := wake.Add(31 * time.Second)
	p = placer.New(b.pool, placer.Options{Now: func() time.Time { return back }})
	res, err := p.ReconcilePool(ctx, b.pid.String())
	if err != nil || res.Returned != 1 || res.Placed != 0 {
		t.Fatalf("after the grace: %+v, %v; want the holder's GPUs back and nothing placed", res, err)
	}
	if d := b.devices(t, holder); len(d) != 2 || d[0] != before[0] || d[1] != before[1] {
		t.Fatalf("holder holds %v, want %v again", d, before)
	}
	if n := b.count(t, `SELECT count(*) FROM pool_leases WHERE id = $1 AND state = 'placed' AND lent_since IS NULL AND wake_requested_at IS NULL AND idle_since IS NULL`, holder); n != 1 {
		t.Fatal("the holder's loan is not cleared")
	}
	if n := b.count(t, `SELECT count(*) FROM lease_loans`); n != 0 {
		t.Fatalf("%d loans left", n)
	}
	if n := b.count(t, `SELECT count(*) FROM outbox WHERE type = 'lease.woke'`); n != 1 {
		t.Fatalf("%d lease.woke events", n)
	}
	capacitytest.AssertNoOvercommit(t, b.pool)
	// The holder is billed up to its loan and from its return, not for the lent minutes.
	if n := b.count(t, `SELECT count(*) FROM usage_records WHERE lease_id = $1 AND resource = 'gpu' AND period_end > $2 AND period_start < $3`,
		holder, b.now, back); n != 0 {
		t.Fatalf("%d usage records of the holder inside its loan", n)
	}

	// Idle again for a window after it got its GPUs back: lent again.
	again := back.Truncate(time.Minute).Add(12 * time.Minute)
	for m := range 10 {
		b.exec(t, `INSERT INTO lease_gpu_minutes (lease_id, node_id, minute, tenant_id, pool_id, gpus, gpu_seconds,
				active_gpu_seconds, util_sum, util_gpus, util_max, memory_peak_bytes)
			VALUES ($1, $2, $3, $4, $5, 2, 120, 0, 4, 2, 2, 0)`,
			holder, b.nodes[0], again.Add(-time.Duration(m+1)*time.Minute), b.owner, b.pid)
	}
	if st := b.idle(t, again); st.Told != 1 || st.Lent != 1 {
		t.Fatalf("idle again: %+v, want the lease told and lent again", st)
	}
	// It ends while lent: the loan ends, a borrower placed meanwhile keeps running.
	p = placer.New(b.pool, placer.Options{Now: func() time.Time { return again.Add(time.Minute) }})
	if res, err := p.ReconcilePool(ctx, b.pid.String()); err != nil || res.Placed != 1 {
		t.Fatalf("place a borrower again: %+v, %v", res, err)
	}
	if _, err := capacity.EndLeases(ctx, db.New(b.pool), []uuid.UUID{holder}, capacity.LeaseReleased, "test", ptr(again.Add(2*time.Minute)), func(uuid.UUID, event.Event) error { return nil }); err != nil {
		t.Fatal(err)
	}
	if n := b.count(t, `SELECT count(*) FROM lease_loans`); n != 0 {
		t.Fatalf("%d loans left after the holder ended", n)
	}
	if n := b.count(t, `SELECT count(*) FROM allocations a JOIN pool_leases l ON l.id = a.lease_id
		WHERE a.lent_from = $1 AND a.ended_at IS NULL AND l.state = 'placed'`, holder); n != 1 {
		t.Fatalf("%d borrowers' allocations still held after the holder ended, want 1", n)
	}
}

func ptr[T any](v T) *T { return &v }

// TestIdleOptOutAndTunnels: a lease opted out is never judged; a lease whose node has its
// tenant's tunnel open is busy where the policy counts tunnels as use; a lent lease whose
// tenant opens a tunnel to its node wakes.
func TestIdleOptOutAndTunnels(t *testing.T) {
	t.Parallel()
	b := setupLend(t, `{"minUtilization": 10, "windowMs": 600000, "action": "lend", "allowOptOut": true, "tunnelCountsAsUse": true}`, 3, true)
	optedOut, tunnelled, lent := b.leases[0], b.leases[1], b.leases[2]
	tunnel := func(node uuid.UUID) {
		t.Helper()
		hash := make([]byte, 32)
		_, _ = rand.Read(hash)
		b.exec(t, `INSERT INTO tunnels (id, tenant_id, node_id, port, ticket_hash, expires_at, opened_at)
			VALUES ($1, $2, $3, 22, $4, $5, $5)`, uuid.New(), b.owner, node, hash, b.now.Add(-time.Minute))
	}
	tunnel(b.nodes[1])
	if st := b.idle(t, b.now); st.Told != 1 || st.Lent != 1 || st.Woken != 0 {
		t.Fatalf("first run: %+v, want only the third lease told and lent", st)
	}
	if n := b.count(t, `SELECT count(*) FROM pool_leases WHERE id = ANY($1) AND idle_since IS NULL AND lent_since IS NULL`, []uuid.UUID{optedOut, tunnelled}); n != 2 {
		t.Fatal("the opted-out or the tunnelled lease was judged idle")
	}
	// The lent lease's tenant opens a tunnel to its node: it wakes, and the placer gives its
	// GPUs back at once (nothing borrowed them).
	tunnel(b.nodes[2])
	if st := b.idle(t, b.now.Add(time.Minute)); st.Woken != 1 {
		t.Fatalf("second run: %+v, want the lent lease woken", st)
	}
	p := placer.New(b.pool, placer.Options{Now: func() time.Time { return b.now.Add(2 * time.Minute) }})
	if res, err := p.ReconcilePool(ctx, b.pid.String()); err != nil || res.Returned != 1 {
		t.Fatalf("placer: %+v, %v", res, err)
	}
	if d := b.devices(t, lent); len(d) != 2 {
		t.Fatalf("the woken lease holds %v", d)
	}
}

// TestLentGPUsInUseWake: the minutes of a lent GPU no one holds are stored on the lease that
// lent it; an idle one leaves it lent, a busy one (the holder uses its GPUs anyway) wakes it,
// and the placer gives them back.
func TestLentGPUsInUseWake(t *testing.T) {
	t.Parallel()
	b := setupLend(t, `{"minUtilization": 10, "windowMs": 600000, "action": "lend"}`, 1)
	holder := b.leases[0]
	if st := b.idle(t, b.now); st.Lent != 1 {
		t.Fatalf("idle run: %+v", st)
	}
	var uuids []string
	rows, err := b.pool.Query(ctx, `SELECT uuid FROM devices WHERE node_id = $1 ORDER BY idx`, b.nodes[0])
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var u string
		if err := rows.Scan(&u); err != nil {
			t.Fatal(err)
		}
		uuids = append(uuids, u)
	}
	if len(uuids) != 2 {
		t.Fatalf("devices %v", uuids)
	}
	minute := func(at time.Time, util float64) {
		t.Helper()
		n, err := db.New(b.pool).RecordGPUUsage(ctx, db.RecordGPUUsageParams{
			Minute: at, NodeID: b.nodes[0], Uuids: uuids, UtilMeans: []float64{util, util}, UtilMaxes: []float64{util, util},
			ActiveSeconds: []int32{0, 0}, MemoryUsed: []int64{0, 0},
		})
		if err != nil || n != 1 {
			t.Fatalf("record a minute: %d rows, %v", n, err)
		}
	}
	minute(b.now, 1)
	if st := b.idle(t, b.now.Add(time.Minute)); st.Woken != 0 {
		t.Fatalf("an idle lent minute woke the lease: %+v", st)
	}
	minute(b.now.Add(time.Minute), 80)
	if st := b.idle(t, b.now.Add(2*time.Minute)); st.Woken != 1 {
		t.Fatalf("a busy lent minute: %+v, want the lease woken", st)
	}
	p := placer.New(b.pool, placer.Options{Now: func() time.Time { return b.now.Add(3 * time.Minute) }})
	if res, err := p.ReconcilePool(ctx, b.pid.String()); err != nil || res.Returned != 1 {
		t.Fatalf("placer: %+v, %v", res, err)
	}
	if d := b.devices(t, holder); len(d) != 2 {
		t.Fatalf("the woken lease holds %v", d)
	}
}
