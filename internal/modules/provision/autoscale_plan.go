package provision

import (
	"encoding/json"
	"time"

	"github.com/google/uuid"

	"github.com/better-compute/better-compute/gen/db"
	provisiondb "github.com/better-compute/better-compute/gen/modules/provision/db"
	"github.com/better-compute/better-compute/internal/fleet"
	"github.com/better-compute/better-compute/internal/placement"
)

// supply is a scaled pool's capacity as the autoscaler counts it: the members the placer sees,
// those of the pool's machines that are not ready yet counted as schedulable (they will be), and
// an empty machine of the class's shape for each machine asked for whose node has not reported
// what it has yet (incoming).
type supply struct {
	members  []*placement.Node
	incoming int
}

// supplyOf builds the supply from the placer's view of the members and the pool's machines.
func supplyOf(nodes []db.PlacerNodesRow, devices []db.PlacerDevicesRow, machines []provisiondb.PoolMachinesRow) supply {
	var s supply
	reported := map[uuid.UUID]bool{}
	for _, r := range nodes {
		if r.Cpus > 0 || r.MemoryBytes > 0 {
			reported[r.ID] = true
		}
	}
	for _, d := range devices {
		reported[d.NodeID] = true
	}
	coming := map[uuid.UUID]bool{}
	for _, m := range machines {
		if !incomingStates[m.State] {
			continue
		}
		if m.NodeID != nil && reported[*m.NodeID] {
			coming[*m.NodeID] = true
		} else {
			s.incoming++
		}
	}
	byID := map[uuid.UUID]*placement.Node{}
	for _, r := range nodes {
		n := &placement.Node{
			ID: r.ID, Schedulable: coming[r.ID] || (r.State == "ready" && r.Online),
			CPUs: r.Cpus, CPUsUsed: r.CpusUsed, Memory: r.MemoryBytes, MemoryUsed: r.MemoryUsed,
		}
		var taints []fleet.Taint
		if json.Unmarshal(r.Taints, &taints) != nil {
			n.Schedulable = false
		}
		for _, t := range taints {
			if t.Blocks() {
				n.Taints = append(n.Taints, t)
			}
		}
		s.members = append(s.members, n)
		byID[r.ID] = n
	}
	for _, d := range devices {
		if n := byID[d.NodeID]; n != nil {
			n.Devices = append(n.Devices, placement.Device{ID: d.ID, Index: d.Idx, Model: d.Model, Held: d.Held})
		}
	}
	return s
}

// incomingStates are the states of a machine that will become capacity of its pool: asked for
// and not ready yet. A process that restarts counts them again, so it does not provision twice.
var incomingStates = map[string]bool{StateRequested: true, StateProvisioning: true, StateBooting: true, StateJoined: true}

// liveStates are the states of a machine the pool counts against min and max.
var liveStates = map[string]bool{
	StateRequested: true, StateProvisioning: true, StateBooting: true, StateJoined: true, StateReady: true,
}

// demand is a scaled pool's pending leases as the placer would plan them, and which of them
// have waited longer than the scale-up delay.
type demand struct {
	leases []*placement.Lease
	old    map[uuid.UUID]bool
	// youngest is when the next lease not old yet becomes old; zero when none.
	nextOld time.Time
}

// demandOf reads the pending leases; leases of a reservation are left to it (they wait for its
// window, not for capacity).
func demandOf(rows []provisiondb.ScalePendingLeasesRow, now time.Time, delay time.Duration) demand {
	d := demand{old: map[uuid.UUID]bool{}}
	for _, r := range rows {
		if r.ReservationID != nil {
			continue
		}
		l := &placement.Lease{
			ID: r.ID, Tenant: r.TenantID, GPUs: r.Gpus, Model: r.GpuModel, CPUs: r.Cpus, Memory: r.MemoryBytes,
			Spread: r.Spread, Duration: time.Duration(r.DurationMs) * time.Millisecond, Priority: r.Priority,
		}
		if r.Seq != nil {
			l.Seq = *r.Seq
		}
		if json.Unmarshal(r.Tolerations, &l.Tolerations) != nil {
			l.Tolerations = nil
		}
		d.leases = append(d.leases, l)
		ripe := r.CreatedAt.Add(delay)
		if !ripe.After(now) {
			d.old[r.ID] = true
		} else if d.nextOld.IsZero() || ripe.Before(d.nextOld) {
			d.nextOld = ripe
		}
	}
	return d
}

// virtual returns n nodes of the shape, empty and schedulable: machines to come.
func (s Shape) virtual(n int) []*placement.Node {
	out := make([]*placement.Node, n)
	for i := range out {
		v := &placement.Node{ID: uuid.New(), Schedulable: true, CPUs: s.CPUs, Memory: s.MemoryBytes}
		for g := range s.GPUs {
			v.Devices = append(v.Devices, placement.Device{ID: -int64(i)*maxShapeGPUs - int64(g) - 1, Index: g, Model: s.GPUModel})
		}
		out[i] = v
	}
	return out
}

// placedOld counts the old leases the placer would place with extra more machines of the shape
// beside the supply, planning every pending lease in its order as the placer does.
func placedOld(now time.Time, sup supply, shape Shape, d demand, extra int) int {
	nodes := append(append([]*placement.Node{}, sup.members...), shape.virtual(sup.incoming+extra)...)
	placed, _, _ := placement.NewPlanner(now, nodes, nil).Plan(d.leases)
	n := 0
	for _, p := range placed {
		if d.old[p.Lease.ID] {
			n++
		}
	}
	return n
}

// placeableNow reports whether the placer could place a pending lease on the members as they are:
// it is behind, and an idle node may be about to take a lease.
func placeableNow(now time.Time, sup supply, d demand) bool {
	if len(d.leases) == 0 {
		return false
	}
	placed, _, _ := placement.NewPlanner(now, sup.members, nil).Plan(d.leases)
	return len(placed) > 0
}

// scaleUp is the fewest machines of the shape, at most room, that make the most old leases fit
// that any number up to room would; how many old leases would not fit without them (waiting),
// and how many would still not fit with them (unfit).
func scaleUp(now time.Time, sup supply, shape Shape, d demand, room int) (machines, waiting, unfit int) {
	if len(d.old) == 0 {
		return 0, 0, 0
	}
	base := placedOld(now, sup, shape, d, 0)
	waiting = len(d.old) - base
	if waiting == 0 || room <= 0 {
		return 0, waiting, waiting
	}
	best := placedOld(now, sup, shape, d, room)
	if best == base {
		return 0, waiting, waiting
	}
	lo, hi := 1, room // the fewest in [lo, hi] that place best
	for lo < hi {
		mid := (lo + hi) / 2
		if placedOld(now, sup, shape, d, mid) >= best {
			hi = mid
		} else {
			lo = mid + 1
		}
	}
	return lo, waiting, len(d.old) - best
}
