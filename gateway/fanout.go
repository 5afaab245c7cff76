package gateway

import (
	"context"
	"fmt"
	"slices"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/better-compute/better-compute/gen/db"
)

// fanOutBatch bounds the commands of a fan-out one claim sends: the most max_in_flight allows,
// so a fan-out within its max_in_flight goes out in one claim. A claim's fixed cost (the
// fan-out's lock, its count of what is in flight, a probe per session held) is paid per batch,
// and with claims of 5,000 the second of a 10,000-node fan-out waited behind the first one's
// acks and results (1.2 s instead of 0.1 s).
const fanOutBatch = 10000

// fanOutClaimBytes bounds the payload bytes one claim returns: a fan-out's commands share a
// payload of up to a few hundred KiB, and 10,000 of those in one result would be gigabytes.
const fanOutClaimBytes = 32 << 20

// fanOutClaimLimit is how many commands of a fan-out whose payload is payloadBytes long one
// claim sends.
func fanOutClaimLimit(payloadBytes int64) int32 {
	const rowOverhead = 512 // the command's other columns
	return int32(max(1, min(fanOutBatch, fanOutClaimBytes/(payloadBytes+rowOverhead))))
}

// maxOpenFanOuts bounds the fan-outs one loop round looks at; more wait for the next rounds.
const maxOpenFanOuts = 100

// dispatchFanOuts claims, for each fan-out, its pending commands to the sessions held here with
// room in their queues, and queues them: one statement per fan-out for all those sessions
// (ClaimFanOutCommands), at most fanOutBatch commands, and never more than keeps the fan-out
// within its max_in_flight (across all gateways: the claim holds the fan-out's row). A fan-out
// whose claim filled the batch is due again at once; one held back by max_in_flight is due again
// when one of its commands finishes here (recordResults), or at the next loop round.
func (g *Gateway) dispatchFanOuts(ctx context.Context, fanOuts []uuid.UUID) error {
	if len(fanOuts) == 0 {
		return nil
	}
	slices.SortFunc(fanOuts, func(a, b uuid.UUID) int { return slices.Compare(a[:], b[:]) })
	fanOuts = slices.Compact(fanOuts)
	var errs []error
	for _, f := range fanOuts {
		sessions := map[uuid.UUID]*session{}
		var ids []uuid.UUID
		for _, id := range g.connected() {
			s := g.lookup(id)
			if s == nil || cap(s.send)-len(s.send) <= 0 {
				continue
			}
			sessions[id] = s
			ids = append(ids, id)
		}
		if len(ids) == 0 {
			return nil
		}
		sent, full, err := g.claimFanOut(ctx, f, ids)
		if err != nil {
			errs = append(errs, fmt.Errorf("fan-out %s: %w", f, err))
			continue
		}
		slices.SortFunc(sent, func(a, b db.Command) int { return slices.Compare(a.ID[:], b.ID[:]) })
		for _, c := range sent {
			g.send(ctx, sessions[c.NodeID], c)
		}
		if full {
			g.due.addFanOuts(f)
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("claim fan-out commands: %v", errs)
	}
	return nil
}

// claimFanOut runs LockFanOut and ClaimFanOutCommands in one transaction, and says whether the
// claim filled its batch (so more may be waiting).
func (g *Gateway) claimFanOut(ctx context.Context, fanOut uuid.UUID, nodes []uuid.UUID) (sent []db.Command, full bool, err error) {
	err = pgx.BeginFunc(ctx, g.opts.Pool, func(tx pgx.Tx) error {
		q := db.New(tx)
		f, err := q.LockFanOut(ctx, fanOut)
		if isNoRows(err) {
			return nil
		} else if err != nil {
			return err
		}
		lim := fanOutClaimLimit(f.PayloadBytes)
		sent, err = q.ClaimFanOutCommands(ctx, db.ClaimFanOutCommandsParams{
			FanOutID: fanOut, NodeIds: nodes, Lim: int64(lim), MaxInFlight: int64(f.MaxInFlight),
		})
		full = len(sent) == int(lim)
		return err
	})
	if err != nil {
		return nil, false, err
	}
	return sent, full, nil
}
