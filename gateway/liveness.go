package gateway

import (
	"context"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/better-compute/better-compute/gen/db"
)

// Liveness costs the database nothing per heartbeat. The gateway vouches for the nodes whose
// sessions it holds and whose daemons keep heartbeating: node_liveness names it, and while its
// own heartbeat (gateways.heartbeat_at, every half heartbeat interval: 5 s) stays fresh, those nodes count as heard from
// (the node_seen view). It writes a node's row only when that changes: at hello (the hello's
// own statement), when the daemon's heartbeats stop for staleAfter, when they resume, and when
// the session ends, all the changes of a round in one statement. A gateway that dies stops
// heartbeating, so the nodes it vouched for go stale within the liveness threshold as if their
// own heartbeats had stopped then.

// staleAfter is how long a held session's daemon may go unheard before the gateway stops
// vouching for it: two heartbeats missed. With the round every half interval, a vouch ends at
// most 2.5 intervals after the last heartbeat, well within the default liveness threshold of
// three intervals, so a silent daemon goes offline as it did when every heartbeat was written.
func (g *Gateway) staleAfter() time.Duration { return 2 * g.opts.HeartbeatInterval }

// liveness is what the gateway knows of its sessions' heartbeats and what it vouches for.
type liveness struct {
	mu    sync.Mutex
	held  map[uuid.UUID]*heard
	ended map[uuid.UUID]time.Time // vouched sessions ended since the last round: their last beat
}

// heard is a held session's latest heartbeat and whether node_liveness has the gateway's vouch.
type heard struct {
	session string
	at      time.Time
	vouched bool
}

// livenessChange is one node's row of a round's RecordLiveness.
type livenessChange struct {
	node  uuid.UUID
	seen  time.Time
	vouch bool
	ended bool
}

func newLiveness() *liveness {
	return &liveness{held: map[uuid.UUID]*heard{}, ended: map[uuid.UUID]time.Time{}}
}

// start records a session whose hello the gateway just wrote with its vouch.
func (l *liveness) start(node uuid.UUID, session string, at time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.held[node] = &heard{session: session, at: at, vouched: true}
	delete(l.ended, node)
}

// beat records a heartbeat of the session.
func (l *liveness) beat(node uuid.UUID, session string, at time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if h := l.held[node]; h != nil && h.session == session && at.After(h.at) {
		h.at = at
	}
}

// stop forgets an ended session; if the gateway vouched for it, the next round ends the vouch.
func (l *liveness) stop(node uuid.UUID, session string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	h := l.held[node]
	if h == nil || h.session != session {
		return // a newer session of the node took its place
	}
	delete(l.held, node)
	if h.vouched {
		l.ended[node] = h.at
	}
}

// changes takes a round's changes: vouches to end (sessions ended, daemons silent since before
// now-stale) and to start again (a silent daemon heard from again). The caller writes them
// and, if that fails, gives them back with undo.
func (l *liveness) changes(now time.Time, stale time.Duration) []livenessChange {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make([]livenessChange, 0, len(l.ended))
	for node, at := range l.ended {
		out = append(out, livenessChange{node: node, seen: at, ended: true})
	}
	clear(l.ended)
	for node, h := range l.held {
		silent := now.Sub(h.at) > stale
		if h.vouched == !silent {
			continue
		}
		h.vouched = !silent
		out = append(out, livenessChange{node: node, seen: h.at, vouch: h.vouched})
	}
	return out
}

// undo gives back changes that were not written, so the next round writes them, unless a
// newer session or change superseded them meanwhile.
func (l *liveness) undo(cs []livenessChange) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, c := range cs {
		h := l.held[c.node]
		switch {
		case c.ended && h == nil:
			if _, ok := l.ended[c.node]; !ok {
				l.ended[c.node] = c.seen
			}
		case !c.ended && h != nil && h.vouched == c.vouch:
			h.vouched = !c.vouch
		}
	}
}

// livenessLoop, every half heartbeat interval, writes the round's changes of vouching and then
// the gateway's own heartbeat, which vouches for the rest. The heartbeat has this loop to itself
// (no other statement waits before it), so a busy gateway or database delays it by a statement
// at most, far within the liveness threshold.
func (g *Gateway) livenessLoop(ctx context.Context) {
	tick := time.NewTicker(g.opts.HeartbeatInterval / 2)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
			g.flushLiveness(ctx)
			if err := g.register(ctx); err != nil {
				g.log.Warn("gateway heartbeat", "err", err)
			}
		}
	}
}

// flushLiveness writes the changes of vouching since the last round in one statement.
func (g *Gateway) flushLiveness(ctx context.Context) {
	cs := g.live.changes(time.Now(), g.staleAfter())
	if len(cs) == 0 {
		return
	}
	p := db.RecordLivenessParams{
		GatewayID: g.opts.ID,
		Ids:       make([]uuid.UUID, len(cs)), Seen: make([]time.Time, len(cs)), Vouch: make([]bool, len(cs)),
	}
	for i, c := range cs {
		p.Ids[i], p.Seen[i], p.Vouch[i] = c.node, c.seen, c.vouch
	}
	if err := db.New(g.opts.Pool).RecordLiveness(ctx, p); err != nil {
		g.live.undo(cs)
		g.log.Warn("write liveness", "nodes", len(cs), "err", err)
	}
}

// releaseVouches ends every vouch of this gateway's id: at start, those a previous process of
// the same id left (it may have died), and when it stops, those its sessions' ends did not.
func (g *Gateway) releaseVouches(ctx context.Context) error {
	_, err := db.New(g.opts.Pool).ReleaseGatewayVouches(ctx, g.opts.ID)
	return err
}
