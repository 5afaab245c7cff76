package placement

import (
	"cmp"
	"slices"
	"time"

	"github.com/google/uuid"

	"github.com/better-compute/better-compute/internal/capacity"
)

// Shared capacity. Every tenant that leases from a pool has an account there: a grantee its
// grant's nominal quota, borrowing limit and weight; the owner what the grants leave of the
// pool's capacity as its nominal quota, no borrowing limit and weight 1. Plan then works in two
// phases over each batch of pending leases:
//
//  1. Leases within their tenant's nominal quota, by priority (higher first), then age. One that
//     does not fit reclaims: it preempts borrowing leases of other tenants (and, where the pool
//     allows it, lower-priority leases of its own tenant), lowest priority first, then newest,
//     until it would fit; it then waits for them to free their devices. One that cannot fit even
//     so waits, and keeps borrowers off its resource for this round: borrowers only take
//     capacity no one within nominal quota is waiting for.
//  2. Leases beyond their tenant's nominal quota (borrowing), within its borrowing limit, one at
//     a time from the tenant with the lowest weighted dominant share of borrowed capacity, so
//     that busy borrowers converge to shares of the borrowable capacity in proportion to their
//     weights (dominant resource fairness).
//
// Which running leases borrow is counted afresh every round: a tenant's leases, by priority then
// age, are within nominal quota while they fit in it together; the rest borrow. Only borrowing
// leases of other tenants are ever preempted for a reclaim, so no preemption takes a lease that
// is within its tenant's nominal quota.

// resource keys of Amounts.
const (
	cpuKey    = "cpu"
	memoryKey = "memory"
)

func gpuKey(model string) string { return "gpu:" + model }

// Amounts is an amount of capacity by resource key: "gpu:<model>", "cpu", "memory" (bytes).
type Amounts map[string]int64

// sizeOf is what a lease of the shape holds.
func sizeOf(gpus int32, model string, cpus int32, memory int64) Amounts {
	if gpus > 0 {
		return Amounts{gpuKey(model): int64(gpus)}
	}
	a := Amounts{}
	if cpus > 0 {
		a[cpuKey] = int64(cpus)
	}
	if memory > 0 {
		a[memoryKey] = memory
	}
	return a
}

func (a Amounts) add(b Amounts, sign int64) {
	for k, v := range b {
		a[k] += sign * v
	}
}

// fits reports whether a plus more stays within limit on every resource more has.
func (a Amounts) fits(more, limit Amounts) bool {
	for k, v := range more {
		if a[k]+v > limit[k] {
			return false
		}
	}
	return true
}

// Account is a tenant's standing in a pool.
type Account struct {
	Tenant uuid.UUID
	// Nominal is what the tenant may always hold when the capacity exists.
	Nominal Amounts
	// Limit is the most it may hold, nominal quota and borrowing limit together; nil for no
	// limit (the owner).
	Limit Amounts
	// Weight is its share of borrowable capacity relative to other borrowers; at least 1.
	Weight int64
	used   Amounts
}

// Running is a lease that holds what it was placed on: placed, at risk, or preempted and within
// its grace period.
type Running struct {
	ID, Tenant uuid.UUID
	Seq        int64
	Priority   int32
	Size       Amounts
	// Borrowing is what the database says; Plan recounts it.
	Borrowing bool
	Preempted bool
	Holds     []Held
	// End is when the lease frees what it holds (its end, or its preemption grace's); a gang's
	// reservation starts once enough running leases have ended (see Topology).
	End time.Time

	borrowing bool // as counted this round
}

// NewRunning describes a running lease of the shape.
func NewRunning(id, tenant uuid.UUID, seq int64, priority int32, gpus int32, model string, cpus int32, memory int64, borrowing, preempted bool) *Running {
	return &Running{ID: id, Tenant: tenant, Seq: seq, Priority: priority, Size: sizeOf(gpus, model, cpus, memory), Borrowing: borrowing, Preempted: preempted}
}

// Sharing is what Plan needs to share a pool among tenants: their accounts and the running leases.
type Sharing struct {
	Owner uuid.UUID
	// Grants are the grantees' accounts; the owner's is derived from the pool's capacity.
	Grants []*Account
	// Running are the pool's leases that hold anything, with what they hold.
	Running []*Running
	// PriorityPreemption lets a lease preempt lower-priority leases of its own tenant.
	PriorityPreemption bool
	// NoGrace is true when the pool's grace period is 0: a preempted lease frees what it holds
	// in the transaction that preempts it, so the lease it was preempted for is placed at once.
	NoGrace bool
}

// Preemption is a running lease whose capacity is taken back for a pending one.
type Preemption struct {
	Lease *Running
	For   *Lease
	// Reclaim is true when the capacity goes back to a tenant within its nominal quota; false
	// for a higher-priority lease of the same tenant.
	Reclaim bool
}

