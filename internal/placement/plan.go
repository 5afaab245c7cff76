package placement

import (
	"cmp"
	"fmt"
	"slices"
	"time"

	"github.com/google/uuid"

	"github.com/better-compute/better-compute/gen/db"
	"github.com/better-compute/better-compute/internal/capacity"
	"github.com/better-compute/better-compute/internal/fleet"
)

// Window is a reservation's time window, [Start, End).
type Window struct {
	ID         uuid.UUID
	Start, End time.Time
}

func (w Window) overlaps(start, end time.Time) bool {
	return w.Start.Before(end) && start.Before(w.End)
}

// Device is a node's GPU as the placer sees it.
type Device struct {
	ID    int64
	Index int32
	Model string
	// Held by an allocation.
	Held bool
	// NUMA is the device's NUMA node, nil when unknown.
	NUMA *int32
	// Links are how it reaches the node's other GPUs; empty when unknown (see Tier).
	Links []Link
}

// Node is a pool member as the placer sees it.
type Node struct {
	ID uuid.UUID
	// Ready, online and not revoked.
	Schedulable bool
	// Taints that keep leases off (NoSchedule, NoExecute).
	Taints []fleet.Taint
	// Active reservations not over yet, of every pool the node is a member of.
	Reservations []Window
	// Present devices, by index.
	Devices            []Device
	CPUs, CPUsUsed     int32
	Memory, MemoryUsed int64
	// Name is the node's hostname: members of a gang in one domain are ranked by it.
	Name string
	// Domain is the node's value for each of the planner's topology levels (Topology.Levels),
	// outermost first; "" where the node lacks the level's label, which keeps it out of every
	// domain at that level and below.
	Domain []string
}

// Lease is a pending lease as the placer sees it.
type Lease struct {
	ID, Tenant  uuid.UUID
	GPUs        int32
	Model       string
	CPUs        int32
	Memory      int64
	Spread      bool
	Tolerations []fleet.Toleration
	Duration    time.Duration
	Reservation *uuid.UUID
	// Priority orders leases within nominal quota and among a tenant's borrowing leases;
	// higher first.
	Priority int32
	// Seq is the creation order.
	Seq int64
	// TopologyRequired places the lease only where its GPUs on one node share one NVLink
	// domain, or, on a node without NVLink, one PCIe switch; else it waits. Every lease gets
	// the best-connected free set of the node it is placed on.
	TopologyRequired bool
	// Gang, when set, makes the lease a gang: Gang.Nodes distinct nodes of Gang.GPUsPerNode GPUs
	// each (GPUs is their product), placed all at once or not at all.
	Gang *Gang
	// Since is when the lease began to wait (its creation): a gang that has waited
	// Topology.ReserveAfter gets a domain reserved for it (see Topology).
	Since time.Time
}

// Gang is the shape of a multi-node lease.
type Gang struct {
	Nodes, GPUsPerNode int32
	// Level is the index into Topology.Levels of the domain its members must share
	// (LevelRequired) or should share; -1 for none.
	Level         int
	LevelRequired bool
}

func (l *Lease) size() Amounts { return sizeOf(l.GPUs, l.Model, l.CPUs, l.Memory) }

// Held is one GPU, or CPUs and memory on a node, chosen for a lease.
type Held struct {
	Node   uuid.UUID
	Device int64 // 0 for CPUs and memory
	Model  string
	CPUs   int32
	Memory int64
	// Topology is how the lease's GPUs on this node are joined (TierUnknown for CPUs and memory).
	Topology Tier
	// Rank is the member's rank in a gang (every hold on one node has the same), from 0 in the
	// order of the members' domains, then names; unused outside a gang.
	Rank int32
}

// Placement binds a lease to what it will hold.
type Placement struct {
	Lease *Lease
	Holds []Held
	// Borrowing is true when the lease runs beyond its tenant's nominal quota.
	Borrowing bool
	// Domain is, for a gang, the topology domain its members share, as "level=value" pairs
	// outermost first joined by ","; "" when they share none of the pool's levels.
	Domain string
}

// Failure is a lease that can never be placed.
type Failure struct {
	Lease  *Lease
	Reason string
}

