package placement

import "strings"

// Tier is how a lease's GPUs on one node are joined, the worst pair deciding; it is recorded on
// each of the lease's allocations there (allocations.topology).
type Tier string

// Tiers, best first. TierUnknown is a single GPU, or a node whose topology is unknown.
const (
	TierNVLink     Tier = "nvlink"      // every pair joined by NVLink (one NVLink domain)
	TierNUMA       Tier = "numa"        // all on one NUMA node
	TierPCIeSwitch Tier = "pcie_switch" // every pair behind PCIe switches only (PIX or PXB)
	TierNode       Tier = "node"        // none of these
	TierUnknown    Tier = ""
)

// Link is how a GPU reaches another GPU of its node, as its daemon reported it (the JSON of
// devices.links).
type Link struct {
	// Peer is the other GPU's index.
	Peer int32 `json:"peerIndex"`
	// Path as `nvidia-smi topo -m` names it: "NV#", "PIX", "PXB", "PHB", "NODE" or "SYS".
	Path    string `json:"path"`
	NVLinks int32  `json:"nvlinks"`
}

// What joins a pair of GPUs, as bits ranked so that a set's score (the AND over its pairs)
// orders sets best first: NVLink over one NUMA node over one PCIe switch, and among sets of one
// tier, those that also share a lower bit first.
const (
	joinSwitch uint8 = 1 << iota
	joinNUMA
	joinNVLink
	joinAll = joinSwitch | joinNUMA | joinNVLink
)

func tierOf(join uint8) Tier {
	switch {
	case join&joinNVLink != 0:
		return TierNVLink
	case join&joinNUMA != 0:
		return TierNUMA
	case join&joinSwitch != 0:
		return TierPCIeSwitch
	}
	return TierNode
}

// ntopo is a node's GPU topology: what joins each pair of its devices, by position in
// node.Devices.
type ntopo struct {
	known  bool // some device reported links or a NUMA node
	nvlink bool // some pair is joined by NVLink
	join   [][]uint8
}

func newTopo(devs []Device) *ntopo {
	t := &ntopo{}
	for _, d := range devs {
		t.known = t.known || len(d.Links) > 0 || d.NUMA != nil
	}
	if !t.known {
		return t
	}
	t.join = make([][]uint8, len(devs))
	pos := make(map[int32]int, len(devs))
	for i, d := range devs {
		pos[d.Index] = i
		t.join[i] = make([]uint8, len(devs))
	}
	for i, d := range devs {
		for _, l := range d.Links {
			j, ok := pos[l.Peer]
			if !ok || j == i {
				continue
			}
			var b uint8
			switch {
			case strings.HasPrefix(l.Path, "NV") || l.NVLinks > 0:
				b = joinNVLink
				t.nvlink = true
			case l.Path == "PIX" || l.Path == "PXB":
				b = joinSwitch
			}
			// Either side's report will do: a matrix is symmetric.
			t.join[i][j] |= b
			t.join[j][i] |= b
		}
		for j, e := range devs {
			if j != i && d.NUMA != nil && e.NUMA != nil && *d.NUMA == *e.NUMA {
				t.join[i][j] |= joinNUMA
			}
		}
	}
	return t
}

// need is what a set of GPUs must share for a lease on this node: nothing when preferred (or a
// single GPU); one NVLink domain when required on a node with NVLink, one PCIe switch on one
// without. ok is false when the node cannot tell (its topology is unknown).
func (t *ntopo) need(l *Lease) (must uint8, ok bool) {
	gpus := l.GPUs
	if l.Gang != nil {
		gpus = l.Gang.GPUsPerNode // what one member takes here
	}
	if !l.TopologyRequired || gpus <= 1 {
		return 0, true
	}
	if !t.known {
		return 0, false
	}
	if t.nvlink {
		return joinNVLink, true
	}
	return joinSwitch, true
}

// choose picks n of the free devices (positions, ascending) that share must, best-connected
// first and, among sets as well joined, the lowest positions (the order placement always took
// them in). It returns their positions in free, ascending, and their tier, or nil when no set
// shares must.
//
// The search is exhaustive over the n-subsets in lexicographic order with pruning: a set's
// score only falls as devices join it, so a branch that can no longer beat the best set found,
// or lacks must, is cut, and the search stops at a set joined by everything. Nodes have at most
// 16 GPUs (C(16,8) = 12,870 sets at worst, far fewer after pruning); greedy growth from a seed
// GPU would be cheaper but can miss the one NVLink or switch set a fragmented node has left.
func (t *ntopo) choose(free []int32, n int, must uint8) ([]int, Tier) {
	if n == 0 || n > len(free) {
		return nil, TierUnknown
	}
	if !t.known || n == 1 {
		if must != 0 && n > 1 {
			return nil, TierUnknown
		}
		out := make([]int, n)
		for i := range out {
			out[i] = i
		}
		return out, TierUnknown
	}
	var (
		best     []int
		bestJoin uint8
		found    bool
		cur      = make([]int, 0, n)
	)
	var walk func(from int, join uint8) bool
	walk = func(from int, join uint8) bool {
		if len(cur) == n {
			if !found || join > bestJoin {
				best, bestJoin, found = append(best[:0], cur...), join, true
			}
			return join == joinAll
		}
		for i := from; i <= len(free)-(n-len(cur)); i++ {
			j := join
			for _, c := range cur {
				j &= t.join[free[c]][free[i]]
			}
			if j&must != must || (found && j <= bestJoin) {
				continue
			}
			cur = append(cur, i)
			done := walk(i+1, j)
			cur = cur[:len(cur)-1]
			if done {
				return true
			}
		}
		return false
	}
	walk(0, joinAll)
	if !found {
		return nil, TierUnknown
	}
	return best, tierOf(bestJoin)
}
