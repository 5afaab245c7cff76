package guard

import (
	"fmt"
	"strconv"
	"sync"

	"connectrpc.com/connect"
	"github.com/google/uuid"

	"github.com/better-compute/better-compute/internal/metrics"
)

// DefaultExpensiveCallsPerTenant is how many expensive calls (registry.Method.Expensive) one
// tenant may run at once in one API process when RateLimits.ExpensivePerTenant is zero.
const DefaultExpensiveCallsPerTenant = 2

// expensiveRetryAfter is the Retry-After, in seconds, of a call refused for being one expensive
// call too many: the calls in flight usually end within it.
const expensiveRetryAfter = 1

// tenantSlots bounds the calls each tenant runs at once: a counting semaphore per tenant, in
// this process's memory. A tenant's entry exists only while it has a call in flight, so the map
// holds at most as many entries as there are calls.
type tenantSlots struct {
	max  int
	mu   sync.Mutex
	busy map[uuid.UUID]int
}

func newTenantSlots(max int) *tenantSlots {
	return &tenantSlots{max: max, busy: map[uuid.UUID]int{}}
}

// acquire takes one of tenant's slots, returning the function that gives it back (call it
// once), or false when all are taken.
func (s *tenantSlots) acquire(tenant uuid.UUID) (release func(), ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.busy[tenant] >= s.max {
		return nil, false
	}
	s.busy[tenant]++
	var once sync.Once
	return func() {
		once.Do(func() {
			s.mu.Lock()
			defer s.mu.Unlock()
			if s.busy[tenant]--; s.busy[tenant] <= 0 {
				delete(s.busy, tenant)
			}
		})
	}, true
}

// limitExpensive takes a slot of the tenant's expensive calls for call, when its method is
// expensive; finish gives it back.
func (g *Guard) limitExpensive(call *Call) error {
	if g.expensive == nil || call.Method == nil || !call.Method.Expensive || call.Principal == nil {
		return nil
	}
	release, ok := g.expensive.acquire(call.Principal.TenantID)
	if !ok {
		g.refusals.RateLimited(metrics.BucketExpensive)
		cerr := connect.NewError(connect.CodeResourceExhausted, fmt.Errorf(
			"this tenant already runs %d expensive calls (%s/%s among them) at once (rateLimits.expensiveCallsPerTenant); retry in %ds",
			g.expensive.max, call.Method.Group, call.Method.Name, expensiveRetryAfter))
		cerr.Meta().Set(RetryAfterHeader, strconv.Itoa(expensiveRetryAfter))
		return cerr
	}
	call.release = release
	return nil
}
