package leases

import (
	"context"
	"sync"

	"github.com/google/uuid"
)

// pokes coalesces the placer pokes of a pool. Every leases/create of a pool used to update the
// pool's one row of the placer's queue, and concurrent creates queued on that row's lock. Now a
// create whose pool is being poked leaves it to the caller making that poke, which pokes once
// more when it is done: the last poke still starts after every such create committed, so the
// placer still sees each new lease, with one queue update for the creates of a few milliseconds.
type pokes struct {
	mu sync.Mutex
	// pending holds the pools being poked; true when another poke was asked meanwhile.
	pending map[uuid.UUID]bool
}

// run calls poke for poolID, or has the caller already poking it do so once more.
func (p *pokes) run(ctx context.Context, poolID uuid.UUID, poke func(context.Context, uuid.UUID)) {
	p.mu.Lock()
	if _, busy := p.pending[poolID]; busy {
		p.pending[poolID] = true
		p.mu.Unlock()
		return
	}
	if p.pending == nil {
		p.pending = map[uuid.UUID]bool{}
	}
	p.pending[poolID] = false
	p.mu.Unlock()
	for {
		poke(ctx, poolID)
		p.mu.Lock()
		if !p.pending[poolID] {
			delete(p.pending, poolID)
			p.mu.Unlock()
			return
		}
		p.pending[poolID] = false
		p.mu.Unlock()
	}
}
