package tunnels

import (
	"context"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/better-compute/better-compute/client/tunnel"
	"github.com/better-compute/better-compute/gen/db"
	"github.com/better-compute/better-compute/internal/tunnelhop"
)

// The lifetime watcher: while this API process relays tunnels, one goroutine checks them every
// watchInterval, in one query, and ends those whose lease ended (tunnel.CodeLeaseEnded), whose
// node was revoked or retired or whose lease no longer holds the node (tunnel.CodeNodeGone), and
// those tunnels/close asked to close (tunnel.CodeTunnelsClosed); every renewEvery it renews the
// relay lease of their rows. It stops when the last tunnel ends and starts with the next.
// docs/tunnels.md promises an end within about two seconds of its cause: one interval, the
// query and the abort's frames, with room for a loaded database. A lease's end counts from its
// time, not from the placer's record of it (queries/tunnels.sql, TunnelsToEnd).
const (
	watchInterval = 500 * time.Millisecond
	// watchTimeout bounds one pass's statements; past an interval, ticks are only skipped.
	watchTimeout = 2 * time.Second
	renewEvery   = relayLease / 3
	// abortGrace bounds the writes of an abort's frames: a peer that stopped reading (its window
	// full) would otherwise hold the tunnel open. Past it both streams are torn down.
	abortGrace = 3 * time.Second
)

// liveTunnel is a tunnel this process relays, from the spend of its ticket to the record of its
// end.
type liveTunnel struct {
	id uuid.UUID

	mu                 sync.Mutex
	code               tunnel.Code // the first abort's, 0 before one
	reason             string
	relay              *tunnelhop.Relay // set once relaying
	cancelWS, cancelGW func()           // tear the streams down; set once the WebSocket is open
	grace              *time.Timer
}

// abort ends the tunnel with code: the relay sends both ends an Abort frame; before the relay
// runs, the dial to the gateway is cancelled and the handler closes the WebSocket with code. Only
// the first abort counts.
func (l *liveTunnel) abort(code tunnel.Code, reason string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.code != 0 {
		return
	}
	l.code, l.reason = code, reason
	switch {
	case l.relay != nil:
		go l.relay.Abort(code, reason) // it writes to both ends: never under the lock
	case l.cancelGW != nil:
		l.cancelGW()
	}
}

// aborted returns the abort's code and reason, if there was one.
func (l *liveTunnel) aborted() (tunnel.Code, string, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.code, l.reason, l.code != 0
}

// start records how to tear the streams down, once the WebSocket is open; an abort that came
// before cancels the dial at once.
func (l *liveTunnel) start(cancelWS, cancelGW func()) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.cancelWS, l.cancelGW = cancelWS, cancelGW
	if l.code != 0 {
		cancelGW()
	}
}

// relaying records the relay; an abort that came during the dial aborts it at once.
func (l *liveTunnel) relaying(r *tunnelhop.Relay) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.relay = r
	if l.code != 0 {
		go r.Abort(l.code, l.reason)
	}
}

// armGrace starts, once, the grace after which both streams are torn down: an Abort frame is
// being written, and a peer that does not read must not hold it.
func (l *liveTunnel) armGrace() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.grace != nil || l.cancelWS == nil {
		return
	}
	cancelWS, cancelGW := l.cancelWS, l.cancelGW
	l.grace = time.AfterFunc(abortGrace, func() {
		cancelWS()
		cancelGW()
	})
}

// stop releases the grace timer once the tunnel ended.
func (l *liveTunnel) stop() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.grace != nil {
		l.grace.Stop()
	}
}

// register records a tunnel this process is about to relay, and starts the watcher if it is not
// running; false when the process is shutting down.
func (s *Service) register(id uuid.UUID) (*liveTunnel, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closing {
		return nil, false
	}
	l := &liveTunnel{id: id}
	s.live[id] = l
	s.relays.Add(1)
	if !s.watching {
		s.watching = true
		go s.watch()
	}
	return l, true
}

// unregister forgets a tunnel whose end is recorded.
func (s *Service) unregister(l *liveTunnel) {
	l.stop()
	s.mu.Lock()
	delete(s.live, l.id)
	s.mu.Unlock()
	s.relays.Done()
}

// abort ends the tunnel id if this process relays it.
func (s *Service) abort(id uuid.UUID, code tunnel.Code, reason string) {
	s.mu.Lock()
	l := s.live[id]
	s.mu.Unlock()
	if l != nil {
		l.abort(code, reason)
	}
}

// liveIDs lists the tunnels this process relays; when there are none it stops the watcher
// (watching is cleared under the same lock register sets it under).
func (s *Service) liveIDs() []uuid.UUID {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.live) == 0 {
		s.watching = false
		return nil
	}
	ids := make([]uuid.UUID, 0, len(s.live))
	for id := range s.live {
		ids = append(ids, id)
	}
	return ids
}

// watch is the watcher's loop.
func (s *Service) watch() {
	tick := time.NewTicker(watchInterval)
	defer tick.Stop()
	renewed := time.Now()
	for range tick.C {
		ids := s.liveIDs()
		if ids == nil {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), watchTimeout)
		s.check(ctx, ids)
		if time.Since(renewed) >= renewEvery {
			if err := db.New(s.pool).RenewTunnelRelays(ctx, db.RenewTunnelRelaysParams{
				ApiInstance: s.opts.Instance, Ids: ids, LeaseMs: relayLease.Milliseconds(),
			}); err != nil {
				s.log.Warn("renew the relay leases of tunnels", "tunnels", len(ids), "err", err)
			} else {
				renewed = time.Now()
			}
		}
		cancel()
	}
}

// check ends the tunnels among ids that may no longer be open.
func (s *Service) check(ctx context.Context, ids []uuid.UUID) {
	rows, err := db.New(s.pool).TunnelsToEnd(ctx, db.TunnelsToEndParams{ApiInstance: s.opts.Instance, Ids: ids})
	if err != nil {
		s.log.Warn("check open tunnels", "tunnels", len(ids), "err", err)
		return
	}
	for _, r := range rows {
		code, reason := endOf(r)
		s.log.Info("ending a tunnel", "tunnel_id", r.ID, "code", int(code), "reason", reason)
		s.abort(r.ID, code, reason)
	}
}

// endOf is why the watcher ends a tunnel.
func endOf(r db.TunnelsToEndRow) (tunnel.Code, string) {
	switch {
	case r.CloseRequested:
		return tunnel.CodeTunnelsClosed, tunnel.CodeTunnelsClosed.Describe()
	case r.NodeGone:
		return tunnel.CodeNodeGone, "the node was revoked or retired"
	case r.LeaseEnded:
		return tunnel.CodeLeaseEnded, tunnel.CodeLeaseEnded.Describe()
	}
	return tunnel.CodeNodeGone, "the lease no longer holds the node"
}

// CloseAll ends every tunnel this process relays with tunnel.CodeGoingAway and refuses new ones
// (503), then waits until their ends are recorded or ctx ends: for the API's shutdown, which the
// HTTP server's own drain does not cover (a WebSocket is a hijacked connection).
func (s *Service) CloseAll(ctx context.Context) {
	s.mu.Lock()
	s.closing = true
	all := make([]*liveTunnel, 0, len(s.live))
	for _, l := range s.live {
		all = append(all, l)
	}
	s.mu.Unlock()
	for _, l := range all {
		l.abort(tunnel.CodeGoingAway, "the API is shutting down")
	}
	done := make(chan struct{})
	go func() {
		s.relays.Wait()
		close(done)
	}()
	select {
	case <-done:
	case <-ctx.Done():
	}
}
