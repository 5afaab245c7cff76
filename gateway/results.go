package gateway

import (
	"context"
	"fmt"
	"time"

	"github.com/google/uuid"

	"github.com/better-compute/better-compute/gen/db"
	"github.com/better-compute/better-compute/internal/command"
	"github.com/better-compute/better-compute/internal/database"
	"github.com/better-compute/better-compute/internal/event"
)

// Results are written in batches: the results the sessions received in the last few
// milliseconds, with their events, in one transaction of two round trips (resultLoop). A
// transaction for every result was, with the acks, most of a command's commits at 500 commands
// a second. A batch the database refuses is written again one result at a time (recordResult),
// which records a result it cannot store as a failure; a result that still cannot be written
// ends its session, so that the daemon, reconnecting, sends it again.
const (
	// resultFlushEvery is how long results wait to be written with others.
	resultFlushEvery = 10 * time.Millisecond
	// resultBatch is the most results a transaction writes.
	resultBatch = 512
	// resultQueue bounds the results waiting: past it, the sessions' receive loops wait, and
	// so do their daemons.
	resultQueue = 8192
	// resultWriters is how many batches are written at once, so that one slow commit does not
	// hold every result back.
	resultWriters = 4
)

// pendingResult is a result received, encoded for the database.
type pendingResult struct {
	sess    *session
	id      uuid.UUID
	success bool
	result  []byte // protojson; nil for none
	errText string
}

// queueResult hands a result to resultLoop, waiting while the queue is full.
func (g *Gateway) queueResult(ctx context.Context, r pendingResult) error {
	select {
	case g.results <- r:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// resultLoop writes the queued results every resultFlushEvery, in batches of resultBatch, and
// the last ones when ctx ends. resultWriters of them run.
func (g *Gateway) resultLoop(ctx context.Context) {
	tick := time.NewTicker(resultFlushEvery)
	defer tick.Stop()
	batch := make([]pendingResult, 0, resultBatch)
	for {
		select {
		case <-ctx.Done():
			fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
			defer cancel()
			for {
				batch = g.takeResults(batch[:0])
				if len(batch) == 0 {
					return
				}
				g.writeResults(fctx, batch)
			}
		case <-tick.C:
		}
		for {
			batch = g.takeResults(batch[:0])
			if len(batch) == 0 {
				break
			}
			g.writeResults(ctx, batch)
		}
	}
}

// takeResults appends to batch the results waiting, up to resultBatch, without waiting.
func (g *Gateway) takeResults(batch []pendingResult) []pendingResult {
	for len(batch) < resultBatch {
		select {
		case r := <-g.results:
			batch = append(batch, r)
		default:
			return batch
		}
	}
	return batch
}

// writeResults records a batch, or, when the database refuses it, each of its results alone.
func (g *Gateway) writeResults(ctx context.Context, batch []pendingResult) {
	err := g.recordResults(ctx, batch)
	if err == nil {
		return
	}
	g.log.Warn("a batch of results was refused; recording them one at a time", "results", len(batch), "err", err)
	for _, r := range batch {
		if err := g.recordOne(ctx, r); err != nil {
			g.log.Warn("record a command result; ending the session so that the daemon sends it again",
				"node_id", r.sess.node, "command_id", r.id, "err", err)
			r.sess.end("the gateway could not record a result")
		}
	}
}

// recordResults finishes the batch's commands with their events in one transaction: BEGIN with
// FinishCommands, then (for collectInventory results) the inventories, then the events with
// COMMIT.
func (g *Gateway) recordResults(ctx context.Context, batch []pendingResult) error {
	p := db.FinishCommandsParams{
		NodeIds: make([]uuid.UUID, len(batch)), Ids: make([]uuid.UUID, len(batch)),
		States: make([]string, len(batch)), Results: make([]string, len(batch)), Errors: make([]string, len(batch)),
	}
	for i, r := range batch {
		p.NodeIds[i], p.Ids[i], p.Results[i], p.Errors[i] = r.sess.node, r.id, string(r.result), r.errText
		p.States[i] = string(command.Failed)
		if r.success {
			p.States[i] = string(command.Succeeded)
		}
	}
	tx, err := database.BeginPipe(ctx, g.opts.Pool)
	if err != nil {
		return fmt.Errorf("finish %d commands: %w", len(batch), err)
	}
	defer tx.End(ctx)
	q := db.New(tx)
	finished, err := q.FinishCommands(ctx, p)
	if err != nil {
		return fmt.Errorf("finish %d commands: %w", len(batch), err)
	}
	var events event.Batch
	for _, c := range finished {
		ref := event.CommandRef{ID: c.ID, NodeID: c.NodeID, Type: string(c.Type)}
		var ev event.Event = event.CommandFailed{CommandRef: ref}
		if c.State == db.CommandState(command.Succeeded) {
			ev = event.CommandSucceeded{CommandRef: ref}
			if c.Type == command.CollectInventory {
				if err := g.recordInventory(ctx, q, c.NodeID, c.Result); err != nil {
					return err
				}
			}
		}
		if err := events.Add(c.TenantID, ev); err != nil {
			return err
		}
	}
	if events.Len() == 0 {
		return nil // every result was a repeat: nothing to commit
	}
	tx.CommitNext()
	if err := events.Emit(ctx, q); err != nil {
		return err
	}
	// A finished command of a fan-out may let another of its commands go out (max_in_flight).
	var fanOuts []uuid.UUID
	for _, c := range finished {
		if c.FanOutID != nil {
			fanOuts = append(fanOuts, *c.FanOutID)
		}
	}
	g.due.addFanOuts(fanOuts...)
	return nil
}
