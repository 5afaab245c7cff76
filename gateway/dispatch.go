package gateway

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/better-compute/better-compute/gen/db"
	daemonv1 "github.com/better-compute/better-compute/gen/go/bettercompute/daemon/v1"
	"github.com/better-compute/better-compute/internal/command"
	"github.com/better-compute/better-compute/internal/tracing"
)

// dispatchBatch bounds the commands sent in one round.
const dispatchBatch = 1000

// dispatchLoop sends pending commands of connected nodes every DispatchInterval, and at once
// for the nodes and fan-outs poked since the last round (due.go). Every DispatchInterval it also
// looks for the fan-outs with pending commands (OpenFanOuts), so a fan-out whose poke was lost,
// or whose commands wait for earlier ones to finish, goes on.
func (g *Gateway) dispatchLoop(ctx context.Context) {
	tick := time.NewTicker(g.opts.DispatchInterval)
	defer tick.Stop()
	for {
		var nodes, fanOuts []uuid.UUID
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
			nodes, fanOuts = g.connected(), g.due.takeFanOuts()
			if len(nodes) > 0 {
				open, err := db.New(g.opts.Pool).OpenFanOuts(ctx, maxOpenFanOuts)
				if err != nil && ctx.Err() == nil {
					g.log.Warn("find open fan-outs", "err", err)
				}
				fanOuts = append(fanOuts, open...)
			}
		case <-g.due.wake:
			nodes, fanOuts = g.due.take(), g.due.takeFanOuts()
		}
		if err := g.dispatch(ctx, nodes); err != nil && ctx.Err() == nil {
			g.log.Warn("dispatch commands", "err", err)
		}
		if err := g.dispatchFanOuts(ctx, fanOuts); err != nil && ctx.Err() == nil {
			g.log.Warn("dispatch fan-outs", "err", err)
		}
	}
}

// dispatch moves the nodes' pending commands to sent, in one statement for the whole round, and
// queues them on their sessions, at most what each session's queue has room for. A command
// that cannot be queued all the same (the session ended meanwhile) goes back to pending through
// the CommandSweeper's ack timeout, so nothing is lost.
//
// With tracing on, a round that finds commands is a span (gateway.dispatch) with a child span
// for its statement and one per command (gateway.dispatch_command). A round that finds nothing
// records no span, so the 1-second loop does not flood the collector: the spans of the round
// and of its statement are made once the statement has returned commands, back-dated to when
// they started.
func (g *Gateway) dispatch(ctx context.Context, nodes []uuid.UUID) error {
	sessions := make(map[uuid.UUID]*session, len(nodes))
	ids := make([]uuid.UUID, 0, len(nodes))
	rooms := make([]int32, 0, len(nodes))
	for _, id := range nodes {
		s := g.lookup(id)
		if s == nil {
			continue
		}
		room := cap(s.send) - len(s.send)
		if room <= 0 {
			continue
		}
		sessions[id] = s
		ids, rooms = append(ids, id), append(rooms, int32(room))
	}
	if len(ids) == 0 {
		return nil
	}
	start := time.Now()
	sent, err := db.New(g.opts.Pool).ClaimPendingCommands(ctx, db.ClaimPendingCommandsParams{NodeIds: ids, Rooms: rooms, Lim: dispatchBatch})
	claimed := time.Now()
	if err != nil {
		return fmt.Errorf("claim pending commands: %w", err)
	}
	if len(sent) == 0 {
		return nil
	}
	if tracing.Enabled() {
		var span trace.Span
		ctx, span = tracing.Tracer().Start(ctx, "gateway.dispatch", trace.WithTimestamp(start), trace.WithAttributes(
			attribute.String("better_compute.gateway", g.opts.ID),
			attribute.Int("better_compute.commands.sent", len(sent))))
		defer span.End()
		_, stmt := tracing.Tracer().Start(ctx, "ClaimPendingCommands", trace.WithTimestamp(start),
			trace.WithSpanKind(trace.SpanKindClient))
		stmt.End(trace.WithTimestamp(claimed))
	}
	// A node's commands go out in the order they were created (UUIDv7 ids).
	slices.SortFunc(sent, func(a, b db.Command) int { return bytes.Compare(a.ID[:], b.ID[:]) })
	for _, c := range sent {
		g.send(ctx, sessions[c.NodeID], c)
	}
	return nil
}

// noSpan stands in for a span while tracing is off.
var noSpan = trace.SpanFromContext(context.Background())

// send queues one command, just marked sent, on its node's session, and records its dispatch
// latency: from its creation to its sent_at, both read from the database's clock.
func (g *Gateway) send(ctx context.Context, s *session, c db.Command) {
	span := noSpan
	if tracing.Enabled() {
		_, span = tracing.Tracer().Start(ctx, "gateway.dispatch_command", trace.WithAttributes(
			attribute.String("better_compute.command.id", c.ID.String()),
			attribute.String("better_compute.command.type", c.Type),
			attribute.String("better_compute.node.id", c.NodeID.String()),
			attribute.Int("better_compute.command.attempt", int(c.Attempts))))
		defer span.End()
	}
	msg, err := commandMessage(c)
	if err != nil {
		// A row no daemon could run (a type stored before types were checked, a payload that
		// does not decode): fail it now rather than let it wait for its deadline.
		g.log.Error("encode command; recording it as failed", "command_id", c.ID, "err", err)
		span.SetStatus(codes.Error, "encode command: "+err.Error())
		unsendable := pendingResult{sess: s, id: c.ID, errText: "the gateway cannot send this command: " + err.Error()}
		if err := g.recordResults(ctx, []pendingResult{unsendable}); err != nil {
			g.log.Warn("record an unsendable command as failed", "command_id", c.ID, "err", err)
		}
		return
	}
	select {
	case s.send <- msg:
		s.wake()
		sentAt := time.Now()
		if c.SentAt != nil {
			sentAt = *c.SentAt
		}
		g.metrics.ObserveDispatch(sentAt.Sub(c.CreatedAt))
	case <-s.ended:
		span.SetStatus(codes.Error, "the session ended first; the sweeper re-queues the command")
	}
}

// commandMessage is a stored command as the daemon receives it: its payload, stored as the
// JSON of its type's payload message, in the Command's oneof.
func commandMessage(c db.Command) (*daemonv1.SessionResponse, error) {
	payload, err := command.Decode(c.Type, c.Payload)
	if err != nil {
		return nil, err
	}
	m := &daemonv1.Command{
		Id: c.ID.String(), IdempotencyKey: c.IdempotencyKey, Deadline: timestamppb.New(c.Deadline),
	}
	if err := command.SetPayload(m, payload); err != nil {
		return nil, err
	}
	return &daemonv1.SessionResponse{Msg: &daemonv1.SessionResponse_Command{Command: m}}, nil
}

func (g *Gateway) connected() []uuid.UUID {
	g.mu.Lock()
	defer g.mu.Unlock()
	out := make([]uuid.UUID, 0, len(g.sessions))
	for id := range g.sessions {
		out = append(out, id)
	}
	return out
}

// watchLoop, every second, ends sessions of revoked nodes and sessions that a newer one on
// another gateway superseded. Its statements name this gateway, not each node it holds
// (watch.go). The gateway's registration, its heartbeat, is the liveness loop's (liveness.go).
func (g *Gateway) watchLoop(ctx context.Context) {
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for round := 0; ; round++ {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		g.watch(ctx, round%fullWatchEvery == 0)
	}
}

func isNoRows(err error) bool { return errors.Is(err, pgx.ErrNoRows) }
