package placer_test

import (
	"slices"
	"testing"

	"github.com/google/uuid"
	"google.golang.org/protobuf/encoding/protojson"

	daemonv1 "github.com/better-compute/better-compute/gen/go/bettercompute/daemon/v1"
	"github.com/better-compute/better-compute/internal/capacity"
	"github.com/better-compute/better-compute/internal/capacity/capacitytest"
	"github.com/better-compute/better-compute/internal/dbtest"
	"github.com/better-compute/better-compute/workers/internal/placer"
)

// TestAllocationsCarryTheTopologyTier: a node's inventory with NVLink between all its GPUs and a
// NUMA node each reaches the devices table, and the leases placed on it record tier nvlink on
// each of their GPU allocations (a single GPU, none).
func TestAllocationsCarryTheTopologyTier(t *testing.T) {
	t.Parallel()
	pool := dbtest.Pool(t)
	tenant := capacitytest.RootTenant(t, pool)
	sel := map[string]string{"gpu": "dgx"}
	spec := capacitytest.NodeSpec{GPUs: 8, Model: "H100", Labels: sel}
	node := capacitytest.Nodes(t, pool, tenant, 1, spec)[0]

	var raw []byte
	if err := pool.QueryRow(ctx, `SELECT inventory FROM nodes WHERE id = $1`, node).Scan(&raw); err != nil {
		t.Fatal(err)
	}
	var inv daemonv1.Inventory
	if err := protojson.Unmarshal(raw, &inv); err != nil {
		t.Fatal(err)
	}
	for _, g := range inv.GetGpus() {
		numa := g.GetIndex() / 4
		g.NumaNode = &numa
		for _, o := range inv.GetGpus() {
			if o != g {
				g.Links = append(g.Links, &daemonv1.GpuLink{PeerIndex: o.GetIndex(), PeerUuid: o.GetUuid(), Path: "NV18", Nvlinks: 18})
			}
		}
	}
	b, err := protojson.Marshal(&inv)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `UPDATE nodes SET inventory = $2 WHERE id = $1`, node, b); err != nil {
		t.Fatal(err)
	}
	var numa int32
	var link string
	if err := pool.QueryRow(ctx, `SELECT numa_node, links -> 0 ->> 'path' FROM devices WHERE node_id = $1 AND idx = 5`, node).Scan(&numa, &link); err != nil {
		t.Fatal(err)
	}
	if numa != 1 || link != "NV18" {
		t.Fatalf("device 5: NUMA node %d, first link %q", numa, link)
	}

	pid := capacitytest.Pool(t, pool, tenant, "dgx", sel)
	four := capacitytest.Leases(t, pool, tenant, pid, 1, capacitytest.LeaseSpec{GPUs: 4, Model: "H100"})[0]
	required := capacitytest.Leases(t, pool, tenant, pid, 1, capacitytest.LeaseSpec{GPUs: 3, Model: "H100"})[0]
	one := capacitytest.Leases(t, pool, tenant, pid, 1, capacitytest.LeaseSpec{GPUs: 1, Model: "H100"})[0]
	if _, err := pool.Exec(ctx, `UPDATE pool_leases SET topology = $2 WHERE id = $1`, required, capacity.TopologyRequired); err != nil {
		t.Fatal(err)
	}
	if res := place(t, placer.New(pool, placer.Options{}), pid); res.Placed != 3 {
		t.Fatalf("placed %d leases, want 3", res.Placed)
	}
	for lease, want := range map[uuid.UUID][]string{
		four: {"nvlink", "nvlink", "nvlink", "nvlink"}, required: {"nvlink", "nvlink", "nvlink"}, one: {""},
	} {
		rows, err := pool.Query(ctx, `SELECT topology FROM allocations WHERE lease_id = $1 ORDER BY id`, lease)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for rows.Next() {
			var s string
			if err := rows.Scan(&s); err != nil {
				t.Fatal(err)
			}
			got = append(got, s)
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(got, want) {
			t.Fatalf("lease %s: allocations' topology %q, want %q", lease, got, want)
		}
	}
}
