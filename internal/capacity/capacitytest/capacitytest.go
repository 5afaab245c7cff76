// Package capacitytest builds fleets, pools and leases directly in the database, for tests and
// benchmarks of the capacity placer and of the API around it; workers/internal/placer/placertest
// runs the placer over them.
package capacitytest

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/better-compute/better-compute/gen/db"
	daemonv1 "github.com/better-compute/better-compute/gen/go/bettercompute/daemon/v1"
	"github.com/better-compute/better-compute/internal/auth"
	"github.com/better-compute/better-compute/internal/capacity"
	"github.com/better-compute/better-compute/internal/fleet"
)

var ctx = context.Background()

// RootTenant returns the root tenant's id, creating it if needed.
func RootTenant(t testing.TB, pool *pgxpool.Pool) uuid.UUID {
	t.Helper()
	tn, err := auth.EnsureRootTenant(ctx, pool)
	if err != nil {
		t.Fatal(err)
	}
	return tn.ID
}

// NodeSpec describes simulated nodes.
type NodeSpec struct {
	GPUs        int
	Model       string
	CPUs        int32
	MemoryBytes int64
	Labels      map[string]string
	// State is the lifecycle state; "ready" when empty.
	State   string
	Offline bool
	Taints  []fleet.Taint
}

// Inventory is the protojson a daemon would report for spec, as the gateway stores it.
func Inventory(spec NodeSpec, host string) []byte {
	inv := &daemonv1.Inventory{Hostname: host, Cpus: spec.CPUs, MemoryBytes: spec.MemoryBytes}
	for i := range spec.GPUs {
		inv.Gpus = append(inv.Gpus, &daemonv1.Gpu{
			Index: int32(i), Model: spec.Model, MemoryBytes: 80 << 30, Uuid: fmt.Sprintf("GPU-%s-%d", host, i),
		})
	}
	b, err := protojson.Marshal(inv)
	if err != nil {
		panic(err)
	}
	return b
}

// Nodes inserts n nodes of tenant as spec says, in one statement, and returns their ids.
func Nodes(t testing.TB, pool *pgxpool.Pool, tenant uuid.UUID, n int, spec NodeSpec) []uuid.UUID {
	t.Helper()
	state := spec.State
	if state == "" {
		state = "ready"
	}
	labels, _ := json.Marshal(spec.Labels)
	if spec.Labels == nil {
		labels = []byte("{}")
	}
	taints, _ := json.Marshal(spec.Taints)
	if spec.Taints == nil {
		taints = []byte("[]")
	}
	ids := make([]uuid.UUID, n)
	hosts := make([]string, n)
	invs := make([]string, n)
	for i := range ids {
		ids[i] = uuid.Must(uuid.NewV7())
		hosts[i] = fmt.Sprintf("node-%s", ids[i].String()[24:])
		invs[i] = string(Inventory(spec, hosts[i]))
	}
	_, err := pool.Exec(ctx, `
		WITH n AS (
			INSERT INTO nodes (id, tenant_id, hostname, labels, state, online, taints, inventory)
			SELECT u.id, $2, u.host, $3::jsonb, $4, $5, $6::jsonb, u.inv::jsonb
			FROM unnest($1::uuid[], $7::text[], $8::text[]) AS u (id, host, inv)
			RETURNING id
		)
		INSERT INTO node_liveness (node_id, last_seen_at) SELECT id, now() FROM n`,
		ids, tenant, labels, state, !spec.Offline, taints, hosts, invs)
	if err != nil {
		t.Fatalf("insert nodes: %v", err)
	}
	return ids
}

// Pool creates a pool of tenant with a label selector and explicit members.
func Pool(t testing.TB, pool *pgxpool.Pool, tenant uuid.UUID, name string, selector map[string]string, nodeIDs ...uuid.UUID) uuid.UUID {
	t.Helper()
	sel, _ := json.Marshal(selector)
	if selector == nil {
		sel = []byte("{}")
	}
	if nodeIDs == nil {
		nodeIDs = []uuid.UUID{}
	}
	p, err := db.New(pool).CreatePool(ctx, db.CreatePoolParams{
		ID: uuid.Must(uuid.NewV7()), TenantID: tenant, Name: name, NodeSelector: sel, NodeIds: nodeIDs,
	})
	if err != nil {
		t.Fatalf("create pool: %v", err)
	}
	return p.ID
}

// LeaseSpec describes a pending lease.
type LeaseSpec struct {
	GPUs        int32
	Model       string
	CPUs        int32
	MemoryBytes int64
	Duration    time.Duration
	Spread      bool
	Tolerations []fleet.Toleration
	Reservation *uuid.UUID
	Priority    int32
}

