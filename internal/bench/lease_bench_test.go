package bench_test

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/better-compute/better-compute/gen/db"
	leasesv1 "github.com/better-compute/better-compute/gen/go/bettercompute/leases/v1"
	"github.com/better-compute/better-compute/gen/go/bettercompute/leases/v1/leasesv1connect"
	"github.com/better-compute/better-compute/internal/auth"
	"github.com/better-compute/better-compute/internal/capacity/capacitytest"
	"github.com/better-compute/better-compute/internal/database"
)

// The lease benchmarks' pool: 2,000 nodes of 8 H100s of the root tenant, as leases/create's own
// BenchmarkCreate (server/internal/leases) has, with a GPU quota too large to refuse anything.
const leaseNodes = 2000

// leasePool makes the nodes, the pool and its quota in the database behind pool, then VACUUM
// ANALYZE, and returns the root tenant and the pool.
func leasePool(b *testing.B, pool *pgxpool.Pool) (tenant, poolID uuid.UUID) {
	b.Helper()
	tenant = capacitytest.RootTenant(b, pool)
	capacitytest.Nodes(b, pool, tenant, leaseNodes, capacitytest.NodeSpec{GPUs: 8, Model: "H100", CPUs: 64, MemoryBytes: 256 << 30, Labels: map[string]string{"gpu": "h100"}})
	poolID = capacitytest.Pool(b, pool, tenant, "h100", map[string]string{"gpu": "h100"})
	most := int32(1 << 30)
	if _, err := db.New(pool).UpsertPoolQuota(context.Background(), db.UpsertPoolQuotaParams{TenantID: tenant, PoolID: poolID, MaxGpus: &most}); err != nil {
		b.Fatal(err)
	}
	if _, err := pool.Exec(context.Background(), "VACUUM ANALYZE"); err != nil {
		b.Fatal(err)
	}
	return tenant, poolID
}

// benchCreateLease: leases/create of one H100 for an hour, from c callers of one tenant into
// one pool, through the API (HTTP, guard, IAM, admission with quota, audit and outbox).
func benchCreateLease(b *testing.B, c int) {
	b.Helper()
	e := newEnv(b)
	_, poolID := leasePool(b, e.pool)
	cs := make([]leasesv1connect.LeasesServiceClient, c)
	for w := range cs {
		cs[w] = leasesv1connect.NewLeasesServiceClient(e.httpClient(b, e.adminKey), e.url)
	}
	req := &leasesv1.CreateRequest{PoolId: poolID.String(), Gpus: 1, GpuModel: "H100", Duration: durationpb.New(time.Hour)}
	create := func(w int) error {
		_, err := cs[w].Create(context.Background(), req)
		return err
	}
	warm(b, c, create)
	run(b, e, c, "writes/s", func(w, _ int) error { return create(w) })
}

// httpClient is one caller's HTTP client with key, as client makes for IAM.
func (e *env) httpClient(b *testing.B, key string) *http.Client {
	b.Helper()
	tr := &http.Transport{MaxIdleConnsPerHost: 4}
	b.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: headers{key: key, next: tr}}
}

// BenchmarkPgbenchCreateLeaseSQL replays, from pgbench, the SQL that one leases/create of a GPU
// lease sends (as captured with log_statement = all): the API key lookup, then BEGIN, the pool
// lookup, the lease insert (whose triggers bump the usage counters), the usage and quota read,
// the audit row with the outbox event (RecordAdmission) and COMMIT, then, after the commit, the
// placer's poke (EnqueueReconcile), as prepared statements like pgx's. The pool's shape
// (PoolGPUModels) is not in it: the API reads it once a second, not once a call. "pipelined"
// sends the transaction as one pipeline (pgbench \startpipeline): three round trips instead of
// nine. The database holds the same pool, nodes and quota as BenchmarkAdmissionWrite's
// LeaseCreate.
func BenchmarkPgbenchCreateLeaseSQL(b *testing.B) {
	pgbenchReplay(b, "create-lease", createLeaseScript)
}

