package gateway

import (
	"context"
	"time"

	"github.com/google/uuid"

	"github.com/better-compute/better-compute/gen/db"
)

// Acks say that a daemon has a command and started it (sent -> acked). They are written in
// batches, like liveness: at 500 commands a second, a transaction for every ack took as many
// commits as the creates and the results together. An ack only narrows what the command sweeper
// re-queues, so one delayed by a flush, or lost with a stopping gateway, costs at most a
// redelivery that the daemon answers from its record.
const (
	// ackFlushEvery is how long acks wait to be written with others.
	ackFlushEvery = 20 * time.Millisecond
	// ackFlushAt writes the acks at once when this many wait.
	ackFlushAt = 4096
)

type ackRef struct{ node, id uuid.UUID }

// ack queues a daemon's ack of a command for the next flush.
func (g *Gateway) ack(node, id uuid.UUID) {
	g.acksMu.Lock()
	g.acks = append(g.acks, ackRef{node, id})
	full := len(g.acks) >= ackFlushAt
	g.acksMu.Unlock()
	if full {
		select {
		case g.acksFull <- struct{}{}:
		default:
		}
	}
}

// ackLoop writes the queued acks every ackFlushEvery, or at once when ackFlushAt wait, in one
// statement each time; and the last ones when ctx ends.
func (g *Gateway) ackLoop(ctx context.Context) {
	tick := time.NewTicker(ackFlushEvery)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
			g.flushAcks(fctx)
			cancel()
			return
		case <-tick.C:
		case <-g.acksFull:
		}
		g.flushAcks(ctx)
	}
}

func (g *Gateway) flushAcks(ctx context.Context) {
	g.acksMu.Lock()
	acks := g.acks
	g.acks = nil
	g.acksMu.Unlock()
	if len(acks) == 0 {
		return
	}
	nodes, ids := make([]uuid.UUID, len(acks)), make([]uuid.UUID, len(acks))
	for i, a := range acks {
		nodes[i], ids[i] = a.node, a.id
	}
	if err := db.New(g.opts.Pool).AckCommands(ctx, db.AckCommandsParams{NodeIds: nodes, Ids: ids}); err != nil {
		g.log.Warn("record acks", "acks", len(acks), "err", err)
	}
}