// Tenant creates a child tenant of the root tenant named name, for leases from granted pools.
func Tenant(t testing.TB, pool *pgxpool.Pool, name string) uuid.UUID {
	t.Helper()
	root := RootTenant(t, pool)
	id := uuid.Must(uuid.NewV7())
	if _, err := pool.Exec(ctx, `INSERT INTO tenants (id, parent_id, name) VALUES ($1, $2, $3)`, id, root, name); err != nil {
		t.Fatalf("create tenant: %v", err)
	}
	return id
}

// Grant grants poolID (of owner) to tenant with a nominal quota and a borrowing limit, and
// returns the grant's id.
func Grant(t testing.TB, pool *pgxpool.Pool, poolID, owner, tenant uuid.UUID, nominal, borrowingLimit capacity.Resources, weight int32) uuid.UUID {
	t.Helper()
	n, err := nominal.Encode()
	if err != nil {
		t.Fatal(err)
	}
	b, err := borrowingLimit.Encode()
	if err != nil {
		t.Fatal(err)
	}
	id := uuid.Must(uuid.NewV7())
	if _, err := pool.Exec(ctx, `
		INSERT INTO pool_grants (id, pool_id, owner_tenant_id, tenant_id, nominal, borrowing_limit, weight)
		VALUES ($1, $2, $3, $4, $5, $6, $7)`, id, poolID, owner, tenant, n, b, max(weight, 1)); err != nil {
		t.Fatalf("grant: %v", err)
	}
	return id
}

// GPUs is a capacity.Resources of n GPUs of model.
func GPUs(model string, n int32) capacity.Resources {
	return capacity.Resources{GPUs: map[string]int32{model: n}}
}

// Leases inserts n pending leases of tenant in poolID, in creation order, and returns their ids.
func Leases(t testing.TB, pool *pgxpool.Pool, tenant, poolID uuid.UUID, n int, spec LeaseSpec) []uuid.UUID {
	t.Helper()
	if spec.Duration == 0 {
		spec.Duration = time.Hour
	}
	tol, _ := json.Marshal(spec.Tolerations)
	if spec.Tolerations == nil {
		tol = []byte("[]")
	}
	ids := make([]uuid.UUID, n)
	for i := range ids {
		ids[i] = uuid.Must(uuid.NewV7())
	}
	_, err := pool.Exec(ctx, `
		INSERT INTO pool_leases (id, tenant_id, pool_id, gpus, gpu_model, cpus, memory_bytes, spread, tolerations, duration_ms, reservation_id, priority)
		SELECT u.id, $2, $3, $4, $5, $6, $7, $8, $9::jsonb, $10, $11, $12
		FROM unnest($1::uuid[]) WITH ORDINALITY AS u (id, n) ORDER BY u.n`,
		ids, tenant, poolID, spec.GPUs, spec.Model, spec.CPUs, spec.MemoryBytes, spec.Spread, tol,
		spec.Duration.Milliseconds(), spec.Reservation, spec.Priority)
	if err != nil {
		t.Fatalf("insert leases: %v", err)
	}
	return ids
}

// AssertNoOvercommit fails the test if the database holds any device twice, or any node's CPUs
// or memory beyond what it has, and returns how many devices are held.
func AssertNoOvercommit(t testing.TB, pool *pgxpool.Pool) int {
	t.Helper()
	var twice, held, over int
	err := pool.QueryRow(ctx, `
		SELECT (SELECT count(*) FROM (SELECT device_id FROM allocations WHERE ended_at IS NULL AND device_id IS NOT NULL
		                              GROUP BY device_id HAVING count(*) > 1) d),
		       (SELECT count(*) FROM allocations WHERE ended_at IS NULL AND device_id IS NOT NULL),
		       (SELECT count(*) FROM (SELECT a.node_id FROM allocations a JOIN node_resources r ON r.node_id = a.node_id
		                              WHERE a.ended_at IS NULL GROUP BY a.node_id, r.cpus, r.memory_bytes
		                              HAVING sum(a.cpus) > r.cpus OR sum(a.memory_bytes) > r.memory_bytes) o)`).Scan(&twice, &held, &over)
	if err != nil {
		t.Fatal(err)
	}
	if twice > 0 || over > 0 {
		t.Fatalf("over-commit: %d devices held twice, %d nodes with more CPUs or memory held than they have", twice, over)
	}
	// Overlapping periods of one device, past ones included.
	var overlaps int
	if err := pool.QueryRow(ctx, `
		SELECT count(*) FROM allocations a JOIN allocations b ON a.device_id = b.device_id AND a.id < b.id
		WHERE tstzrange(a.started_at, a.ended_at) && tstzrange(b.started_at, b.ended_at)`).Scan(&overlaps); err != nil {
		t.Fatal(err)
	}
	if overlaps > 0 {
		t.Fatalf("over-commit: %d pairs of allocations hold one device at the same time", overlaps)
	}
	return held
}