// createLeaseScript sets up the pool and an admin key in the database at u and writes the
// pgbench script.
func createLeaseScript(b *testing.B, u string, pipelined bool) ([]string, error) {
	b.Helper()
	ctx := context.Background()
	pool, err := database.Open(ctx, u)
	if err != nil {
		return nil, err
	}
	defer pool.Close()
	tenant, poolID := leasePool(b, pool)
	key, err := auth.MintAdminKey(ctx, pool, "admin")
	if err != nil {
		return nil, err
	}
	var admin string
	if err := pool.QueryRow(ctx, "SELECT principal_id::text FROM api_keys WHERE id = $1", key.ID).Scan(&admin); err != nil {
		return nil, err
	}
	start, end := pipelineMarks(pipelined)
	// The lease id derives from a random number; md5 makes a UUID of it.
	script := `\set n random(1, 1000000000000000)
SELECT k.id, k.secret_hash, k.expires_at, k.last_used_at, k.tenant_id, k.principal_id, p.kind, p.name AS principal_name, t.is_root, t.name AS tenant_name, t.suspended_at, t.deleted_at, COALESCE(array_agg(rb.role ORDER BY rb.role) FILTER (WHERE rb.role IS NOT NULL), '{}')::text[] AS roles FROM api_keys k JOIN principals p ON p.id = k.principal_id JOIN tenants t ON t.id = k.tenant_id LEFT JOIN role_bindings rb ON rb.principal_id = k.principal_id WHERE k.id = :key GROUP BY k.id, p.id, t.id;
` + start + `BEGIN;
SELECT id, tenant_id, name, description, node_selector, node_ids, created_at, updated_at, preemption_grace_ms, priority_preemption, tunnel_ports, gpu_health_policy, topology_levels, gang_reservation_wait_ms, remediation_auto, remediation_max_nodes, remediation_domain, remediation_override, idle_policy FROM pools WHERE tenant_id = :tenant AND id = :pool;
INSERT INTO pool_leases (id, tenant_id, pool_id, principal_id, reservation_id, gpus, gpu_model, cpus, memory_bytes, spread, tolerations, duration_ms, priority, topology, nodes, gpus_per_node, gang_level, gang_level_required, on_unhealthy_member, idle_opt_out) VALUES (md5('l' || :n)::uuid, :tenant, :pool, :admin, NULL, 1, 'H100', 0, 0, false, '[]', 3600000, 0, 'preferred', 0, 0, '', false, '', false) RETURNING id, seq, tenant_id, pool_id, principal_id, reservation_id, gpus, gpu_model, cpus, memory_bytes, spread, tolerations, duration_ms, state, reason, created_at, placed_at, ends_at, ended_at, updated_at, priority, borrowing, preempted_at, topology, nodes, gpus_per_node, gang_level, gang_level_required, gang_domain, on_unhealthy_member, reserved_start, idle_since, idle_opt_out, lent_since, wake_requested_at;
SELECT u.leases, u.gpus, u.cpus, u.memory_bytes, (SELECT COALESCE(sum(t.pending), 0)::bigint FROM tenant_lease_usage t WHERE t.tenant_id = :tenant) AS pending, q.max_leases, q.max_gpus, q.max_cpus, q.max_memory_bytes FROM (SELECT COALESCE(sum(p.leases), 0)::bigint AS leases, COALESCE(sum(p.gpus), 0)::bigint AS gpus, COALESCE(sum(p.cpus), 0)::bigint AS cpus, COALESCE(sum(p.memory_bytes), 0)::bigint AS memory_bytes FROM pool_lease_usage p WHERE p.tenant_id = :tenant AND p.pool_id = :pool) u LEFT JOIN pool_quotas q ON q.tenant_id = :tenant AND q.pool_id = :pool;
WITH audit AS (INSERT INTO audit_events (tenant_id, principal_id, method, target, outcome, request_id) VALUES (:tenant, :admin, 'leases/create', 'lease/' || md5('l' || :n)::uuid, 'ok', 'req-' || :n)), events AS (INSERT INTO outbox (tenant_id, type, subject, payload) SELECT unnest(ARRAY[:tenant]::uuid[]), unnest(ARRAY['lease.created']::text[]), unnest(ARRAY['lease/' || md5('l' || :n)::uuid]::text[]), unnest(ARRAY[jsonb_build_object('id', md5('l' || :n)::uuid, 'state', 'pending', 'poolId', :pool::uuid)]::jsonb[])), idempotent AS (UPDATE idempotency_keys SET response = NULL WHERE ''::text <> '' AND principal_id = :admin AND key = ''::text) SELECT 1;
COMMIT;
` + end + `INSERT INTO reconcile_queue (kind, key) SELECT 'capacity.placer', k FROM unnest(ARRAY[:pool]::text[]) AS k ON CONFLICT (kind, key) DO UPDATE SET due_at = LEAST(reconcile_queue.due_at, now()), generation = reconcile_queue.generation + 1, enqueued_at = now();
`
	file := filepath.Join(b.TempDir(), "create-lease.sql")
	if err := os.WriteFile(file, []byte(script), 0o644); err != nil {
		return nil, err
	}
	return []string{"-f", file, "-M", "prepared", "-D", "key=" + key.ID, "-D", "tenant=" + tenant.String(), "-D", "pool=" + poolID.String(), "-D", "admin=" + admin}, nil
}
