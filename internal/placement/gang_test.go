package placement

import (
	"slices"
	"strings"
	"testing"

	"github.com/google/uuid"
)

// rackNode is a DGX-like node (eight GPUs joined by NVLink, two NUMA nodes of four) named name,
// in domain (block, rack).
func rackNode(name string, domain ...string) *Node {
	n := box(8, dgx, numaOf(func(i int) int32 { return int32(i / 4) }))
	n.Name, n.Domain = name, domain
	return n
}

var blockRack = Topology{Levels: []string{"block", "rack"}}

const rackLevel = 1

func gang(nodes, per int32, level int, required bool) *Lease {
	l := lease(nodes*per, false)
	l.Gang = &Gang{Nodes: nodes, GPUsPerNode: per, Level: level, LevelRequired: required}
	return l
}

// planWith plans leases on a fresh planner over nodes with the block/rack topology.
func planWith(nodes []*Node, leases ...*Lease) ([]Placement, []Failure) {
	p := NewPlanner(t0, nodes, nil)
	p.SetTopology(blockRack)
	placed, failed, _ := p.Plan(leases)
	return placed, failed
}

// memberNames are the names of a gang placement's nodes in rank order; it fails the test unless
// every member holds GPUsPerNode devices under one rank.
func memberNames(t *testing.T, nodes []*Node, pl Placement) []string {
	t.Helper()
	g := pl.Lease.Gang
	names := make([]string, g.Nodes)
	count := map[uuid.UUID]int32{}
	for _, h := range pl.Holds {
		if h.Rank < 0 || h.Rank >= g.Nodes {
			t.Fatalf("rank %d out of range", h.Rank)
		}
		for _, n := range nodes {
			if n.ID == h.Node {
				if names[h.Rank] != "" && names[h.Rank] != n.Name {
					t.Fatalf("rank %d on %s and %s", h.Rank, names[h.Rank], n.Name)
				}
				names[h.Rank] = n.Name
			}
		}
		count[h.Node]++
	}
	if len(count) != int(g.Nodes) {
		t.Fatalf("gang on %d nodes, want %d", len(count), g.Nodes)
	}
	for _, c := range count {
		if c != g.GPUsPerNode {
			t.Fatalf("a member holds %d GPUs, want %d", c, g.GPUsPerNode)
		}
	}
	return names
}

func only(t *testing.T, placed []Placement, failed []Failure, want int) {
	t.Helper()
	if len(failed) > 0 {
		t.Fatalf("failed: %s", failed[0].Reason)
	}
	if len(placed) != want {
		t.Fatalf("placed %d leases, want %d", len(placed), want)
	}
}

func TestGangPlacedInTheRackThatPacksIt(t *testing.T) {
	t.Parallel()
	nodes := []*Node{
		rackNode("a1", "b1", "r1"), rackNode("a2", "b1", "r1"), rackNode("a3", "b1", "r1"),
		rackNode("c2", "b1", "r2"), rackNode("c1", "b1", "r2"),
		rackNode("d1", "b2", "r3"),
	}
	placed, failed := planWith(nodes, gang(2, 8, rackLevel, false))
	only(t, placed, failed, 1)
	if got := memberNames(t, nodes, placed[0]); !slices.Equal(got, []string{"c1", "c2"}) || placed[0].Domain != "block=b1,rack=r2" {
		t.Fatalf("members %v in %q, want c1, c2 in rack r2", got, placed[0].Domain)
	}
	placed, failed = planWith(nodes, gang(3, 4, rackLevel, true))
	only(t, placed, failed, 1)
	if got := memberNames(t, nodes, placed[0]); !slices.Equal(got, []string{"a1", "a2", "a3"}) || placed[0].Domain != "block=b1,rack=r1" {
		t.Fatalf("members %v in %q, want a1-a3 in rack r1", got, placed[0].Domain)
	}
}

func TestGangRequiredWaitsPreferredFallsBack(t *testing.T) {
	t.Parallel()
	fleet := func() []*Node {
		return []*Node{
			rackNode("a1", "b1", "r1"), rackNode("a2", "b1", "r1"), hold(rackNode("a3", "b1", "r1"), 0),
			rackNode("c1", "b1", "r2"), rackNode("c2", "b1", "r2"),
			rackNode("d1", "b2", "r3"),
		}
	}
	placed, failed := planWith(fleet(), gang(3, 8, rackLevel, true))
	only(t, placed, failed, 0)

	nodes := fleet()
	placed, failed = planWith(nodes, gang(3, 8, rackLevel, false))
	only(t, placed, failed, 1)
	if got := memberNames(t, nodes, placed[0]); !slices.Equal(got, []string{"a1", "a2", "c1"}) || placed[0].Domain != "block=b1" {
		t.Fatalf("members %v in %q, want a1, a2, c1 in block b1", got, placed[0].Domain)
	}

	nodes = fleet()
	placed, failed = planWith(nodes, gang(5, 8, rackLevel, false))
	only(t, placed, failed, 1)
	if got := memberNames(t, nodes, placed[0]); !slices.Equal(got, []string{"a1", "a2", "c1", "c2", "d1"}) || placed[0].Domain != "" {
		t.Fatalf("members %v in %q, want the whole pool", got, placed[0].Domain)
	}
}

