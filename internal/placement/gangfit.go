package placement

import "time"

// gangFit counts, for one gang, what its usable nodes will have free once holds counted as
// freed are, and how many nodes in each domain would then give a member its GPUs, so that
// whether the gang fits is known in O(levels) per counted hold.
type gangFit struct {
	p      *Planner
	l      *Lease
	cands  []*nstate
	avail  map[*nstate]int
	counts []int // nodes that would fit a member: in each domain at the gang's level, or in the pool
	ok     bool
}

// newGangFit counts what is free now on the nodes the gang may use until end, but those of skip.
func newGangFit(p *Planner, l *Lease, end time.Time, skip map[*nstate]bool) *gangFit {
	f := &gangFit{p: p, l: l, avail: map[*nstate]int{}}
	if f.levelScoped() {
		f.counts = make([]int, len(p.domains[l.Gang.Level]))
	} else {
		f.counts = make([]int, 1)
	}
	for _, s := range p.nodes {
		if !skip[s] && p.usable(s, l, end) {
			f.cands = append(f.cands, s)
			f.avail[s] = 0
			f.add(s, len(s.free[l.Model]))
		}
	}
	return f
}

// levelScoped reports whether the gang fits only within one domain of its level; a gang that
// prefers its level fits wherever the pool has enough members.
func (f *gangFit) levelScoped() bool {
	g := f.l.Gang
	return g.LevelRequired && g.Level >= 0 && g.Level < len(f.p.topo.Levels)
}

// add counts n more GPUs of the gang's model free on s; it reports whether s is of use to the gang.
func (f *gangFit) add(s *nstate, n int) bool {
	before, ok := f.avail[s]
	if !ok || n == 0 {
		return false
	}
	f.avail[s] = before + n
	per := int(f.l.Gang.GPUsPerNode)
	if before >= per || before+n < per {
		return true
	}
	i := 0
	if f.levelScoped() {
		i = int(s.dom[f.l.Gang.Level])
		if i < 0 {
			return true
		}
	}
	f.counts[i]++
	if f.counts[i] >= int(f.l.Gang.Nodes) {
		f.ok = true
	}
	return true
}

// addHold counts a hold that will be freed; it reports whether it is of use to the gang.
func (f *gangFit) addHold(h Held) bool {
	s := f.p.byID[h.Node]
	if s == nil || h.Device == 0 || h.Model != f.l.Model {
		return false
	}
	return f.add(s, 1)
}

// members are the nodes the gang would run on with what is counted, in rank order, or nil.
func (f *gangFit) members() []*nstate {
	if !f.ok {
		return nil
	}
	return f.p.pickGang(f.l, f.cands, func(s *nstate) int { return f.avail[s] })
}