// Recount is a running lease whose borrowing changed when Plan counted it afresh.
type Recount struct {
	ID        uuid.UUID
	Borrowing bool
}

// share is a planner's accounting of shared capacity.
type share struct {
	owner      uuid.UUID
	accounts   map[uuid.UUID]*Account
	running    []*Running
	capacity   Amounts // the pool's members, schedulable or not
	priorityOK bool
	noGrace    bool
	grantees   map[uuid.UUID]bool
	// victims are the running leases that may be preempted, in the order they would be:
	// lowest priority first, then newest.
	victims  []*Running
	victims0 int // victims before it are all preempted
	// borrowing counts the running leases, not preempted, that borrow.
	borrowing int
	// incoming are holds of preempted leases not yet claimed by a waiting lease this round.
	incoming []Held
}

// Share makes the planner account for shared capacity; without it, every lease is the owner's
// within nominal quota and nothing is ever preempted. It returns the running leases whose
// borrowing changed.
func (p *Planner) Share(s Sharing) []Recount {
	sh := &share{
		owner: s.Owner, accounts: map[uuid.UUID]*Account{}, grantees: map[uuid.UUID]bool{},
		running: s.Running, capacity: p.capacity(), priorityOK: s.PriorityPreemption, noGrace: s.NoGrace,
	}
	ownerNominal := Amounts{}
	ownerNominal.add(sh.capacity, 1)
	for _, a := range s.Grants {
		a.used = Amounts{}
		a.Weight = max(a.Weight, 1)
		sh.accounts[a.Tenant] = a
		sh.grantees[a.Tenant] = true
		ownerNominal.add(a.Nominal, -1)
	}
	for k, v := range ownerNominal {
		ownerNominal[k] = max(v, 0)
	}
	sh.accounts[s.Owner] = &Account{Tenant: s.Owner, Nominal: ownerNominal, Weight: 1, used: Amounts{}}
	p.share = sh
	return sh.recount()
}

// capacity is what the pool's members hold, schedulable or not.
func (p *Planner) capacity() Amounts {
	c := Amounts{}
	for m, n := range p.total {
		c[gpuKey(m)] = int64(n)
	}
	for _, s := range p.nodes {
		c[cpuKey] += int64(s.node.CPUs)
		c[memoryKey] += s.node.Memory
	}
	return c
}

// account is the tenant's account; a tenant with leases but no grant (revoked) may hold nothing
// within nominal quota.
func (sh *share) account(tenant uuid.UUID) *Account {
	a := sh.accounts[tenant]
	if a == nil {
		a = &Account{Tenant: tenant, Nominal: Amounts{}, Limit: Amounts{}, Weight: 1, used: Amounts{}}
		sh.accounts[tenant] = a
	}
	return a
}

// granted reports whether the tenant may lease from the pool at all: it owns it or holds an
// active grant of it.
func (sh *share) granted(tenant uuid.UUID) bool { return sh.grantees[tenant] || tenant == sh.owner }

// recount sums what each tenant holds and which of its running leases borrow: by priority then
// age, a lease is within nominal quota while it fits there with the ones before it.
func (sh *share) recount() []Recount {
	byTenant := map[uuid.UUID][]*Running{}
	for _, r := range sh.running {
		if r.Preempted {
			sh.incoming = append(sh.incoming, r.Holds...)
			continue
		}
		byTenant[r.Tenant] = append(byTenant[r.Tenant], r)
		sh.victims = append(sh.victims, r)
	}
	slices.SortFunc(sh.victims, func(x, y *Running) int {
		return cmp.Or(cmp.Compare(x.Priority, y.Priority), cmp.Compare(y.Seq, x.Seq))
	})
	var out []Recount
	for tenant, rs := range byTenant {
		a := sh.account(tenant)
		slices.SortFunc(rs, func(x, y *Running) int {
			return cmp.Or(cmp.Compare(y.Priority, x.Priority), cmp.Compare(x.Seq, y.Seq))
		})
		within := Amounts{}
		for _, r := range rs {
			a.used.add(r.Size, 1)
			r.borrowing = !within.fits(r.Size, a.Nominal)
			if r.borrowing {
				sh.borrowing++
			} else {
				within.add(r.Size, 1)
			}
			if r.borrowing != r.Borrowing {
				out = append(out, Recount{ID: r.ID, Borrowing: r.borrowing})
			}
		}
	}
	return out
}

// dominantShare is the tenant's largest share of any resource's capacity that it borrows,
// divided by its weight.
func (sh *share) dominantShare(a *Account) float64 {
	var most float64
	for k, used := range a.used {
		borrowed := used - a.Nominal[k]
		if borrowed <= 0 || sh.capacity[k] <= 0 {
			continue
		}
		most = max(most, float64(borrowed)/float64(sh.capacity[k]))
	}
	return most / float64(a.Weight)
}

