package placement

import (
	"cmp"
	"maps"
	"slices"
	"time"

	"github.com/google/uuid"
)

// Backfill reservations. A gang that has waited Topology.ReserveAfter and does not fit now gets
// the members where it would fit soonest: the first time T at which what is free plus what
// running leases free by then (Running.End) would hold it, in one domain by the same rules as
// placement. Until the planner is rebuilt those nodes take only leases that end by T (backfill),
// so that the gang is not starved by smaller leases that keep arriving.

// farFuture ends a gang's reservation window: it holds until the gang is placed.
var farFuture = time.Date(9999, 12, 31, 0, 0, 0, 0, time.UTC)

// Reserved is, for each gang lease the planner reserved nodes for, when it expects them to be
// free for it. Each reserved node carries a Window of the gang's lease ID from that time in its
// Reservations, so that leases placed on it end by then.
func (p *Planner) Reserved() map[uuid.UUID]time.Time { return maps.Clone(p.reserved) }

// freed is a device a running lease frees at a time.
type freed struct {
	at   time.Time
	hold Held
}

// reserve reserves nodes for the batch's gangs that have waited long enough and do not fit now,
// oldest first; a node is reserved for one gang at most.
func (p *Planner) reserve(leases []*Lease) {
	var gangs []*Lease
	for _, l := range leases {
		if _, done := p.reserved[l.ID]; !done && l.Gang != nil && p.now.Sub(l.Since) >= p.topo.ReserveAfter {
			gangs = append(gangs, l)
		}
	}
	if len(gangs) == 0 {
		return
	}
	slices.SortStableFunc(gangs, func(x, y *Lease) int { return cmp.Or(x.Since.Compare(y.Since), cmp.Compare(x.Seq, y.Seq)) })
	var events []freed
	if p.share != nil {
		for _, r := range p.share.running {
			if r.End.IsZero() {
				continue
			}
			for _, h := range r.Holds {
				if h.Device != 0 {
					events = append(events, freed{r.End, h})
				}
			}
		}
	}
	slices.SortStableFunc(events, func(a, b freed) int { return a.at.Compare(b.at) })
	taken := map[*nstate]bool{}
	for _, l := range gangs {
		end, reason, ok := p.prepare(l)
		if reason != "" || !ok || (p.share != nil && !p.share.granted(l.Tenant)) {
			continue
		}
		f := newGangFit(p, l, end, taken)
		if f.members() != nil {
			continue // fits now
		}
		at, members := p.soonest(f, events)
		if members == nil {
			continue
		}
		p.reserved[l.ID] = at
		for _, s := range members {
			taken[s] = true
			p.reserveNode(s, Window{ID: l.ID, Start: at, End: farFuture})
		}
	}
}

// soonest counts events in time order until the gang fits, and says when and on which members.
func (p *Planner) soonest(f *gangFit, events []freed) (time.Time, []*nstate) {
	for i := 0; i < len(events); {
		at := events[i].at
		for ; i < len(events) && events[i].at.Equal(at); i++ {
			f.addHold(events[i].hold)
		}
		if members := f.members(); members != nil {
			return maxTime(at, p.now), members
		}
	}
	return time.Time{}, nil
}

// reserveNode makes s a special node that carries w: only leases that end by w.Start, or the
// gang w is for, are placed on it.
func (p *Planner) reserveNode(s *nstate, w Window) {
	if s.plain {
		for m := range s.slot {
			p.plain[m].remove(s)
		}
		clear(s.slot)
		s.plain = false
		p.special = append(p.special, s)
	}
	s.node.Reservations = append(slices.Clip(s.node.Reservations), w)
}

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}
