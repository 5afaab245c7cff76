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
