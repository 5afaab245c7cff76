package placement

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/google/uuid"
)

// randomShape is a random 8-GPU topology: random NVLink pairs, PCIe switches of two or four,
// and a random split into two NUMA nodes (or none known).
func randomShape(r *rand.Rand) *Node {
	var paths [8][8]string
	sw := 2 << r.IntN(2)
	for i := range 8 {
		for j := i + 1; j < 8; j++ {
			p := "SYS"
			switch {
			case r.IntN(3) == 0:
				p = fmt.Sprintf("NV%d", 1+r.IntN(18))
			case i/sw == j/sw:
				p = "PIX"
			}
			paths[i][j], paths[j][i] = p, p
		}
	}
	var numa func(i int) *int32
	if r.IntN(4) > 0 {
		split := 1 + r.IntN(7)
		numa = numaOf(func(i int) int32 { return int32(min(i/split, 1)) })
	}
	return box(8, func(i, j int) string { return paths[i][j] }, numa)
}

// randomFleet is blocks of racks of random nodes, a few without labels.
func randomFleet(r *rand.Rand) []*Node {
	var nodes []*Node
	for b := range 1 + r.IntN(3) {
		for k := range 1 + r.IntN(3) {
			for range 1 + r.IntN(5) {
				n := randomShape(r)
				n.Name = fmt.Sprintf("n%03d", r.IntN(1000))
				if r.IntN(10) > 0 {
					n.Domain = []string{fmt.Sprintf("b%d", b), fmt.Sprintf("r%d", k)}
				}
				nodes = append(nodes, n)
			}
		}
	}
	return nodes
}

// randomRunning holds random devices of each node by running leases of random tenants,
// priorities and ends.
func randomRunning(r *rand.Rand, nodes []*Node, tenants []uuid.UUID) []*Running {
	var rs []*Running
	for _, n := range nodes {
		for len(rs) < 1000 && r.IntN(3) > 0 {
			var idx []int
			for i := range n.Devices {
				if !n.Devices[i].Held && r.IntN(3) == 0 {
					idx = append(idx, i)
				}
			}
			if len(idx) == 0 {
				break
			}
			ru := running(tenants[r.IntN(len(tenants))], int64(len(rs)), t0.Add(time.Duration(1+r.IntN(300))*time.Minute), n, idx...)
			ru.Priority = int32(r.IntN(3))
			rs = append(rs, ru)
		}
	}
	return rs
}

func randomLeases(r *rand.Rand, tenants []uuid.UUID) []*Lease {
	var out []*Lease
	for i := range 2 + r.IntN(16) {
		var l *Lease
		if r.IntN(2) == 0 {
			per := []int32{1, 2, 4, 8}[r.IntN(4)]
			l = gang(1+int32(r.IntN(4)), per, r.IntN(3)-1, r.IntN(2) == 0)
		} else {
			l = lease([]int32{1, 2, 4, 8}[r.IntN(4)], false)
		}
		l.TopologyRequired = r.IntN(5) == 0
		l.Spread = r.IntN(4) == 0
		l.Tenant = tenants[r.IntN(len(tenants))]
		l.Priority = int32(r.IntN(3))
		l.Seq = int64(i)
		l.Duration = time.Duration(10+r.IntN(300)) * time.Minute
		l.Since = t0.Add(-time.Duration(r.IntN(120)) * time.Minute)
		out = append(out, l)
	}
	return out
}

