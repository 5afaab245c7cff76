package placement

import (
	"testing"
	"time"

	"github.com/google/uuid"
)

// busyRack is rack r1 of two nodes, each half held by a running lease of tenant ending at end.
func busyRack(tenant uuid.UUID, end time.Time) ([]*Node, []*Running) {
	a1, a2 := rackNode("a1", "b1", "r1"), rackNode("a2", "b1", "r1")
	return []*Node{a1, a2}, []*Running{running(tenant, 1, end, a1, 0, 1, 2, 3), running(tenant, 2, end, a2, 0, 1, 2, 3)}
}

func TestBackfillOnlyBeforeAWaitingGang(t *testing.T) {
	t.Parallel()
	owner := uuid.New()
	at := t0.Add(2 * time.Hour)
	nodes, rs := busyRack(owner, at)
	p := NewPlanner(t0, nodes, nil)
	p.SetTopology(Topology{Levels: blockRack.Levels, ReserveAfter: 30 * time.Minute})
	p.Share(Sharing{Owner: owner, Running: rs})
	g := gang(2, 8, rackLevel, false)
	g.Since = t0.Add(-time.Hour)
	short, long := lease(4, false), lease(4, false)
	long.Duration = 3 * time.Hour
	for _, l := range []*Lease{g, short, long} {
		l.Tenant = owner
	}
	placed, failed, _ := p.Plan([]*Lease{g, short, long})
	only(t, placed, failed, 1)
	if placed[0].Lease != short {
		t.Fatal("the lease that ends after the gang's start was placed on its nodes")
	}
	if got := p.Reserved(); len(got) != 1 || !got[g.ID].Equal(at) {
		t.Fatalf("reserved %v, want the gang from %v", got, at)
	}

	// At the start, the running leases (and the short one) have ended: the gang is placed there.
	nodes, _ = busyRack(owner, at)
	for _, n := range nodes {
		for i := range n.Devices {
			n.Devices[i].Held = false
		}
		n.Reservations = []Window{{ID: g.ID, Start: at, End: farFuture}}
	}
	p = NewPlanner(at, nodes, nil)
	p.SetTopology(blockRack)
	placed, failed, _ = p.Plan([]*Lease{long, g})
	only(t, placed, failed, 1)
	if placed[0].Lease != g || placed[0].Domain != "block=b1,rack=r1" {
		t.Fatal("the gang was not placed on its reserved nodes")
	}
}

func TestNoReservationUntilItIsDueOrKnown(t *testing.T) {
	t.Parallel()
	owner := uuid.New()
	for _, tc := range []struct {
		name    string
		since   time.Duration
		running bool
	}{
		{"too soon", -10 * time.Minute, true},
		{"no running leases known", -time.Hour, false},
	} {
		nodes, rs := busyRack(owner, t0.Add(2*time.Hour))
		p := NewPlanner(t0, nodes, nil)
		p.SetTopology(Topology{Levels: blockRack.Levels, ReserveAfter: 30 * time.Minute})
		if tc.running {
			p.Share(Sharing{Owner: owner, Running: rs})
		}
		g, long := gang(2, 8, rackLevel, false), lease(4, false)
		g.Since, long.Duration = t0.Add(tc.since), 3*time.Hour
		g.Tenant, long.Tenant = owner, owner
		placed, failed, _ := p.Plan([]*Lease{g, long})
		only(t, placed, failed, 1)
		if placed[0].Lease != long || len(p.Reserved()) != 0 {
			t.Fatalf("%s: reserved %v", tc.name, p.Reserved())
		}
	}
}
