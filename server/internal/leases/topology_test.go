package leases_test

import (
	"testing"

	leasesv1 "github.com/better-compute/better-compute/gen/go/bettercompute/leases/v1"
	"github.com/better-compute/better-compute/server/servertest"
)

// TestTopologyRoundTrip: the mode a lease is created with comes back from create, get and list
// (unspecified as preferred), and each allocation carries the tier the placer recorded.
func TestTopologyRoundTrip(t *testing.T) {
	t.Parallel()
	env := servertest.New(t)
	poolID := fleet(t, env, 1, 8)
	c := leases(env)
	req, err := c.Create(ctx, &leasesv1.CreateRequest{PoolId: poolID, Gpus: 2, Duration: hour(), Topology: leasesv1.TopologyMode_TOPOLOGY_MODE_REQUIRED})
	if err != nil {
		t.Fatal(err)
	}
	def, err := c.Create(ctx, &leasesv1.CreateRequest{PoolId: poolID, Gpus: 1, Duration: hour()})
	if err != nil {
		t.Fatal(err)
	}
	if got := req.GetLease().GetTopology(); got != leasesv1.TopologyMode_TOPOLOGY_MODE_REQUIRED {
		t.Fatalf("create: topology %v", got)
	}
	if got := def.GetLease().GetTopology(); got != leasesv1.TopologyMode_TOPOLOGY_MODE_PREFERRED {
		t.Fatalf("create without topology: %v", got)
	}
	// Placed as the placer would have: two GPUs joined by NVLink.
	id := req.GetLease().GetId()
	if _, err := env.Pool.Exec(ctx, `
		WITH l AS (UPDATE pool_leases SET state = 'placed', placed_at = now(), ends_at = now() + interval '1 hour' WHERE id = $1 RETURNING id)
		INSERT INTO allocations (lease_id, node_id, device_id, model, topology, started_at, metered_until)
		SELECT l.id, d.node_id, d.id, d.model, 'nvlink', now(), now()
		FROM l, (SELECT * FROM devices ORDER BY idx LIMIT 2) d`, id); err != nil {
		t.Fatal(err)
	}
	got, err := c.Get(ctx, &leasesv1.GetRequest{Id: id})
	if err != nil {
		t.Fatal(err)
	}
	if got.GetLease().GetTopology() != leasesv1.TopologyMode_TOPOLOGY_MODE_REQUIRED || len(got.GetLease().GetAllocations()) != 2 {
		t.Fatalf("get: %v", got.GetLease())
	}
	for _, a := range got.GetLease().GetAllocations() {
		if a.GetTopology() != "nvlink" {
			t.Fatalf("allocation topology %q, want nvlink", a.GetTopology())
		}
	}
	list, err := c.List(ctx, &leasesv1.ListRequest{})
	if err != nil {
		t.Fatal(err)
	}
	modes := map[string]leasesv1.TopologyMode{}
	for _, l := range list.GetLeases() {
		modes[l.GetId()] = l.GetTopology()
	}
	if modes[id] != leasesv1.TopologyMode_TOPOLOGY_MODE_REQUIRED || modes[def.GetLease().GetId()] != leasesv1.TopologyMode_TOPOLOGY_MODE_PREFERRED {
		t.Fatalf("list: %v", modes)
	}
	var stored string
	if err := env.Pool.QueryRow(ctx, `SELECT topology FROM pool_leases WHERE id = $1`, id).Scan(&stored); err != nil {
		t.Fatal(err)
	}
	if stored != "required" {
		t.Fatalf("stored %q", stored)
	}
}