// byPriority orders leases higher priority first, then oldest first.
func byPriority(x, y *Lease) int {
	return cmp.Or(cmp.Compare(y.Priority, x.Priority), cmp.Compare(x.Seq, y.Seq))
}

// planShared is Plan for a pool shared among tenants.
func (p *Planner) planShared(leases []*Lease) (placed []Placement, failed []Failure, preempted []Preemption) {
	sh := p.share
	var nominal []*Lease
	borrowers := map[uuid.UUID][]*Lease{}
	ends := map[*Lease]time.Time{}
	for _, l := range leases {
		if !sh.granted(l.Tenant) {
			failed = append(failed, Failure{l, "the pool is not granted to the lease's tenant (its grant was revoked)"})
			continue
		}
		end, reason, ok := p.prepare(l)
		if reason != "" {
			failed = append(failed, Failure{l, reason})
			continue
		}
		if !ok {
			continue
		}
		ends[l] = end
		a := sh.account(l.Tenant)
		if a.used.fits(l.size(), a.Nominal) {
			nominal = append(nominal, l)
		} else {
			borrowers[l.Tenant] = append(borrowers[l.Tenant], l)
		}
	}

	// Phase 1: within nominal quota.
	slices.SortFunc(nominal, byPriority)
	blocked := map[string]bool{}
	for _, l := range nominal {
		a := sh.account(l.Tenant)
		size := l.size()
		if !a.used.fits(size, a.Nominal) {
			// Earlier leases of the tenant took its nominal quota: it borrows, if it may.
			borrowers[l.Tenant] = append(borrowers[l.Tenant], l)
			continue
		}
		if holds := p.placeOne(l, ends[l]); holds != nil {
			a.used.add(size, 1)
			placed = append(placed, p.placement(l, holds, false))
			continue
		}
		victims := p.reclaim(l, ends[l], true)
		preempted = append(preempted, victims...)
		if len(victims) > 0 && sh.noGrace {
			if holds := p.placeOne(l, ends[l]); holds != nil {
				a.used.add(size, 1)
				placed = append(placed, p.placement(l, holds, false))
				continue
			}
		}
		for k := range size {
			blocked[k] = true
		}
	}

	// Phase 2: borrowing, the lowest weighted dominant share first.
	for _, q := range borrowers {
		slices.SortFunc(q, byPriority)
	}
	for len(borrowers) > 0 {
		var (
			best      uuid.UUID
			bestShare float64
			found     bool
		)
		for t, q := range borrowers {
			s := sh.dominantShare(sh.account(t))
			if !found || s < bestShare || (s == bestShare && byPriority(q[0], borrowers[best][0]) < 0) {
				best, bestShare, found = t, s, true
			}
		}
		q := borrowers[best]
		l := q[0]
		if len(q) == 1 {
			delete(borrowers, best)
		} else {
			borrowers[best] = q[1:]
		}
		a := sh.account(l.Tenant)
		size := l.size()
		if size.any(blocked) {
			continue // someone within nominal quota waits for this resource
		}
		if a.Limit != nil && !a.used.fits(size, a.Limit) {
			continue // waits for its tenant's leases to end
		}
		if holds := p.placeOne(l, ends[l]); holds != nil {
			a.used.add(size, 1)
			placed = append(placed, p.placement(l, holds, true))
			continue
		}
		if !sh.priorityOK {
			continue
		}
		victims := p.reclaim(l, ends[l], false)
		preempted = append(preempted, victims...)
		if len(victims) > 0 && sh.noGrace {
			if holds := p.placeOne(l, ends[l]); holds != nil {
				a.used.add(size, 1)
				placed = append(placed, p.placement(l, holds, true))
			}
		}
	}
	return placed, failed, preempted
}

// any reports whether a has any of the resources set holds.
func (a Amounts) any(set map[string]bool) bool {
	for k := range a {
		if set[k] {
			return true
		}
	}
	return false
}

// MayPreempt reports whether planning more leases could still preempt or count on preempted
// leases, even when nothing is free.
func (p *Planner) MayPreempt() bool {
	sh := p.share
	return sh != nil && (len(sh.incoming) > 0 || sh.borrowing > 0 || sh.priorityOK)
}

// AmountsOf is r in the planner's terms.
func AmountsOf(r capacity.Resources) Amounts {
	a := Amounts{}
	for m, n := range r.GPUs {
		a[gpuKey(m)] = int64(n)
	}
	if r.CPUs > 0 {
		a[cpuKey] = int64(r.CPUs)
	}
	if r.MemoryBytes > 0 {
		a[memoryKey] = r.MemoryBytes
	}
	return a
}
