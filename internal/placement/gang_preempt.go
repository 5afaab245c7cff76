package placement

import (
	"time"

	"github.com/google/uuid"
)

// reclaimGang is reclaim for a gang: it counts what preempted leases will free, then what
// preempting would free, node by node, until one set of members (in one domain at the gang's
// level when required, else as pickGang falls back) would each have GPUsPerNode. It then
// preempts only the counted victims that hold something on those members, and claims the
// incoming holds there; when even every candidate victim would not make the whole gang fit, it
// preempts nothing. Like any lease whose topology is required, a gang whose members need several
// GPUs of a required tier preempts nothing.
func (p *Planner) reclaimGang(l *Lease, end time.Time, nominal bool) []Preemption {
	sh := p.share
	if l.TopologyRequired && l.Gang.GPUsPerNode > 1 {
		return nil
	}
	if len(sh.incoming) == 0 && !sh.priorityOK && (!nominal || sh.borrowing == 0) {
		return nil
	}
	f := newGangFit(p, l, end, nil)
	for _, h := range sh.incoming {
		f.addHold(h)
	}
	if members := f.members(); members != nil {
		sh.claimGang(l, members)
		return nil
	}
	for sh.victims0 < len(sh.victims) && sh.victims[sh.victims0].Preempted {
		sh.victims0++
	}
	var victims []*Running
	var members []*nstate
	for _, r := range sh.victims[sh.victims0:] {
		if r.Preempted || !p.victimOf(l, r, nominal) {
			continue
		}
		counted := false
		for _, h := range r.Holds {
			counted = f.addHold(h) || counted
		}
		if !counted {
			continue
		}
		victims = append(victims, r)
		if members = f.members(); members != nil {
			break
		}
	}
	if members == nil {
		return nil
	}
	var out []Preemption
	for _, r := range victims {
		if !holdsOn(r, members) {
			continue
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
		sh.claimGang(l, members)
	}
	return out
}

// claimGang takes out of what later leases of this round may count the incoming holds the gang
// needs on its members: on each, no more than what is missing there now.
func (sh *share) claimGang(l *Lease, members []*nstate) {
	missing := make(map[uuid.UUID]int, len(members))
	for _, s := range members {
		missing[s.node.ID] = max(int(l.Gang.GPUsPerNode)-len(s.free[l.Model]), 0)
	}
	kept := sh.incoming[:0]
	for _, h := range sh.incoming {
		if h.Device != 0 && h.Model == l.Model && missing[h.Node] > 0 {
			missing[h.Node]--
			continue
		}
		kept = append(kept, h)
	}
	sh.incoming = kept
}
