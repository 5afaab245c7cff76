package placement

import (
	"slices"
	"testing"
	"time"

	"github.com/google/uuid"
)

var all8 = []int{0, 1, 2, 3, 4, 5, 6, 7}

// running marks devices idx of n held by a new running lease of tenant, which ends at end.
func running(tenant uuid.UUID, seq int64, end time.Time, n *Node, idx ...int) *Running {
	r := NewRunning(uuid.New(), tenant, seq, 0, int32(len(idx)), "H100", 0, 0, false, false)
	r.End = end
	for _, i := range idx {
		n.Devices[i].Held = true
		r.Holds = append(r.Holds, Held{Node: n.ID, Device: n.Devices[i].ID, Model: "H100"})
	}
	return r
}

// planShared plans leases of the owner on nodes shared with a borrowing grantee whose running
// leases are rs (the owner's own running leases too).
func planShared(nodes []*Node, owner uuid.UUID, grantee uuid.UUID, noGrace bool, rs []*Running, leases ...*Lease) ([]Placement, []Preemption) {
	p := NewPlanner(t0, nodes, nil)
	p.SetTopology(blockRack)
	p.Share(Sharing{Owner: owner, Grants: []*Account{{Tenant: grantee, Nominal: Amounts{}}}, Running: rs, NoGrace: noGrace})
	for _, l := range leases {
		l.Tenant = owner
	}
	placed, _, preempted := p.Plan(leases)
	return placed, preempted
}

func TestGangPreemptsOnlyOnTheRackItWillUse(t *testing.T) {
	t.Parallel()
	for _, noGrace := range []bool{false, true} {
		owner, grantee := uuid.New(), uuid.New()
		a1, a2, c1, c2 := rackNode("a1", "b1", "r1"), rackNode("a2", "b1", "r1"), rackNode("c1", "b1", "r2"), rackNode("c2", "b1", "r2")
		nodes := []*Node{a1, a2, c1, c2}
		// Newest first: a1's, then c1's and c2's (rack r2 is then freed), then a2's.
		rs := []*Running{
			running(grantee, 4, t0.Add(time.Hour), a1, all8...), running(grantee, 3, t0.Add(time.Hour), c1, all8...),
			running(grantee, 2, t0.Add(time.Hour), c2, all8...), running(grantee, 1, t0.Add(time.Hour), a2, all8...),
		}
		g := gang(2, 8, rackLevel, true)
		placed, preempted := planShared(nodes, owner, grantee, noGrace, rs, g)
		var victims []int64
		for _, pr := range preempted {
			if pr.For != g || !pr.Reclaim {
				t.Fatalf("preempted %v for %v", pr.Lease.Seq, pr.For)
			}
			victims = append(victims, pr.Lease.Seq)
		}
		if !slices.Equal(victims, []int64{3, 2}) {
			t.Fatalf("noGrace %v: preempted %v, want the leases on c1 and c2", noGrace, victims)
		}
		if noGrace {
			only(t, placed, nil, 1)
			if got := memberNames(t, nodes, placed[0]); !slices.Equal(got, []string{"c1", "c2"}) {
				t.Fatalf("members %v, want c1, c2", got)
			}
		} else if len(placed) != 0 {
			t.Fatal("placed before its victims' grace is over")
		}
	}
}

func TestGangPreemptsNothingWhenNoRackCanBeFreed(t *testing.T) {
	t.Parallel()
	owner, grantee := uuid.New(), uuid.New()
	a1, a2 := rackNode("a1", "b1", "r1"), rackNode("a2", "b1", "r1")
	c1, c2 := rackNode("c1", "b1", "r2"), rackNode("c2", "b1", "r2")
	e1 := rackNode("e1", "b2", "r3")
	nodes := []*Node{a1, a2, c1, c2, e1}
	// 20 GPUs are free (c1, e1 and half of a1), but the grantee's lease only frees a1: no rack
	// then has two free nodes.
	rs := []*Running{
		running(grantee, 1, t0.Add(time.Hour), a1, 0, 1, 2, 3),
		running(owner, 2, t0.Add(time.Hour), a2, all8...),
		running(owner, 3, t0.Add(time.Hour), c2, all8...),
	}
	placed, preempted := planShared(nodes, owner, grantee, true, rs, gang(2, 8, rackLevel, true))
	if len(placed) != 0 || len(preempted) != 0 {
		t.Fatalf("placed %d, preempted %d; want nothing", len(placed), len(preempted))
	}
	// Preferred, a gang of three may span racks: the lease on a1 gives way.
	placed, preempted = planShared(nodes, owner, grantee, true, rs, gang(3, 8, rackLevel, false))
	if len(placed) != 1 || len(preempted) != 1 || preempted[0].Lease != rs[0] {
		t.Fatalf("placed %d, preempted %d; want the gang placed for the lease on a1", len(placed), len(preempted))
	}
}