func TestGangAllOrNothing(t *testing.T) {
	t.Parallel()
	nodes := []*Node{
		rackNode("a1", "b1", "r1"), rackNode("a2", "b1", "r1"), rackNode("a3", "b1", "r1"),
		hold(rackNode("a4", "b1", "r1"), 0, 1, 2, 3, 4, 5, 6, 7),
	}
	g, small := gang(4, 8, -1, false), lease(2, false)
	placed, failed := planWith(nodes, g, small)
	only(t, placed, failed, 1)
	if placed[0].Lease != small {
		t.Fatal("the gang was placed on three nodes of four")
	}
	held := 0
	for _, n := range nodes {
		for _, d := range n.Devices {
			if d.Held {
				held++
			}
		}
	}
	if held != 8+2 {
		t.Fatalf("%d devices held, want the 8 held before and the small lease's 2", held)
	}
}

func TestGangRanksByDomainThenName(t *testing.T) {
	t.Parallel()
	nodes := []*Node{
		rackNode("n3", "b1", "r2"), rackNode("n1", "b1", "r2"), rackNode("n2", "b1", "r1"), rackNode("n9"),
	}
	placed, failed := planWith(nodes, gang(4, 1, -1, false))
	only(t, placed, failed, 1)
	if got := memberNames(t, nodes, placed[0]); !slices.Equal(got, []string{"n9", "n2", "n1", "n3"}) {
		t.Fatalf("ranks %v, want the unlabelled node, then r1's, then r2's by name", got)
	}
	if placed[0].Domain != "" {
		t.Fatalf("domain %q, want none", placed[0].Domain)
	}
}

func TestGangMembersGetBestConnectedSets(t *testing.T) {
	t.Parallel()
	islands := func(i, j int) string {
		if i/4 == j/4 {
			return "NV4"
		}
		return "PIX"
	}
	path := func(i, j int) string {
		switch {
		case i/2 == j/2:
			return "PIX"
		case i/4 == j/4:
			return "NODE"
		}
		return "SYS"
	}
	a := hold(box(8, islands, nil), 0, 1, 2, 4)                                               // free 3 | 5 6 7: an NVLink pair in 5-7
	b := hold(box(8, path, numaOf(func(i int) int32 { return int32(i / 4) })), 0, 1, 2, 5, 7) // free 3 | 4 6: a NUMA pair
	a.Name, b.Name = "a", "b"
	for _, required := range []bool{false, true} {
		nodes := []*Node{cloneNode(a), cloneNode(b)}
		l := gang(2, 2, -1, false)
		l.TopologyRequired = required
		placed, failed := planWith(nodes, l)
		if required {
			// b has no free NVLink or switch pair: the gang waits.
			only(t, placed, failed, 0)
			continue
		}
		only(t, placed, failed, 1)
		want := map[string]Tier{"a": TierNVLink, "b": TierNUMA}
		wantIdx := map[string][]int32{"a": {5, 6}, "b": {4, 6}}
		got := map[string][]int32{}
		for _, h := range placed[0].Holds {
			for _, n := range nodes {
				if n.ID != h.Node {
					continue
				}
				if h.Topology != want[n.Name] {
					t.Fatalf("%s: tier %q, want %q", n.Name, h.Topology, want[n.Name])
				}
				for _, d := range n.Devices {
					if d.ID == h.Device {
						got[n.Name] = append(got[n.Name], d.Index)
					}
				}
			}
		}
		for name, idx := range got {
			slices.Sort(idx)
			if !slices.Equal(idx, wantIdx[name]) {
				t.Fatalf("%s: got %v, want %v", name, idx, wantIdx[name])
			}
		}
	}
}

// cloneNode copies a node's devices so that a plan leaves the original as it was.
func cloneNode(n *Node) *Node {
	c := *n
	c.Devices = slices.Clone(n.Devices)
	c.Reservations = slices.Clone(n.Reservations)
	return &c
}

func TestGangNever(t *testing.T) {
	t.Parallel()
	nodes := func() []*Node {
		return []*Node{
			rackNode("a1", "b1", "r1"), rackNode("a2", "b1", "r1"),
			rackNode("c1", "b1", "r2"), hold(rackNode("c2", "b1", "r2"), 0, 1, 2, 3, 4, 5, 6, 7),
		}
	}
	mismatch := gang(2, 4, -1, false)
	mismatch.GPUs = 7
	for _, tc := range []struct {
		l    *Lease
		want string
	}{
		{gang(5, 8, -1, false), "the pool has 4"},
		{gang(3, 8, rackLevel, true), "no rack of the pool"},
		{gang(2, 8, 2, true), "topology level 2"},
		{mismatch, "not 7"},
	} {
		_, failed := planWith(nodes(), tc.l)
		if len(failed) != 1 || !strings.Contains(failed[0].Reason, tc.want) {
			t.Fatalf("failed %v, want a reason with %q", failed, tc.want)
		}
	}
	// c2 is full but may free up: a gang that needs it waits rather than fails.
	placed, failed := planWith(nodes(), gang(2, 8, rackLevel, true), gang(4, 8, -1, false))
	only(t, placed, failed, 1)
}
