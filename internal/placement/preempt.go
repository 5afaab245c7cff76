package placement

import (
	"slices"
	"time"
)

// reclaim finds what a pending lease that does not fit could run on once running leases free
// what they hold. It first counts what preempted leases will free anyway; if that is not enough,
// it preempts, lowest priority first, then newest: borrowing leases of other tenants when
// nominal is true (the lease is within its tenant's nominal quota), and lower-priority leases
// of the lease's own tenant where the pool allows it. It returns what it preempted, and claims
// what it counted for the lease, so that later leases of this round count it no more; the lease
// waits. When even preempting every candidate would not make it fit, nothing changes.
//
// A lease of several GPUs whose topology is required preempts nothing: what preempting frees
// need not give it the tier it requires. A gang reclaims as one unit (see reclaimGang).
func (p *Planner) reclaim(l *Lease, end time.Time, nominal bool) []Preemption {
	sh := p.share
	if l.Gang != nil {
		return p.reclaimGang(l, end, nominal)
	}
	if l.TopologyRequired && l.GPUs > 1 {
		return nil
	}
	if len(sh.incoming) == 0 && !sh.priorityOK && (!nominal || sh.borrowing == 0) {
		return nil // nothing is coming back, and nothing may be taken
	}
	f := newFreeing(p, l, end)
	for _, h := range sh.incoming {
		f.add(h)
	}
	if nodes, ok := f.fits(); ok {
		sh.claim(f, nodes)
		return nil
	}
	// Then what preempting would free.
	for sh.victims0 < len(sh.victims) && sh.victims[sh.victims0].Preempted {
		sh.victims0++
	}
	var (
		victims []*Running
		fit     []*nstate
		ok      bool
	)
	for _, r := range sh.victims[sh.victims0:] {
		if r.Preempted || !p.victimOf(l, r, nominal) {
			continue
		}
		counted := false
		for _, h := range r.Holds {
			counted = f.add(h) || counted
		}
		if !counted {
			continue
		}
		victims = append(victims, r)
		if fit, ok = f.fits(); ok {
			break
		}
	}
	if !ok {
		return nil
	}
	out := make([]Preemption, 0, len(victims))
	for _, r := range victims {
		if fit != nil && !holdsOn(r, fit) {
			continue // counted, but on a node the lease will not use
		}
		r.Preempted = true
		sh.account(r.Tenant).used.add(r.Size, -1)
		if r.borrowing {
			sh.borrowing--
		}
		if sh.noGrace {
			for _, h := range r.Holds {
				p.release(h)
			}
		} else {
			sh.incoming = append(sh.incoming, r.Holds...)
		}
		out = append(out, Preemption{Lease: r, For: l, Reclaim: r.Tenant != l.Tenant})
	}
	if !sh.noGrace {
		sh.claim(f, fit)
	}
	return out
}

// release frees a hold of a lease preempted with no grace period: it is free in the
// transaction that writes the preemption.
func (p *Planner) release(h Held) {
	s := p.byID[h.Node]
	if s == nil {
		return
	}
	if h.Device == 0 {
		s.cpusFree += h.CPUs
		s.memFree += h.Memory
		return
	}
	for i := range s.node.Devices {
		d := &s.node.Devices[i]
		if d.ID != h.Device || !d.Held {
			continue
		}
		_, indexed := s.slot[d.Model] // a plain node is in a model's buckets once it had one free
		if indexed {
			p.bucket(d.Model).remove(s)
		}
		d.Held = false
		free := s.free[d.Model]
		at, _ := slices.BinarySearch(free, int32(i))
		s.free[d.Model] = slices.Insert(free, at, int32(i))
		if s.plain {
			p.bucket(d.Model).add(s)
		}
		return
	}
}

// victimOf reports whether the running lease r may be preempted for the pending lease l.
func (p *Planner) victimOf(l *Lease, r *Running, nominal bool) bool {
	if r.Tenant == l.Tenant {
		return p.share.priorityOK && r.Priority < l.Priority
	}
	return nominal && r.borrowing
}