// AssertUsageCounted fails the test unless the lease usage counters that admission reads
// (pool_lease_usage, tenant_lease_usage, kept by triggers on pool_leases) add up to what the
// leases themselves hold: the active leases of each tenant in each pool with their GPUs, CPUs
// and memory, and each tenant's pending leases.
func AssertUsageCounted(t testing.TB, pool *pgxpool.Pool) {
	t.Helper()
	var pools, tenants int
	err := pool.QueryRow(ctx, `
		WITH l AS (SELECT tenant_id, pool_id, count(*)::numeric AS leases, sum(gpus)::numeric AS gpus, sum(cpus)::numeric AS cpus,
		                  sum(memory_bytes)::numeric AS memory_bytes
		           FROM pool_leases WHERE state IN ('pending', 'placed', 'at_risk') GROUP BY 1, 2),
		     u AS (SELECT tenant_id, pool_id, sum(leases)::numeric AS leases, sum(gpus)::numeric AS gpus, sum(cpus)::numeric AS cpus,
		                  sum(memory_bytes)::numeric AS memory_bytes
		           FROM pool_lease_usage GROUP BY 1, 2
		           HAVING (sum(leases), sum(gpus), sum(cpus), sum(memory_bytes)) <> (0, 0, 0, 0))
		SELECT (SELECT count(*) FROM ((SELECT * FROM l EXCEPT SELECT * FROM u) UNION ALL (SELECT * FROM u EXCEPT SELECT * FROM l)) d),
		       (SELECT count(*) FROM (SELECT tenant_id, sum(pending) AS pending FROM tenant_lease_usage GROUP BY 1) u
		        WHERE u.pending <> (SELECT count(*) FROM pool_leases l WHERE l.tenant_id = u.tenant_id AND l.state = 'pending'))`).Scan(&pools, &tenants)
	if err != nil {
		t.Fatal(err)
	}
	if pools > 0 || tenants > 0 {
		t.Fatalf("usage counters: %d (tenant, pool) rows of pool_lease_usage and %d tenants' pending counts differ from the leases", pools, tenants)
	}
}

// States counts leases by state.
func States(t testing.TB, pool *pgxpool.Pool, ids []uuid.UUID) map[db.LeaseState]int {
	t.Helper()
	rows, err := pool.Query(ctx, `SELECT state, count(*) FROM pool_leases WHERE id = ANY($1) GROUP BY state`, ids)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	out := map[db.LeaseState]int{}
	for rows.Next() {
		var s db.LeaseState
		var n int
		if err := rows.Scan(&s, &n); err != nil {
			t.Fatal(err)
		}
		out[s] = n
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// Eventually polls cond until it holds, failing the test after within.
func Eventually(t testing.TB, within time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v", what, within)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// PlaceOn marks a pending GPU lease placed on a node, holding free GPUs of its model there, as
// the placer would: for tests of what a placed lease shows without running the placer.
func PlaceOn(t testing.TB, pool *pgxpool.Pool, lease, node uuid.UUID) {
	t.Helper()
	tag, err := pool.Exec(ctx, `
		WITH l AS (
			UPDATE pool_leases SET state = 'placed', placed_at = now(), ends_at = now() + interval '1 hour', updated_at = now()
			WHERE id = $1 AND state = 'pending'
			RETURNING id, gpus, gpu_model)
		INSERT INTO allocations (lease_id, node_id, device_id, model, started_at, metered_until)
		SELECT l.id, d.node_id, d.id, d.model, now(), now()
		FROM l CROSS JOIN LATERAL (
			SELECT d.id, d.node_id, d.model FROM devices d
			WHERE d.node_id = $2 AND d.model = l.gpu_model AND d.present
			  AND NOT EXISTS (SELECT 1 FROM allocations a WHERE a.device_id = d.id AND a.ended_at IS NULL)
			ORDER BY d.idx LIMIT l.gpus) d`, lease, node)
	if err != nil || tag.RowsAffected() == 0 {
		t.Fatalf("place lease %s: %v (%d allocations)", lease, err, tag.RowsAffected())
	}
}
