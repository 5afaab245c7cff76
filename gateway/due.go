package gateway

import (
	"sync"

	"github.com/google/uuid"
)

// dueNodes is the set of connected nodes whose pending commands the dispatch loop sends at its
// next round. Pokes add to it rather than queue: however many pokes arrive while a round runs,
// the next round dispatches each node once, and a poke is never dropped for want of room.
//
// It also holds the fan-outs (commands/fanOut) to dispatch for: a fan-out's poke names the
// fan-out, not its nodes, and the round claims its pending commands for every session held here
// in one statement (dispatchFanOut).
type dueNodes struct {
	mu      sync.Mutex
	nodes   map[uuid.UUID]struct{}
	fanOuts map[uuid.UUID]struct{}
	wake    chan struct{} // holds a token while nodes or fanOuts is not empty
}

func newDueNodes() *dueNodes {
	return &dueNodes{nodes: map[uuid.UUID]struct{}{}, fanOuts: map[uuid.UUID]struct{}{}, wake: make(chan struct{}, 1)}
}

// addFanOuts marks the fan-outs due and wakes the loop.
func (d *dueNodes) addFanOuts(ids ...uuid.UUID) {
	if len(ids) == 0 {
		return
	}
	d.mu.Lock()
	for _, id := range ids {
		d.fanOuts[id] = struct{}{}
	}
	d.mu.Unlock()
	select {
	case d.wake <- struct{}{}:
	default:
	}
}

// takeFanOuts empties the set of due fan-outs and returns what it held.
func (d *dueNodes) takeFanOuts() []uuid.UUID {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := make([]uuid.UUID, 0, len(d.fanOuts))
	for id := range d.fanOuts {
		out = append(out, id)
	}
	clear(d.fanOuts)
	return out
}

// add marks the nodes due and wakes the loop.
func (d *dueNodes) add(ids ...uuid.UUID) {
	if len(ids) == 0 {
		return
	}
	d.mu.Lock()
	for _, id := range ids {
		d.nodes[id] = struct{}{}
	}
	d.mu.Unlock()
	select {
	case d.wake <- struct{}{}:
	default: // a token is already there
	}
}

// take empties the set and returns what it held.
func (d *dueNodes) take() []uuid.UUID {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := make([]uuid.UUID, 0, len(d.nodes))
	for id := range d.nodes {
		out = append(out, id)
	}
	clear(d.nodes)
	return out
}

// Poke asks for the nodes' pending commands to be sent now rather than at the next loop.
func (g *Gateway) Poke(nodeIDs ...uuid.UUID) {
	g.due.add(nodeIDs...)
}

// PokeFanOuts asks for the fan-outs' pending commands to the nodes held here to be sent now
// rather than at the next loop.
func (g *Gateway) PokeFanOuts(fanOutIDs ...uuid.UUID) {
	g.due.addFanOuts(fanOutIDs...)
}
