package doctor_test

import (
	"strings"
	"testing"

	"github.com/better-compute/better-compute/internal/capacity/capacitytest"
	"github.com/better-compute/better-compute/internal/dbtest"
	"github.com/better-compute/better-compute/internal/doctor"
)

// TestReportsGPUHealth: healthy GPUs are fine; an unhealthy GPU, a quarantined node and a node
// whose driver does not answer are a warning that counts each and names the node; a revoked
// node's are not counted.
func TestReportsGPUHealth(t *testing.T) {
	t.Parallel()
	pool := dbtest.Pool(t)
	root := capacitytest.RootTenant(t, pool)
	ids := capacitytest.Nodes(t, pool, root, 3, capacitytest.NodeSpec{GPUs: 2, Model: "H100"})
	exec := func(sql string, args ...any) {
		t.Helper()
		if _, err := pool.Exec(ctx, sql, args...); err != nil {
			t.Fatal(err)
		}
	}
	check := func() doctor.Finding {
		t.Helper()
		fs, err := doctor.Run(ctx, doctor.Options{Pool: pool})
		if err != nil {
			t.Fatal(err)
		}
		return find(t, fs, "GPU health")
	}
	if f := check(); f.Severity != doctor.OK {
		t.Fatalf("healthy fleet: %+v", f)
	}

	exec(`UPDATE devices SET health = 'unhealthy' WHERE node_id = $1 AND idx = 0`, ids[0])
	exec(`INSERT INTO node_gpu_health (node_id, quarantined) VALUES ($1, true)`, ids[0])
	exec(`INSERT INTO node_gpu_health (node_id, probe_error) VALUES ($1, 'nvidia-smi timed out')`, ids[1])
	// The revoked node's problems are not the fleet's.
	exec(`UPDATE devices SET health = 'unhealthy' WHERE node_id = $1`, ids[2])
	exec(`INSERT INTO node_gpu_health (node_id, quarantined, probe_error) VALUES ($1, true, 'x')`, ids[2])
	exec(`UPDATE nodes SET revoked_at = now() WHERE id = $1`, ids[2])
	var host string
	if err := pool.QueryRow(ctx, `SELECT hostname FROM nodes WHERE id = $1`, ids[1]).Scan(&host); err != nil {
		t.Fatal(err)
	}
	f := check()
	if f.Severity != doctor.Warning || f.Fix == "" ||
		!strings.Contains(f.Cause, "1 GPUs unhealthy") || !strings.Contains(f.Cause, "1 nodes quarantined") ||
		!strings.Contains(f.Cause, "does not answer on 1 nodes ("+host) {
		t.Fatalf("finding %+v", f)
	}
}

// TestReportsRemediations: no remediation is fine; a stuck step, a long wait and hardware in
// service are a warning that counts each.
func TestReportsRemediations(t *testing.T) {
	t.Parallel()
	pool := dbtest.Pool(t)
	root := capacitytest.RootTenant(t, pool)
	ids := capacitytest.Nodes(t, pool, root, 3, capacitytest.NodeSpec{GPUs: 2, Model: "H100"})
	check := func() doctor.Finding {
		t.Helper()
		fs, err := doctor.Run(ctx, doctor.Options{Pool: pool})
		if err != nil {
			t.Fatal(err)
		}
		return find(t, fs, "remediations")
	}
	if f := check(); f.Severity != doctor.OK {
		t.Fatalf("no remediation: %+v", f)
	}
	for i, row := range []string{
		`'running', now() - interval '6 hours', NULL, now() - interval '6 hours'`,
		`'waiting', NULL, NULL, now() - interval '2 hours'`,
		`'service', NULL, now(), now() - interval '1 day'`,
	} {
		if _, err := pool.Exec(ctx, `INSERT INTO remediations (id, tenant_id, node_id, reason_check, ladder, policy_version, steps,
				state, step_started_at, ended_at, created_at)
			VALUES (gen_random_uuid(), $1, $2, 'xid', 'reboot', 'v', '[]', `+row+`)`, root, ids[i]); err != nil {
			t.Fatal(err)
		}
	}
	f := check()
	if f.Severity != doctor.Warning || !strings.Contains(f.Cause, "1 remediations have had a step running") ||
		!strings.Contains(f.Cause, "1 remediations have waited") || !strings.Contains(f.Cause, "1 remediations ended in service") {
		t.Fatalf("with one stuck, one waiting and one in service: %+v", f)
	}
}
