package retention_test

import (
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/better-compute/better-compute/gen/db"
	"github.com/better-compute/better-compute/internal/dbtest"
)

// TestPruneLeaseGPUMinutes: the lease GPU minutes older than retention.gpuUsage go, at most a
// batch per statement; younger ones stay.
func TestPruneLeaseGPUMinutes(t *testing.T) {
	t.Parallel()
	pool := dbtest.Pool(t)
	q := db.New(pool)
	tenant := uuid.Must(uuid.NewV7())
	if err := q.EnsureRootTenant(ctx, db.EnsureRootTenantParams{ID: tenant, Name: "root"}); err != nil {
		t.Fatal(err)
	}
	nodeID, poolID, lease := node(t, pool, tenant), uuid.New(), uuid.New()
	exec(t, pool, `INSERT INTO pools (id, tenant_id, name) VALUES ($1, $2, 'p')`, poolID, tenant)
	exec(t, pool, `INSERT INTO pool_leases (id, tenant_id, pool_id, gpus, duration_ms) VALUES ($1, $2, $3, 1, 3600000)`, lease, tenant, poolID)
	keep := 90 * 24 * time.Hour
	for _, age := range []time.Duration{keep + 3*time.Hour, keep + 2*time.Hour, keep + time.Hour, keep - time.Hour, time.Hour} {
		exec(t, pool, `INSERT INTO lease_gpu_minutes (lease_id, node_id, minute, tenant_id, pool_id, gpus, gpu_seconds, active_gpu_seconds)
			VALUES ($1, $2, date_trunc('minute', now() - $5::bigint * interval '1 millisecond'), $3, $4, 1, 60, 0)`,
			lease, nodeID, tenant, poolID, age.Milliseconds())
	}
	if n, err := q.PruneLeaseGPUMinutes(ctx, db.PruneLeaseGPUMinutesParams{KeepMs: keep.Milliseconds(), Lim: 2}); err != nil || n != 2 {
		t.Fatalf("one batch deleted %d (%v), want 2", n, err)
	}
	if n, err := q.PruneLeaseGPUMinutes(ctx, db.PruneLeaseGPUMinutesParams{KeepMs: keep.Milliseconds(), Lim: 2}); err != nil || n != 1 {
		t.Fatalf("the next batch deleted %d (%v), want 1", n, err)
	}
	var left int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM lease_gpu_minutes`).Scan(&left); err != nil || left != 2 {
		t.Fatalf("%d rows left (%v), want the 2 young ones", left, err)
	}
}