// Planner places leases in memory against a snapshot of a pool, keeping what it hands out, so
// that successive batches of leases see each other's placements.
type Planner struct {
	now          time.Time
	nodes        []*nstate
	plain        map[string]*bucketIndex // model -> free-count buckets of plain nodes
	special      []*nstate               // schedulable nodes with taints or reservations
	total        map[string]int32        // model -> devices on members
	maxPerNode   map[string]int32        // model -> most devices of the model on one member
	maxCPUs      int32
	maxMemory    int64
	known        int                  // members that reported what they have (devices, CPUs or memory)
	growth       *db.PoolGrowth       // what the pool can grow by, nil when it cannot
	reservations map[uuid.UUID]Window // the pool's own active reservations
	byID         map[uuid.UUID]*nstate
	share        *share // nil: one tenant, nothing to share
	topo         Topology
	domains      [][]string              // level -> domain id -> key ("block=b1,rack=r07")
	reserved     map[uuid.UUID]time.Time // gang lease -> when its reserved nodes start to be its
}

// nstate is a node and what is free on it.
type nstate struct {
	node     *Node
	free     map[string][]int32 // model -> indexes into node.Devices of free devices, ascending
	slot     map[string]int     // model -> position in its bucket (plain nodes)
	plain    bool
	cpusFree int32
	memFree  int64
	topo     *ntopo           // built when first needed
	total    map[string]int32 // model -> devices of the model on the node, held or not
	dom      []int32          // level -> domain id (index into Planner.domains), -1 for none
}

func (s *nstate) topology() *ntopo {
	if s.topo == nil {
		s.topo = newTopo(s.node.Devices)
	}
	return s.topo
}

// bucketIndex keeps plain nodes by how many devices of one model are free on them, so best fit
// (bin packing) and worst fit (spread) take O(devices per node) per lease.
type bucketIndex struct {
	model   string
	byFree  [][]*nstate
	nonzero int // nodes with at least one free device of the model
}

func (b *bucketIndex) add(n *nstate) {
	k := len(n.free[b.model])
	for len(b.byFree) <= k {
		b.byFree = append(b.byFree, nil)
	}
	n.slot[b.model] = len(b.byFree[k])
	b.byFree[k] = append(b.byFree[k], n)
	if k > 0 {
		b.nonzero++
	}
}

func (b *bucketIndex) remove(n *nstate) {
	k := len(n.free[b.model])
	bucket := b.byFree[k]
	i := n.slot[b.model]
	last := bucket[len(bucket)-1]
	bucket[i] = last
	last.slot[b.model] = i
	b.byFree[k] = bucket[:len(bucket)-1]
	if k > 0 {
		b.nonzero--
	}
}

// NewPlanner prepares placement at now over the pool's members and its own active
// reservations.
func NewPlanner(now time.Time, nodes []*Node, reservations []Window) *Planner {
	p := &Planner{
		now: now, plain: map[string]*bucketIndex{}, total: map[string]int32{}, maxPerNode: map[string]int32{},
		reservations: map[uuid.UUID]Window{}, byID: make(map[uuid.UUID]*nstate, len(nodes)),
		reserved: map[uuid.UUID]time.Time{},
	}
	for _, w := range reservations {
		p.reservations[w.ID] = w
	}
	for _, n := range nodes {
		s := &nstate{node: n, free: map[string][]int32{}, slot: map[string]int{}}
		perNode := map[string]int32{}
		for i, d := range n.Devices {
			perNode[d.Model]++
			if !d.Held {
				s.free[d.Model] = append(s.free[d.Model], int32(i))
			}
		}
		s.total = perNode
		for m, c := range perNode {
			p.total[m] += c
			p.maxPerNode[m] = max(p.maxPerNode[m], c)
		}
		if len(n.Devices) > 0 || n.CPUs > 0 || n.Memory > 0 {
			p.known++
		}
		p.maxCPUs = max(p.maxCPUs, n.CPUs)
		p.maxMemory = max(p.maxMemory, n.Memory)
		s.cpusFree, s.memFree = max(n.CPUs-n.CPUsUsed, 0), max(n.Memory-n.MemoryUsed, 0)
		p.nodes = append(p.nodes, s)
		p.byID[n.ID] = s
		if !n.Schedulable {
			continue
		}
		if len(n.Taints) > 0 || len(n.Reservations) > 0 {
			p.special = append(p.special, s)
			continue
		}
		s.plain = true
		for m := range s.free {
			p.bucket(m).add(s)
		}
	}
	return p
}

