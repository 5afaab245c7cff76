package placement

import (
	"bytes"
	"cmp"
	"fmt"
	"slices"
	"time"

	"github.com/better-compute/better-compute/internal/capacity"
)

// Gangs. A gang lease (Lease.Gang) runs on Gang.Nodes distinct nodes, Gang.GPUsPerNode GPUs of
// its model on each, and is placed whole or not at all. Its members should (or, when
// LevelRequired, must) share one domain of the pool's topology at Gang.Level: the domain that
// packs it best is chosen, and a gang that only prefers its level falls back to the levels
// outside it, then to the whole pool. Within the domain the members are the nodes that pack it
// best (spread: most free), and each member's GPUs are its best-connected free set.

// gangNever says why a gang can never fit the pool's members, schedulable or not, or "".
func (p *Planner) gangNever(l *Lease) string {
	g := l.Gang
	if g.Nodes <= 0 || g.GPUsPerNode <= 0 {
		return "a gang needs at least one node and one GPU on each"
	}
	if int64(l.GPUs) != int64(g.Nodes)*int64(g.GPUsPerNode) {
		return fmt.Sprintf("a gang of %d nodes of %d GPUs holds %d GPUs, not %d", g.Nodes, g.GPUsPerNode, int64(g.Nodes)*int64(g.GPUsPerNode), l.GPUs)
	}
	if p.growth != nil {
		if _, ok := capacity.GrowthFits(*p.growth, l.Model, g.GPUsPerNode, 0, 0); ok {
			return "" // new machines can be its members
		}
	}
	if p.total[l.Model] == 0 {
		return fmt.Sprintf("the pool has no %q GPUs", l.Model)
	}
	per := g.GPUsPerNode
	required := g.LevelRequired && g.Level >= 0
	if required && g.Level >= len(p.topo.Levels) {
		return fmt.Sprintf("the gang must share a domain at topology level %d, but the pool has %d levels", g.Level, len(p.topo.Levels))
	}
	var members int32
	var inDomain []int32
	if required {
		inDomain = make([]int32, len(p.domains[g.Level]))
	}
	for _, s := range p.nodes {
		if s.total[l.Model] < per {
			continue
		}
		members++
		if required && s.dom[g.Level] >= 0 {
			inDomain[s.dom[g.Level]]++
		}
	}
	if members < g.Nodes {
		return fmt.Sprintf("the gang needs %d nodes with %d %q GPUs each, and the pool has %d", g.Nodes, per, l.Model, members)
	}
	if required && slices.Max(append(inDomain, 0)) < g.Nodes {
		return fmt.Sprintf("the gang needs %d nodes with %d %q GPUs each in one %s, and no %s of the pool has that many", g.Nodes, per, l.Model, p.topo.Levels[g.Level], p.topo.Levels[g.Level])
	}
	return ""
}

// usable reports whether the gang may run on the node at all (until end), whatever is free there.
func (p *Planner) usable(s *nstate, l *Lease, end time.Time) bool {
	return s.node.Schedulable && s.total[l.Model] >= l.Gang.GPUsPerNode && (s.plain || p.eligible(s, l, end))
}

// placeGang places a gang on the members pickGang chooses among the nodes that can give a member
// its GPUs now, or returns nil and takes nothing.
func (p *Planner) placeGang(l *Lease, end time.Time) []Held {
	per := int(l.Gang.GPUsPerNode)
	var cands []*nstate
	for _, s := range p.nodes {
		if len(s.free[l.Model]) < per || !p.usable(s, l, end) {
			continue
		}
		if l.TopologyRequired && per > 1 {
			must, ok := s.topology().need(l)
			if !ok {
				continue
			}
			if picks, _ := s.topology().choose(s.free[l.Model], per, must); picks == nil {
				continue
			}
		}
		cands = append(cands, s)
	}
	members := p.pickGang(l, cands, func(s *nstate) int { return len(s.free[l.Model]) })
	if members == nil {
		return nil
	}
	holds := make([]Held, 0, len(members)*per)
	for rank, s := range members {
		must, _ := s.topology().need(l)
		from := len(holds)
		holds = p.takeGPUs(s, l.Model, per, must, holds)
		for i := from; i < len(holds); i++ {
			holds[i].Rank = int32(rank)
		}
	}
	return holds
}

