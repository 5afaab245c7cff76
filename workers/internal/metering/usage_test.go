package metering_test

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/better-compute/better-compute/gen/db"
	"github.com/better-compute/better-compute/internal/capacity"
	"github.com/better-compute/better-compute/internal/capacity/capacitytest"
	"github.com/better-compute/better-compute/internal/dbtest"
	"github.com/better-compute/better-compute/internal/event"
	"github.com/better-compute/better-compute/workers/internal/metering"
	"github.com/better-compute/better-compute/workers/internal/placer"
)

func TestMain(m *testing.M) { dbtest.Main(m) }

var ctx = context.Background()

// TestUsageMatchesLeaseDurationsExactly runs leases on an injected clock through placement,
// hourly metering while they run, expiry and early release, and checks the hourly totals against
// the leases' durations to the microsecond.
func TestUsageMatchesLeaseDurationsExactly(t *testing.T) {
	t.Parallel()
	pool := dbtest.Pool(t)
	tenant := capacitytest.RootTenant(t, pool)
	sel := map[string]string{"gpu": "h100"}
	capacitytest.Nodes(t, pool, tenant, 1, capacitytest.NodeSpec{GPUs: 4, Model: "H100", CPUs: 32, MemoryBytes: 64 << 30, Labels: sel})
	pid := capacitytest.Pool(t, pool, tenant, "h100", sel)
	gpuLease := capacitytest.Leases(t, pool, tenant, pid, 1, capacitytest.LeaseSpec{GPUs: 2, Model: "H100", Duration: 90 * time.Minute})[0]
	cpuLease := capacitytest.Leases(t, pool, tenant, pid, 1, capacitytest.LeaseSpec{CPUs: 4, MemoryBytes: 1 << 30, Duration: 150*time.Minute + 2*time.Millisecond})[0]
	early := capacitytest.Leases(t, pool, tenant, pid, 1, capacitytest.LeaseSpec{GPUs: 1, Model: "H100", Duration: 10 * time.Hour})[0]

	now := time.Date(2031, 3, 4, 10, 20, 0, 123456000, time.UTC)
	clock := func() time.Time { return now }
	p := placer.New(pool, placer.Options{Now: clock})
	if res, err := p.ReconcilePool(ctx, pid.String()); err != nil || res.Placed != 3 {
		t.Fatalf("place: %+v, %v", res, err)
	}
	// While they run, hourly metering records the hour that ended.
	now = now.Add(50 * time.Minute) // 11:10
	st, err := metering.RunOnce(ctx, pool, metering.Options{Now: clock})
	if err != nil {
		t.Fatal(err)
	}
	if st.Metered != 4 { // 2 + 1 GPUs and one CPU/memory allocation
		t.Fatalf("metered %d allocations, want 4", st.Metered)
	}
	// One lease is released early, at 11:31.
	now = now.Add(21 * time.Minute)
	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if rows, err := capacity.EndLeases(ctx, db.New(tx), []uuid.UUID{early}, capacity.LeaseReleased, "", &now, new(event.Batch).Add); err != nil || len(rows) != 1 {
		t.Fatalf("release: %v, %v", rows, err)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	// The others expire; the placer ends them at their end, whenever it runs.
	now = now.Add(3 * time.Hour)
	if res, err := p.ReconcilePool(ctx, pid.String()); err != nil || res.Expired != 2 {
		t.Fatalf("expire: %+v, %v", res, err)
	}
	for id, d := range map[uuid.UUID]time.Duration{gpuLease: 90 * time.Minute, cpuLease: 150*time.Minute + 2*time.Millisecond, early: 71 * time.Minute} {
		var ran time.Duration
		if err := pool.QueryRow(ctx, `SELECT ended_at - placed_at FROM pool_leases WHERE id = $1`, id).Scan(&ran); err != nil || ran != d {
			t.Fatalf("lease %s ran %v (%v), want %v", id, ran, err, d)
		}
	}
	for range 2 { // a second run finds nothing more to count
		if _, err := metering.RunOnce(ctx, pool, metering.Options{Now: clock}); err != nil {
			t.Fatal(err)
		}
	}

	// Totals by resource against the leases' own placed/ended times, exactly (numeric).
	var mismatches int
	if err := pool.QueryRow(ctx, `
		WITH want AS (
		    SELECT 'gpu' AS resource, sum(gpus * EXTRACT(EPOCH FROM ended_at - placed_at)) AS amount FROM pool_leases WHERE gpus > 0
		    UNION ALL SELECT 'cpu', sum(cpus * EXTRACT(EPOCH FROM ended_at - placed_at)) FROM pool_leases WHERE cpus > 0
		    UNION ALL SELECT 'memory', sum((memory_bytes / 1048576) * EXTRACT(EPOCH FROM ended_at - placed_at)) FROM pool_leases WHERE memory_bytes > 0
		), got AS (SELECT resource, sum(amount) AS amount FROM usage_hourly GROUP BY resource)
		SELECT count(*) FROM want FULL JOIN got USING (resource) WHERE want.amount IS DISTINCT FROM got.amount`).Scan(&mismatches); err != nil {
		t.Fatal(err)
	}
	if mismatches != 0 {
		t.Fatalf("%d resources whose usage differs from the leases' durations", mismatches)
	}
	// And in plain numbers: 2 GPUs x 90 minutes + 1 GPU x 71 minutes.
	rows, err := db.New(pool).QueryUsageTotals(ctx, db.QueryUsageTotalsParams{
		TenantID: tenant, StartsAt: time.Date(2031, 3, 4, 0, 0, 0, 0, time.UTC), EndsAt: time.Date(2031, 3, 5, 0, 0, 0, 0, time.UTC), Lim: 100,
	})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]float64{"gpu": 2*5400 + 71*60, "cpu": 4 * 9000.002, "memory": 1024 * 9000.002}
	for _, r := range rows {
		if r.Amount != want[r.Resource] {
			t.Errorf("%s: %v, want %v", r.Resource, r.Amount, want[r.Resource])
		}
		delete(want, r.Resource)
	}
	if len(want) > 0 {
		t.Errorf("missing totals %v", want)
	}
	// Hour by hour, the GPU lease: 10:20-11:00 and 11:00-11:50.
	hours, err := db.New(pool).QueryUsageHourly(ctx, db.QueryUsageHourlyParams{
		TenantID: tenant, StartsAt: time.Date(2031, 3, 4, 0, 0, 0, 0, time.UTC), EndsAt: time.Date(2031, 3, 5, 0, 0, 0, 0, time.UTC), Lim: 100,
	})
	if err != nil {
		t.Fatal(err)
	}
	gpuByHour := map[int]float64{}
	for _, h := range hours {
		if h.Resource == "gpu" {
			gpuByHour[h.Hour.UTC().Hour()] = h.Amount
		}
	}
	// 10h: 2 x 2399.876544 s + 1 x 2399.876544 s; 11h: 2 x 3000.123456 s + 1 x 1860.123456 s.
	if gpuByHour[10] != 3*2399.876544 || gpuByHour[11] != 2*3000.123456+1860.123456 || len(gpuByHour) != 2 {
		t.Errorf("GPU-seconds by hour %v", gpuByHour)
	}
	if n, lag, err := capacity.UsageBacklog(ctx, pool); err != nil || n != 0 || lag != 0 {
		t.Errorf("backlog %d, %v, %v; want none", n, lag, err)
	}
}