func (p *Planner) bucket(model string) *bucketIndex {
	b := p.plain[model]
	if b == nil {
		b = &bucketIndex{model: model}
		p.plain[model] = b
	}
	return b
}

// Models lists the GPU models of the pool's members.
func (p *Planner) Models() []string {
	var out []string
	for m := range p.total {
		out = append(out, m)
	}
	slices.Sort(out)
	return out
}

// Exhausted reports whether nothing at all is free on schedulable nodes, so no lease can be
// placed until something changes.
func (p *Planner) Exhausted() bool {
	for _, b := range p.plain {
		if b.nonzero > 0 {
			return false
		}
	}
	for _, s := range p.special {
		if s.cpusFree > 0 || s.memFree > 0 {
			return false
		}
		for _, f := range s.free {
			if len(f) > 0 {
				return false
			}
		}
	}
	for _, s := range p.nodes {
		if s.plain && (s.cpusFree > 0 || s.memFree > 0) {
			return false
		}
	}
	return true
}

// Plan places leases: in order, or, once Share was called, by nominal quota, priority and fair
// share (see Share). A lease that does not fit now waits (later, smaller leases may still be
// placed), one that can never fit fails. A gang is placed whole or waits (see Gang); one that
// has waited Topology.ReserveAfter first gets the nodes where it would fit soonest reserved, so
// that only leases ending before it could start are placed there (see Reserved). What it places
// is taken from the snapshot; what it preempts is marked preempted in it.
func (p *Planner) Plan(leases []*Lease) (placed []Placement, failed []Failure, preempted []Preemption) {
	p.reserve(leases)
	if p.share != nil {
		return p.planShared(leases)
	}
	for _, l := range leases {
		end, reason, ok := p.prepare(l)
		if reason != "" {
			failed = append(failed, Failure{l, reason})
			continue
		}
		if !ok {
			continue
		}
		if holds := p.placeOne(l, end); holds != nil {
			placed = append(placed, p.placement(l, holds, false))
		}
	}
	return placed, failed, nil
}

// prepare says when a lease placed now would end, or why it can never be placed (reason), or
// that it must wait for its reservation's window (!ok).
func (p *Planner) prepare(l *Lease) (end time.Time, reason string, ok bool) {
	end = p.now.Add(l.Duration)
	if l.Reservation != nil {
		w, found := p.reservations[*l.Reservation]
		if !found {
			return end, "the lease's reservation was cancelled or is over", false
		}
		if p.now.Before(w.Start) {
			return end, "", false // waits for the window
		}
		end = minTime(end, w.End)
	}
	if reason := p.never(l); reason != "" {
		return end, reason, false
	}
	return end, "", true
}

// placeOne places a lease running until end, or returns nil when it does not fit now.
func (p *Planner) placeOne(l *Lease, end time.Time) []Held {
	if l.Gang != nil {
		return p.placeGang(l, end)
	}
	if l.GPUs > 0 {
		return p.placeGPUs(l, end)
	}
	return p.placeResources(l, end)
}

// Grow tells the planner what the pool can grow by (pool_growth): a lease its members cannot
// hold but new machines could is not failed, it waits for them.
func (p *Planner) Grow(g db.PoolGrowth) { p.growth = &g }

// never says why a lease can never fit the pool's members (cordoned, draining and offline ones
// included: they may come back), or "". A pool without members fails nothing: its membership is
// being changed, or its nodes have yet to join; nor does one whose members have yet to report
// their inventory (just joined, as a provisioned machine's node does).
func (p *Planner) never(l *Lease) string {
	if p.known == 0 {
		return ""
	}
	if l.Gang != nil {
		return p.gangNever(l)
	}
	if p.growth != nil {
		if _, ok := capacity.GrowthFits(*p.growth, l.Model, l.GPUs, l.CPUs, l.Memory); ok {
			return "" // the pool grows to hold it
		}
	}
	if l.GPUs > 0 {
		total := p.total[l.Model]
		if total == 0 {
			return fmt.Sprintf("the pool has no %q GPUs", l.Model)
		}
		if l.GPUs > total {
			return fmt.Sprintf("the pool has only %d %q GPUs", total, l.Model)
		}
		if l.TopologyRequired && l.GPUs > 1 && l.GPUs > p.maxPerNode[l.Model] {
			return fmt.Sprintf("a lease whose topology is required must fit on one node; the pool's nodes have at most %d %q GPUs", p.maxPerNode[l.Model], l.Model)
		}
		return ""
	}
	if l.CPUs > p.maxCPUs {
		return fmt.Sprintf("no node of the pool has %d CPUs", l.CPUs)
	}
	if l.Memory > p.maxMemory {
		return fmt.Sprintf("no node of the pool has %d bytes of memory", l.Memory)
	}
	return ""
}