// pickGang chooses a gang's members among cands, given what each will have free (avail): the
// domain at the gang's level that fits and packs it best (fewest nodes that fit, then fewest
// free GPUs, then the domain's name), falling back outward and then to the whole pool unless the
// level is required; within it the best-fit nodes (spread: most free), then by name. It returns
// them in rank order, or nil when the gang does not fit.
func (p *Planner) pickGang(l *Lease, cands []*nstate, avail func(*nstate) int) []*nstate {
	g := l.Gang
	per, want := int(g.GPUsPerNode), int(g.Nodes)
	fit := make([]*nstate, 0, len(cands))
	for _, s := range cands {
		if avail(s) >= per {
			fit = append(fit, s)
		}
	}
	if len(fit) < want {
		return nil
	}
	if g.Level >= 0 && g.Level < len(p.topo.Levels) {
		for k := g.Level; k >= 0; k-- {
			if members := p.pickInDomain(l, fit, k, avail); members != nil {
				return members
			}
			if g.LevelRequired {
				return nil
			}
		}
	} else if g.LevelRequired && g.Level >= 0 {
		return nil
	}
	return p.bestFit(l, fit, avail)
}

// pickInDomain picks the gang's members in the best domain at level k, or nil when none fits.
func (p *Planner) pickInDomain(l *Lease, fit []*nstate, k int, avail func(*nstate) int) []*nstate {
	n := len(p.domains[k])
	count, free := make([]int, n), make([]int, n)
	for _, s := range fit {
		if d := s.dom[k]; d >= 0 {
			count[d]++
			free[d] += avail(s)
		}
	}
	best := int32(-1)
	for d := range int32(n) {
		if count[d] < int(l.Gang.Nodes) {
			continue
		}
		if best < 0 || cmp.Or(cmp.Compare(count[d], count[best]), cmp.Compare(free[d], free[best]), cmp.Compare(p.domains[k][d], p.domains[k][best])) < 0 {
			best = d
		}
	}
	if best < 0 {
		return nil
	}
	in := make([]*nstate, 0, count[best])
	for _, s := range fit {
		if s.dom[k] == best {
			in = append(in, s)
		}
	}
	return p.bestFit(l, in, avail)
}

// bestFit takes the gang's members among nodes that all fit a member, in rank order.
func (p *Planner) bestFit(l *Lease, fit []*nstate, avail func(*nstate) int) []*nstate {
	slices.SortFunc(fit, func(a, b *nstate) int {
		c := cmp.Compare(avail(a), avail(b))
		if l.Spread {
			c = -c
		}
		return cmp.Or(c, byName(a, b))
	})
	members := slices.Clone(fit[:l.Gang.Nodes])
	slices.SortFunc(members, func(a, b *nstate) int {
		return cmp.Or(slices.Compare(a.node.Domain, b.node.Domain), byName(a, b))
	})
	return members
}

func byName(a, b *nstate) int {
	return cmp.Or(cmp.Compare(a.node.Name, b.node.Name), bytes.Compare(a.node.ID[:], b.node.ID[:]))
}

// placement is what Plan reports for a lease placed on holds.
func (p *Planner) placement(l *Lease, holds []Held, borrowing bool) Placement {
	pl := Placement{Lease: l, Holds: holds, Borrowing: borrowing}
	if l.Gang != nil {
		pl.Domain = p.sharedDomain(holds)
	}
	return pl
}

// sharedDomain is the innermost domain all the nodes of holds share, or "".
func (p *Planner) sharedDomain(holds []Held) string {
	if len(holds) == 0 {
		return ""
	}
	first := p.byID[holds[0].Node]
	for k := len(p.domains) - 1; k >= 0; k-- {
		d := first.dom[k]
		if d < 0 {
			continue
		}
		if !slices.ContainsFunc(holds, func(h Held) bool { return p.byID[h.Node].dom[k] != d }) {
			return p.domains[k][d]
		}
	}
	return ""
}
