package gateway

import (
	"context"

	"github.com/google/uuid"

	"github.com/better-compute/better-compute/gen/db"
)

// claimWindow is how far back, in seconds of the database's clock, a watch round looks for
// sessions claimed on other gateways. Rounds run every second; the overlap lets a claim whose
// statement commits late still be seen, and costs only the re-reading of recent claims.
const claimWindow = 15

// fullWatchEvery is how many watch rounds apart the gateway also reads all of its own session
// rows, to find one whose session is no longer the one held here however it was claimed.
const fullWatchEvery = 5

// watch ends the sessions here whose node was revoked or has a newer session. Its statements are
// set-based: the revoked nodes joined with this gateway's session rows, the sessions claimed
// elsewhere lately and, every fullWatchEvery rounds, this gateway's rows; none sends the ids of
// the nodes held here, which at 10,000 sessions was an array of 10,000 uuids to encode and send
// each second.
func (g *Gateway) watch(ctx context.Context, full bool) {
	// Every session in the snapshot had its claim committed before it was added, so the
	// statements below see it: a row that differs from the snapshot is newer than its session.
	held := g.heldSessions()
	if len(held) == 0 {
		return
	}
	supersede := func(node uuid.UUID, session string) {
		if id, ok := held[node]; ok && id != session {
			g.end(node, id, "superseded by a session on another gateway")
		}
	}
	q := db.New(g.opts.Pool)
	revoked, err := q.RevokedSessionsOf(ctx, g.opts.ID)
	if err != nil {
		g.log.Warn("check revocations", "err", err)
	}
	g.Revoke(revoked...)
	claimed, err := q.SessionsClaimedElsewhere(ctx, db.SessionsClaimedElsewhereParams{GatewayID: g.opts.ID, WindowSeconds: claimWindow})
	if err != nil {
		g.log.Warn("check sessions", "err", err)
	}
	for _, c := range claimed {
		supersede(c.NodeID, c.SessionID)
	}
	if !full {
		return
	}
	rows, err := q.SessionsOfGateway(ctx, g.opts.ID)
	if err != nil {
		g.log.Warn("check sessions", "err", err)
	}
	for _, r := range rows {
		supersede(r.NodeID, r.SessionID)
	}
}

// heldSessions is the session id held here for each node.
func (g *Gateway) heldSessions() map[uuid.UUID]string {
	g.mu.Lock()
	defer g.mu.Unlock()
	held := make(map[uuid.UUID]string, len(g.sessions))
	for node, s := range g.sessions {
		held[node] = s.id
	}
	return held
}