// eligible reports whether a special node may take the lease running until end.
func (p *Planner) eligible(s *nstate, l *Lease, end time.Time) bool {
	for _, t := range s.node.Taints {
		if !slices.ContainsFunc(l.Tolerations, func(tol fleet.Toleration) bool { return tol.Tolerates(t) }) {
			return false
		}
	}
	for _, w := range s.node.Reservations {
		mine := w.ID == l.ID || (l.Reservation != nil && w.ID == *l.Reservation) // its gang's, or its own
		if !mine && w.overlaps(p.now, end) {
			return false
		}
	}
	return true
}

// better reports whether a node with free devices (or CPUs) left is a better fit than one with
// best: fewer for bin packing, more for spread.
func better(spread bool, free, best int) bool {
	if spread {
		return free > best
	}
	return free < best
}

func (p *Planner) placeGPUs(l *Lease, end time.Time) []Held {
	need := int(l.GPUs)
	if l.TopologyRequired && need > 1 {
		return p.placeRequired(l, end)
	}
	if l.GPUs <= p.maxPerNode[l.Model] {
		// One node: the best fit among plain nodes, then among special ones.
		var best *nstate
		bestFree := -1
		if b := p.plain[l.Model]; b != nil {
			if l.Spread {
				for k := len(b.byFree) - 1; k >= need; k-- {
					if n := len(b.byFree[k]); n > 0 {
						best, bestFree = b.byFree[k][n-1], k
						break
					}
				}
			} else {
				for k := need; k < len(b.byFree); k++ {
					if n := len(b.byFree[k]); n > 0 {
						best, bestFree = b.byFree[k][n-1], k
						break
					}
				}
			}
		}
		for _, s := range p.special {
			f := len(s.free[l.Model])
			if f >= need && (best == nil || better(l.Spread, f, bestFree)) && p.eligible(s, l, end) {
				best, bestFree = s, f
			}
		}
		if best == nil {
			return nil
		}
		return p.takeGPUs(best, l.Model, need, 0, nil)
	}
	// Larger than any node: span the eligible nodes with the most free devices first.
	var cands []*nstate
	freeTotal := 0
	for _, s := range p.nodes {
		f := len(s.free[l.Model])
		if f == 0 || !s.node.Schedulable || (!s.plain && !p.eligible(s, l, end)) {
			continue
		}
		cands = append(cands, s)
		freeTotal += f
	}
	if freeTotal < need {
		return nil
	}
	slices.SortStableFunc(cands, func(a, b *nstate) int { return cmp.Compare(len(b.free[l.Model]), len(a.free[l.Model])) })
	var holds []Held
	for _, s := range cands {
		holds = p.takeGPUs(s, l.Model, min(need-len(holds), len(s.free[l.Model])), 0, holds)
		if len(holds) == need {
			break
		}
	}
	return holds
}

// placeRequired places a lease of several GPUs whose topology is required: on the node that
// packs it best (or spreads it, as it asks) among those that can give its GPUs one NVLink domain
// (one PCIe switch on a node without NVLink), or nil when none can now. Unlike other leases it
// looks at every candidate node, so it costs O(nodes) a lease.
func (p *Planner) placeRequired(l *Lease, end time.Time) []Held {
	need := int(l.GPUs)
	var cands []*nstate
	for _, s := range p.nodes {
		if len(s.free[l.Model]) < need || !s.node.Schedulable || (!s.plain && !p.eligible(s, l, end)) {
			continue
		}
		cands = append(cands, s)
	}
	slices.SortStableFunc(cands, func(a, b *nstate) int {
		c := cmp.Compare(len(a.free[l.Model]), len(b.free[l.Model]))
		if l.Spread {
			c = -c
		}
		return c
	})
	for _, s := range cands {
		must, ok := s.topology().need(l)
		if !ok {
			continue
		}
		if picks, _ := s.topology().choose(s.free[l.Model], need, must); picks != nil {
			return p.takeGPUs(s, l.Model, need, must, nil)
		}
	}
	return nil
}

