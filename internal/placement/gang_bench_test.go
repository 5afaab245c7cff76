package placement

import (
	"fmt"
	"math/bits"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
)

// dgxFleet is 2,000 DGX-like nodes in 50 racks of 40 under 10 blocks.
func dgxFleet() []*Node {
	nodes := make([]*Node, 0, 2000)
	for i := range 2000 {
		rack := i / 40
		nodes = append(nodes, rackNode(fmt.Sprintf("n%04d", i), fmt.Sprintf("b%02d", rack/5), fmt.Sprintf("r%02d", rack)))
	}
	return nodes
}

// gangMix is 500 gangs of 8 nodes of 8 GPUs that prefer one rack, among 10,000 leases of 1, 2
// or 4 GPUs.
func gangMix() []*Lease {
	leases := make([]*Lease, 0, 10500)
	for i := range 10500 {
		var l *Lease
		if i%21 == 0 {
			l = gang(8, 8, rackLevel, false)
		} else {
			l = lease([]int32{1, 2, 4}[i%3], false)
		}
		l.Seq = int64(i)
		leases = append(leases, l)
	}
	return leases
}

func BenchmarkGangs(b *testing.B) {
	var placed, inRack, gangs int
	var elapsed time.Duration
	for range b.N {
		b.StopTimer()
		nodes, leases := dgxFleet(), gangMix()
		p := NewPlanner(t0, nodes, nil)
		p.SetTopology(blockRack)
		b.StartTimer()
		start := time.Now()
		got, failed, _ := p.Plan(leases)
		elapsed += time.Since(start)
		if len(failed) > 0 {
			b.Fatalf("failed: %s", failed[0].Reason)
		}
		placed += len(got)
		for _, pl := range got {
			if pl.Lease.Gang != nil {
				gangs++
				if strings.Contains(pl.Domain, "rack=") {
					inRack++
				}
			}
		}
	}
	b.ReportMetric(float64(placed)/elapsed.Seconds(), "placements/s")
	b.ReportMetric(float64(gangs)/float64(b.N), "gangs-placed")
	if gangs > 0 {
		b.ReportMetric(100*float64(inRack)/float64(gangs), "gangs-in-rack-%")
	}
}

var tierRank = map[Tier]int{TierNVLink: 3, TierNUMA: 2, TierPCIeSwitch: 1, TierNode: 0, TierUnknown: 0}

// intraNodeTrial places a lease of k GPUs on a random 8-GPU node with random devices held, and
// returns the tier it got and the best tier of any k free GPUs there; ok is false when fewer
// than k are free.
func intraNodeTrial(r *rand.Rand, k int) (got, best Tier, ok bool) {
	n := randomShape(r)
	var free []int32
	for i := range n.Devices {
		n.Devices[i].Held = r.IntN(3) == 0
		if !n.Devices[i].Held {
			free = append(free, int32(i))
		}
	}
	if len(free) < k {
		return "", "", false
	}
	topo := newTopo(n.Devices)
	best = TierNode
	for set := uint(0); set < 1<<len(free); set++ {
		if bits.OnesCount(set) != k {
			continue
		}
		join := joinAll
		for a := range free {
			for c := a + 1; c < len(free); c++ {
				if set&(1<<a) != 0 && set&(1<<c) != 0 {
					join &= topo.join[free[a]][free[c]]
				}
			}
		}
		if t := tierOf(join); tierRank[t] > tierRank[best] {
			best = t
		}
	}
	p := NewPlanner(t0, []*Node{n}, nil)
	l := &Lease{ID: uuid.New(), GPUs: int32(k), Model: "H100", Duration: time.Hour}
	placed, _, _ := p.Plan([]*Lease{l})
	if len(placed) != 1 {
		return "", best, true
	}
	return placed[0].Holds[0].Topology, best, true
}

// TestIntraNodeChoiceIsTheBestTierFree: when k free GPUs of a tier exist on the node, the lease
// gets that tier or a better one.
func TestIntraNodeChoiceIsTheBestTierFree(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(3, 5))
	for trial := range 2000 {
		k := []int{2, 4}[trial%2]
		got, best, ok := intraNodeTrial(r, k)
		if ok && tierRank[got] < tierRank[best] {
			t.Fatalf("trial %d: %d GPUs got %q while a %q set was free", trial, k, got, best)
		}
	}
}

func BenchmarkIntraNodeChoice(b *testing.B) {
	r := rand.New(rand.NewPCG(3, 5))
	local, chances := 0, 0
	for i := 0; b.Loop(); i++ {
		for trial := range 1000 {
			k := []int{2, 4}[(i+trial)%2]
			got, best, ok := intraNodeTrial(r, k)
			if !ok || tierRank[best] < tierRank[TierNUMA] {
				continue
			}
			chances++
			if tierRank[got] >= tierRank[best] {
				local++
			}
		}
	}
	if chances > 0 {
		b.ReportMetric(100*float64(local)/float64(chances), "nvlink-or-numa-when-free-%")
	}
}
