package placement

import (
	"slices"
	"testing"
	"time"

	"github.com/google/uuid"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// box is a node of n GPUs whose pair (i, j) is joined by path(i, j), on NUMA node numa(i) (nil:
// unknown).
func box(n int, path func(i, j int) string, numa func(i int) *int32) *Node {
	node := &Node{ID: uuid.New(), Schedulable: true}
	for i := range n {
		d := Device{ID: int64(i + 1), Index: int32(i), Model: "H100"}
		if numa != nil {
			d.NUMA = numa(i)
		}
		for j := range n {
			if j != i && path != nil {
				d.Links = append(d.Links, Link{Peer: int32(j), Path: path(i, j)})
			}
		}
		node.Devices = append(node.Devices, d)
	}
	return node
}

func dgx(i, j int) string { return "NV18" }

// pcie: two switches of four GPUs (0-3 and 4-7), joined through the host bridge.
func pcie(i, j int) string {
	if i/4 == j/4 {
		return "PIX"
	}
	return "PHB"
}

func numaOf(f func(i int) int32) func(i int) *int32 {
	return func(i int) *int32 { v := f(i); return &v }
}

func hold(n *Node, idx ...int) *Node {
	for _, i := range idx {
		n.Devices[i].Held = true
	}
	return n
}

func lease(gpus int32, required bool) *Lease {
	return &Lease{ID: uuid.New(), Tenant: uuid.New(), GPUs: gpus, Model: "H100", Duration: time.Hour, TopologyRequired: required}
}

// placed plans one lease and returns the indexes it got on which node, and their tier.
func placed(t *testing.T, nodes []*Node, l *Lease) (uuid.UUID, []int32, Tier) {
	t.Helper()
	p := NewPlanner(t0, nodes, nil)
	got, failed, _ := p.Plan([]*Lease{l})
	if len(failed) > 0 {
		t.Fatalf("failed: %s", failed[0].Reason)
	}
	if len(got) == 0 {
		return uuid.Nil, nil, TierUnknown
	}
	var idx []int32
	var node uuid.UUID
	tier := got[0].Holds[0].Topology
	for _, h := range got[0].Holds {
		node = h.Node
		if h.Topology != tier {
			t.Fatalf("holds of one node with tiers %q and %q", tier, h.Topology)
		}
		for _, n := range nodes {
			for _, d := range n.Devices {
				if n.ID == h.Node && d.ID == h.Device {
					idx = append(idx, d.Index)
				}
			}
		}
	}
	slices.Sort(idx)
	return node, idx, tier
}

func TestDGXAnyCountGetsNVLink(t *testing.T) {
	t.Parallel()
	for k := int32(2); k <= 8; k++ {
		_, idx, tier := placed(t, []*Node{hold(box(8, dgx, nil), 1, 4)}, lease(min(k, 6), true))
		if tier != TierNVLink || len(idx) != int(min(k, 6)) {
			t.Fatalf("k=%d: got %v, tier %q", k, idx, tier)
		}
	}
	if _, idx, tier := placed(t, []*Node{box(8, dgx, nil)}, lease(1, false)); tier != TierUnknown || !slices.Equal(idx, []int32{0}) {
		t.Fatalf("one GPU: got %v, tier %q", idx, tier)
	}
}

func TestPCIeBoxKeepsASetOnOneSwitch(t *testing.T) {
	t.Parallel()
	if _, idx, tier := placed(t, []*Node{hold(box(8, pcie, nil), 0)}, lease(4, false)); tier != TierPCIeSwitch || !slices.Equal(idx, []int32{4, 5, 6, 7}) {
		t.Fatalf("k=4: got %v, tier %q", idx, tier)
	}
	// Free: 3 (switch A), 5, 6 (switch B). Lowest indexes first would take 3 and 5 across the
	// host bridge; the pair on one switch wins.
	if _, idx, tier := placed(t, []*Node{hold(box(8, pcie, nil), 0, 1, 2, 4, 7)}, lease(2, false)); tier != TierPCIeSwitch || !slices.Equal(idx, []int32{5, 6}) {
		t.Fatalf("k=2: got %v, tier %q", idx, tier)
	}
	// No switch has three free: placed anyway, tier node.
	if _, idx, tier := placed(t, []*Node{hold(box(8, pcie, nil), 0, 1, 4, 5)}, lease(3, false)); tier != TierNode || len(idx) != 3 {
		t.Fatalf("k=3: got %v, tier %q", idx, tier)
	}
}

func TestNUMAWhenNoSwitchSetIsFree(t *testing.T) {
	t.Parallel()
	// Four switches of two GPUs, two per NUMA node.
	path := func(i, j int) string {
		switch {
		case i/2 == j/2:
			return "PIX"
		case i/4 == j/4:
			return "NODE"
		}
		return "SYS"
	}
	// Free: 3 (NUMA 0), 4 and 6 (NUMA 1, different switches). Lowest first would take 3 and 4
	// across NUMA nodes.
	n := hold(box(8, path, numaOf(func(i int) int32 { return int32(i / 4) })), 0, 1, 2, 5, 7)
	if _, idx, tier := placed(t, []*Node{n}, lease(2, false)); tier != TierNUMA || !slices.Equal(idx, []int32{4, 6}) {
		t.Fatalf("got %v, tier %q", idx, tier)
	}
}

func TestRequiredWaitsAndLandsWhereItCan(t *testing.T) {
	t.Parallel()
	// Node a packs better (fewer free) but has no free switch pair; b has one.
	a := hold(box(8, pcie, nil), 0, 1, 2, 4, 5, 6)
	b := hold(box(8, pcie, nil), 0, 1, 2)
	node, idx, tier := placed(t, []*Node{a, b}, lease(2, true))
	if node != b.ID || tier != TierPCIeSwitch || !slices.Equal(idx, []int32{4, 5}) {
		t.Fatalf("got %v on %v (a %v, b %v), tier %q", idx, node, a.ID, b.ID, tier)
	}
	// Only a: the lease waits.
	if node, idx, _ := placed(t, []*Node{hold(box(8, pcie, nil), 0, 1, 2, 4, 5, 6)}, lease(2, true)); node != uuid.Nil {
		t.Fatalf("placed on %v: %v", node, idx)
	}
	// On a node with NVLink it needs NVLink: two NVLink islands of four, one GPU free on each.
	islands := func(i, j int) string {
		if i/4 == j/4 {
			return "NV4"
		}
		return "PIX"
	}
	if node, idx, _ := placed(t, []*Node{hold(box(8, islands, nil), 0, 1, 2, 4, 5, 6)}, lease(2, true)); node != uuid.Nil {
		t.Fatalf("placed across islands: %v", idx)
	}
	// Unknown topology: a required lease of several GPUs waits, a preferred one is placed.
	if node, _, _ := placed(t, []*Node{box(8, nil, nil)}, lease(2, true)); node != uuid.Nil {
		t.Fatal("required lease placed on a node of unknown topology")
	}
	if _, idx, tier := placed(t, []*Node{box(8, nil, nil)}, lease(2, false)); tier != TierUnknown || !slices.Equal(idx, []int32{0, 1}) {
		t.Fatalf("unknown topology: got %v, tier %q", idx, tier)
	}
	// Larger than any node: fails.
	p := NewPlanner(t0, []*Node{box(8, dgx, nil)}, nil)
	if _, failed, _ := p.Plan([]*Lease{lease(9, true)}); len(failed) != 1 {
		t.Fatalf("a required lease larger than any node did not fail: %v", failed)
	}
}

func BenchmarkChoose16(b *testing.B) {
	// The worst case: 16 GPUs on one NUMA node, no switch pairs, a set of 8.
	n := box(16, func(i, j int) string { return "SYS" }, numaOf(func(i int) int32 { return int32(i % 2) }))
	free := make([]int32, 16)
	for i := range free {
		free[i] = int32(i)
	}
	topo := newTopo(n.Devices)
	for b.Loop() {
		if picks, _ := topo.choose(free, 8, 0); picks == nil {
			b.Fatal("none")
		}
	}
}