func TestGangProperties(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(7, 11))
	var gangs, reservations, preemptions int
	for round := range 200 {
		nodes := randomFleet(r)
		owner, grantee := uuid.New(), uuid.New()
		tenants := []uuid.UUID{owner, grantee}
		for _, n := range nodes {
			for i := range n.Devices {
				n.Devices[i].Held = r.IntN(5) == 0
			}
		}
		shared := r.IntN(2) == 0
		var rs []*Running
		if shared {
			rs = randomRunning(r, nodes, tenants)
		}
		type dev struct {
			node uuid.UUID
			id   int64
		}
		held := map[dev]bool{}
		byID := map[uuid.UUID]*Node{}
		for _, n := range nodes {
			byID[n.ID] = n
			for _, d := range n.Devices {
				if d.Held {
					held[dev{n.ID, d.ID}] = true
				}
			}
		}
		p := NewPlanner(t0, nodes, nil)
		p.SetTopology(Topology{Levels: blockRack.Levels, ReserveAfter: time.Duration(r.IntN(90)) * time.Minute})
		noGrace := r.IntN(2) == 0
		if shared {
			p.Share(Sharing{Owner: owner, Grants: []*Account{{Tenant: grantee, Nominal: Amounts{gpuKey("H100"): int64(r.IntN(40))}}}, Running: rs, NoGrace: noGrace, PriorityPreemption: r.IntN(2) == 0})
		}
		placed, _, preempted := p.Plan(randomLeases(r, tenants))
		if noGrace {
			for _, pr := range preempted {
				for _, h := range pr.Lease.Holds {
					delete(held, dev{h.Node, h.Device})
				}
			}
		}
		reserved := p.Reserved()
		reservations += len(reserved)
		for _, pr := range preempted {
			if pr.For.Gang == nil {
				continue
			}
			preemptions++
			if noGrace && !slices.ContainsFunc(placed, func(pl Placement) bool { return pl.Lease == pr.For }) {
				t.Fatalf("round %d: preempted for a gang that still does not fit", round)
			}
		}
		for _, pl := range placed {
			for _, h := range pl.Holds {
				if held[dev{h.Node, h.Device}] {
					t.Fatalf("round %d: device %d of %v held twice", round, h.Device, h.Node)
				}
				held[dev{h.Node, h.Device}] = true
				for _, w := range byID[h.Node].Reservations {
					if _, gangs := reserved[w.ID]; gangs && w.ID != pl.Lease.ID && t0.Add(pl.Lease.Duration).After(w.Start) {
						t.Fatalf("round %d: a lease ending at %v backfilled a node reserved from %v", round, t0.Add(pl.Lease.Duration), w.Start)
					}
				}
			}
			if g := pl.Lease.Gang; g != nil {
				gangs++
				checkGang(t, round, byID, pl)
			}
		}
	}
	t.Logf("%d gangs placed, %d reserved for, %d preemptions for gangs", gangs, reservations, preemptions)
	if gangs == 0 || reservations == 0 || preemptions == 0 {
		t.Fatal("the random fleets no longer exercise gangs, reservations and preemptions")
	}
}

// checkGang fails the test unless a gang placement holds GPUsPerNode devices on each of Nodes
// distinct nodes, ranked 0..Nodes-1, all in one domain at its level when required.
func checkGang(t *testing.T, round int, byID map[uuid.UUID]*Node, pl Placement) {
	t.Helper()
	g := pl.Lease.Gang
	per := map[uuid.UUID]int32{}
	rank := map[uuid.UUID]int32{}
	for _, h := range pl.Holds {
		per[h.Node]++
		if r, ok := rank[h.Node]; ok && r != h.Rank {
			t.Fatalf("round %d: ranks %d and %d on one node", round, r, h.Rank)
		}
		rank[h.Node] = h.Rank
	}
	if len(per) != int(g.Nodes) {
		t.Fatalf("round %d: a gang of %d nodes on %d", round, g.Nodes, len(per))
	}
	var ranks []int32
	var domain []string
	for id, c := range per {
		if c != g.GPUsPerNode {
			t.Fatalf("round %d: a member with %d GPUs, want %d", round, c, g.GPUsPerNode)
		}
		ranks = append(ranks, rank[id])
		if g.LevelRequired && g.Level >= 0 {
			d := byID[id].Domain
			if len(d) <= g.Level || slices.Contains(d[:g.Level+1], "") {
				t.Fatalf("round %d: a required gang on a node without its level's label", round)
			}
			if domain == nil {
				domain = d[:g.Level+1]
			} else if !slices.Equal(domain, d[:g.Level+1]) {
				t.Fatalf("round %d: a required gang across domains %v and %v", round, domain, d)
			}
		}
	}
	slices.Sort(ranks)
	for i, r := range ranks {
		if r != int32(i) {
			t.Fatalf("round %d: ranks %v", round, ranks)
		}
	}
}