// claim takes out of what later leases of this round may count the incoming holds the lease
// needs on nodes (anywhere it may run when nodes is nil, for a lease that spans nodes): no more
// than what is missing there now.
func (sh *share) claim(f *freeing, nodes []*nstate) {
	l := f.l
	var gpus int
	var cpus int32
	var mem int64
	switch {
	case f.span:
		gpus = int(l.GPUs) - f.freeTotal
	case l.GPUs > 0:
		gpus = int(l.GPUs) - len(nodes[0].free[l.Model])
	default:
		cpus, mem = l.CPUs-nodes[0].cpusFree, l.Memory-nodes[0].memFree
	}
	kept := sh.incoming[:0]
	for _, h := range sh.incoming {
		s := f.p.byID[h.Node]
		take := s != nil && f.canUse(s) && (nodes == nil || onNodes(h, nodes))
		switch {
		case !take:
		case l.GPUs > 0 && h.Device != 0 && h.Model == l.Model && gpus > 0:
			gpus--
			continue
		case l.GPUs == 0 && h.Device == 0 && (cpus > 0 || mem > 0):
			cpus -= h.CPUs
			mem -= h.Memory
			continue
		}
		kept = append(kept, h)
	}
	sh.incoming = kept
}

func onNodes(h Held, nodes []*nstate) bool {
	for _, s := range nodes {
		if s.node.ID == h.Node {
			return true
		}
	}
	return false
}

func holdsOn(r *Running, nodes []*nstate) bool {
	for _, h := range r.Holds {
		if onNodes(h, nodes) {
			return true
		}
	}
	return false
}

// freeing counts, for one pending lease, what running leases would free on the nodes it may run
// on, on top of what is free there now.
type freeing struct {
	p      *Planner
	l      *Lease
	end    time.Time
	gpus   map[*nstate]int
	cpus   map[*nstate]int32
	mem    map[*nstate]int64
	usable map[*nstate]bool
	// For a lease larger than any node: what is free on usable nodes, and what would be.
	freeTotal, extraTotal int
	span                  bool
}

func newFreeing(p *Planner, l *Lease, end time.Time) *freeing {
	f := &freeing{p: p, l: l, end: end, gpus: map[*nstate]int{}, cpus: map[*nstate]int32{}, mem: map[*nstate]int64{}, usable: map[*nstate]bool{}}
	if l.GPUs > 0 && l.GPUs > p.maxPerNode[l.Model] {
		f.span = true
		for _, s := range p.nodes {
			if f.canUse(s) {
				f.freeTotal += len(s.free[l.Model])
			}
		}
	}
	return f
}

// canUse reports whether the lease may run on the node, remembering the answer.
func (f *freeing) canUse(s *nstate) bool {
	ok, seen := f.usable[s]
	if !seen {
		ok = s.node.Schedulable && (s.plain || f.p.eligible(s, f.l, f.end))
		f.usable[s] = ok
	}
	return ok
}

// add counts a hold that will be freed; it reports whether the hold is of use to the lease.
func (f *freeing) add(h Held) bool {
	s := f.p.byID[h.Node]
	if s == nil || !f.canUse(s) {
		return false
	}
	if f.l.GPUs > 0 {
		if h.Device == 0 || h.Model != f.l.Model {
			return false
		}
		f.gpus[s]++
		f.extraTotal++
		return true
	}
	if h.Device != 0 || (h.CPUs == 0 && h.Memory == 0) {
		return false
	}
	f.cpus[s] += h.CPUs
	f.mem[s] += h.Memory
	return true
}

// fits reports whether the lease would fit with what is counted, and on which node (nil for a
// lease that spans nodes).
func (f *freeing) fits() ([]*nstate, bool) {
	l := f.l
	if f.span {
		return nil, f.freeTotal+f.extraTotal >= int(l.GPUs)
	}
	if l.GPUs > 0 {
		for s, n := range f.gpus {
			if len(s.free[l.Model])+n >= int(l.GPUs) {
				return []*nstate{s}, true
			}
		}
		return nil, false
	}
	for s, c := range f.cpus {
		if s.cpusFree+c >= l.CPUs && s.memFree+f.mem[s] >= l.Memory {
			return []*nstate{s}, true
		}
	}
	return nil, false
}
