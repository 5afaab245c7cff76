package idlejob_test

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/better-compute/better-compute/internal/capacity/capacitytest"
	"github.com/better-compute/better-compute/internal/dbtest"
	"github.com/better-compute/better-compute/workers/internal/idlejob"
)

func TestMain(m *testing.M) { dbtest.Main(m) }

var ctx = context.Background()

// TestIdleLeases: under a pool's policy (under 10% for 10 minutes), a lease whose GPUs idled the
// whole window is told once, and released after the grace; a busy lease and one whose window is
// not sampled throughout are left alone; a told lease whose GPUs woke is idle no more.
func TestIdleLeases(t *testing.T) {
	t.Parallel()
	pool := dbtest.Pool(t)
	tenant := capacitytest.RootTenant(t, pool)
	sel := map[string]string{"gpu": "h100"}
	nodes := capacitytest.Nodes(t, pool, tenant, 4, capacitytest.NodeSpec{GPUs: 2, Model: "H100", Labels: sel})
	pid := capacitytest.Pool(t, pool, tenant, "h100", sel)
	if _, err := pool.Exec(ctx, `UPDATE pools SET idle_policy = '{"minUtilization": 10, "windowMs": 600000, "action": "release", "graceMs": 300000}' WHERE id = $1`, pid); err != nil {
		t.Fatal(err)
	}
	leases := capacitytest.Leases(t, pool, tenant, pid, 4, capacitytest.LeaseSpec{GPUs: 2, Model: "H100"})
	idle, busy, sparse, waking := leases[0], leases[1], leases[2], leases[3]
	for i, l := range leases {
		capacitytest.PlaceOn(t, pool, l, nodes[i])
	}
	now := time.Now().UTC().Truncate(time.Minute)
	if _, err := pool.Exec(ctx, `UPDATE pool_leases SET placed_at = $1 WHERE pool_id = $2`, now.Add(-time.Hour), pid); err != nil {
		t.Fatal(err)
	}
	// Minutes: idle and waking at 2%, busy at 90%, sparse only 3 of the 10.
	minutes := func(lease uuid.UUID, node uuid.UUID, n int, util float64, before time.Time) {
		t.Helper()
		for m := range n {
			if _, err := pool.Exec(ctx, `INSERT INTO lease_gpu_minutes (lease_id, node_id, minute, tenant_id, pool_id, gpus, gpu_seconds,
					active_gpu_seconds, util_sum, util_gpus, util_max, memory_peak_bytes)
				VALUES ($1, $2, $3, $4, $5, 2, 120, 0, $6::float8, 2, $6::float8, 0)
				ON CONFLICT (lease_id, node_id, minute) DO UPDATE SET util_sum = excluded.util_sum`,
				lease, node, before.Add(-time.Duration(m+1)*time.Minute), tenant, pid, 2*util); err != nil {
				t.Fatal(err)
			}
		}
	}
	minutes(idle, nodes[0], 10, 2, now)
	minutes(busy, nodes[1], 10, 90, now)
	minutes(sparse, nodes[2], 3, 0, now)
	minutes(waking, nodes[3], 10, 2, now)
	run := func(at time.Time) idlejob.Stats {
		t.Helper()
		st, err := idlejob.RunOnce(ctx, pool, idlejob.Options{Now: func() time.Time { return at }})
		if err != nil {
			t.Fatal(err)
		}
		return st
	}
	count := func(sql string, args ...any) int {
		t.Helper()
		var n int
		if err := pool.QueryRow(ctx, sql, args...).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	if st := run(now); st.Told != 2 || st.Released != 0 {
		t.Fatalf("first run: %+v, want idle and waking told", st)
	}
	if st := run(now.Add(time.Second)); st.Told != 0 {
		t.Fatalf("second run told again: %+v", st)
	}
	if n := count(`SELECT count(*) FROM outbox WHERE type = 'lease.idle'`); n != 2 {
		t.Fatalf("%d lease.idle events, want 2", n)
	}
	// The grace passes; idle stays idle, waking's GPUs get busy.
	later := now.Add(6 * time.Minute)
	minutes(idle, nodes[0], 10, 2, later)
	minutes(waking, nodes[3], 10, 80, later)
	if st := run(later); st.Released != 1 || st.Busy != 1 {
		t.Fatalf("after the grace: %+v, want idle released and waking busy", st)
	}
	if n := count(`SELECT count(*) FROM pool_leases WHERE id = $1 AND state = 'released' AND reason LIKE 'idle: mean GPU utilisation 2.0%'`, idle); n != 1 {
		t.Error("the idle lease was not released with its reason")
	}
	if n := count(`SELECT count(*) FROM pool_leases WHERE state = 'placed' AND idle_since IS NULL`); n != 3 {
		t.Errorf("%d placed leases not idle, want busy, sparse and waking", n)
	}
}