// takeGPUs takes n free devices of model on s: the best-connected set that shares must (see
// ntopo.choose), lowest indexes first among sets as well joined. The caller has made sure that
// such a set is free.
func (p *Planner) takeGPUs(s *nstate, model string, n int, must uint8, holds []Held) []Held {
	free := s.free[model]
	picks, tier := s.topology().choose(free, n, must)
	if picks == nil {
		return holds
	}
	if s.plain {
		p.plain[model].remove(s)
	}
	if picks[n-1] == n-1 { // the lowest ones, as without topology
		for _, i := range free[:n] {
			d := &s.node.Devices[i]
			d.Held = true
			holds = append(holds, Held{Node: s.node.ID, Device: d.ID, Model: d.Model, Topology: tier})
		}
		s.free[model] = free[n:]
		if s.plain {
			p.plain[model].add(s)
		}
		return holds
	}
	rest := make([]int32, 0, len(free)-n)
	next := 0
	for k, i := range free {
		if next < len(picks) && picks[next] == k {
			next++
			d := &s.node.Devices[i]
			d.Held = true
			holds = append(holds, Held{Node: s.node.ID, Device: d.ID, Model: d.Model, Topology: tier})
			continue
		}
		rest = append(rest, i)
	}
	s.free[model] = rest
	if s.plain {
		p.plain[model].add(s)
	}
	return holds
}

func (p *Planner) placeResources(l *Lease, end time.Time) []Held {
	var best *nstate
	for _, s := range p.nodes {
		if !s.node.Schedulable || s.cpusFree < l.CPUs || s.memFree < l.Memory {
			continue
		}
		if best != nil {
			c := cmp.Compare(s.cpusFree, best.cpusFree)
			if c == 0 {
				c = cmp.Compare(s.memFree, best.memFree)
			}
			if c == 0 || (c > 0) != l.Spread {
				continue
			}
		}
		if !s.plain && !p.eligible(s, l, end) {
			continue
		}
		best = s
	}
	if best == nil {
		return nil
	}
	best.cpusFree -= l.CPUs
	best.memFree -= l.Memory
	return []Held{{Node: best.node.ID, CPUs: l.CPUs, Memory: l.Memory}}
}

func minTime(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

// Topology is how a pool's nodes are grouped for gangs: node labels, outermost first (for
// example "block", "rack"), as Kueue's Topology declares them. A gang asks to share a domain at
// one level: nodes with the same values of that level's label and every outer one.
type Topology struct {
	Levels []string
	// ReserveAfter is how long a gang waits before the planner reserves a domain for it: the
	// nodes where it would fit soonest, onto which only leases that end before it could start
	// are placed (backfill). Zero reserves at once.
	ReserveAfter time.Duration
}

// SetTopology tells the planner the pool's topology levels; the nodes' Domain values follow
// them. Call it before Plan.
func (p *Planner) SetTopology(t Topology) {
	p.topo = t
	p.domains = make([][]string, len(t.Levels))
	ids := make([]map[string]int32, len(t.Levels))
	for k := range ids {
		ids[k] = map[string]int32{}
	}
	for _, s := range p.nodes {
		s.dom = make([]int32, len(t.Levels))
		key := ""
		for k, level := range t.Levels {
			v := ""
			if k < len(s.node.Domain) {
				v = s.node.Domain[k]
			}
			if v == "" || (k > 0 && s.dom[k-1] < 0) {
				s.dom[k] = -1
				continue
			}
			if k > 0 {
				key += ","
			}
			key += level + "=" + v
			id, ok := ids[k][key]
			if !ok {
				id = int32(len(p.domains[k]))
				ids[k][key] = id
				p.domains[k] = append(p.domains[k], key)
			}
			s.dom[k] = id
		}
	}
}
