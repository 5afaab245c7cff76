package gateway

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"math"
	"sync"
	"time"

	"connectrpc.com/connect"
	"github.com/google/uuid"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/better-compute/better-compute/gen/db"
	daemonv1 "github.com/better-compute/better-compute/gen/go/bettercompute/daemon/v1"
	"github.com/better-compute/better-compute/internal/apierr"
	"github.com/better-compute/better-compute/internal/event"
	"github.com/better-compute/better-compute/internal/fleet"
	"github.com/better-compute/better-compute/internal/scrub"
)

// session is one node's live stream on this gateway. Its handler goroutine receives; what the
// gateway sends (commands, tunnel opens) is queued on send and written by a goroutine that runs
// only while the queue has messages (wake), so an idle session costs one goroutine of its own.
type session struct {
	node   uuid.UUID
	tenant uuid.UUID
	id     string
	// send is the queue of messages to the daemon; whoever puts a message on it calls wake.
	send chan *daemonv1.SessionResponse
	// end closes the session with a goodbye reason; it is safe to call more than once.
	end   func(reason string)
	once  sync.Once
	ended chan struct{}

	mu       sync.Mutex
	reason   string // why the session ended
	draining bool   // a goroutine is writing the queue out

	// writeMu makes the stream's writes one at a time; out is nil once the handler has
	// returned, when the stream must not be written any more.
	writeMu sync.Mutex
	out     func(*daemonv1.SessionResponse) error
}

// errSessionClosed is a write after the session's handler returned.
var errSessionClosed = errors.New("the session's stream is closed")

// write sends one message on the stream, unless the handler has returned.
func (s *session) write(msg *daemonv1.SessionResponse) error {
	s.writeMu.Lock()
	defer s.writeMu.Unlock()
	if s.out == nil {
		return errSessionClosed
	}
	return s.out(msg)
}

// close stops every later write, after the one in progress.
func (s *session) close() {
	s.writeMu.Lock()
	s.out = nil
	s.writeMu.Unlock()
}

// wake starts the queue's writer unless it runs already. Call it after putting a message on
// send.
func (s *session) wake() {
	s.mu.Lock()
	start := !s.draining
	s.draining = true
	s.mu.Unlock()
	if start {
		go s.drain()
	}
}

// drain writes the queue out and returns once it is empty. The emptiness is checked again under
// mu, which wake takes after its message is queued, so no message is left without a writer.
func (s *session) drain() {
	for {
		select {
		case msg := <-s.send:
			if err := s.write(msg); err != nil {
				s.end("send failed")
			}
		default:
			s.mu.Lock()
			if len(s.send) == 0 {
				s.draining = false
				s.mu.Unlock()
				return
			}
			s.mu.Unlock()
		}
	}
}

// why is the reason the session ended, "" while it has not.
func (s *session) why() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.reason
}

// sendQueue bounds the messages waiting for a slow daemon; past it, commands wait for the next
// dispatch round. The writer empties it as fast as the connection takes messages, so it need
// not hold more than a burst of commands for one node; every slot is memory in every session.
const sendQueue = 32

// Session serves a node's stream until the node goes away, a newer session supersedes it, the
// node is revoked or the gateway stops.
//
// The handler's goroutine only receives, for as long as the session lasts: the session's start
// (database statements, logging, the welcome) runs on a goroutine of its own that ends when the
// session is open, so that the handler's stack, which every idle session keeps, is not grown by
// it (a stack grown to 16 KiB stays there while its goroutine waits in Receive).
func (s *service) Session(ctx context.Context, stream *connect.BidiStream[daemonv1.SessionRequest, daemonv1.SessionResponse]) error {
	g := s.g
	var (
		open *openSession
		err  error
	)
	onFreshStack(func() { open, err = g.openSession(ctx, stream) })
	if err != nil {
		return err
	}
	sess, sctx := open.sess, open.ctx
	defer onFreshStack(open.close)

	// This goroutine receives; the queue's writer sends (wake). Returning closes the stream.
	goodbye := func() {
		_ = sess.write(&daemonv1.SessionResponse{Msg: &daemonv1.SessionResponse_Goodbye{Goodbye: &daemonv1.Goodbye{Reason: sess.why()}}})
	}
	err = g.receive(sctx, sess, stream)
	switch {
	case connect.CodeOf(err) == connect.CodeResourceExhausted:
		// A message over its limit: tell the node why before ending its session.
		sess.end(reasonOf(err))
		goodbye()
		return err
	case sctx.Err() != nil:
		// Ended on purpose (revoked, superseded, the gateway stopping), which keeps its reason, or
		// with the daemon's connection. Say goodbye if we can; the daemon reconnects (or,
		// revoked, is refused).
		sess.end("the daemon's connection closed")
		goodbye()
		return nil
	case err != nil && !errors.Is(err, context.Canceled):
		sess.end("receive failed")
		return err
	}
	sess.end("daemon closed the session")
	return nil
}

// onFreshStack runs f on a goroutine of its own and waits for it; a panic of f is raised again
// in the caller, as if f had run there (the HTTP server recovers its handlers' panics).
func onFreshStack(f func()) {
	done := make(chan any, 1)
	go func() {
		defer func() { done <- recover() }()
		f()
	}()
	if p := <-done; p != nil {
		panic(p)
	}
}

// openSession is a session that Session opened: its context ends with the session, and close
// undoes what opening did (in reverse), after the session ended.
type openSession struct {
	sess    *session
	ctx     context.Context
	undo    []func()
	undoing sync.Once
}

// close runs the undo steps, last first, once.
func (o *openSession) close() {
	o.undoing.Do(func() {
		for i := len(o.undo) - 1; i >= 0; i-- {
			o.undo[i]()
		}
	})
}

// openSession takes the node's seat, reads its hello, records and claims the session and sends
// the welcome. On an error it undoes what it did.
func (g *Gateway) openSession(ctx context.Context, stream *connect.BidiStream[daemonv1.SessionRequest, daemonv1.SessionResponse]) (_ *openSession, err error) {
	// The daemon sends its hello as it opens the stream: compare its clock with this moment,
	// not with when the hello is read (after the database has answered, seconds later in a
	// reconnect storm).
	opened := time.Now()
	nodeID, err := nodeFrom(ctx)
	if err != nil {
		return nil, err
	}
	release, err := g.seat(nodeID)
	if err != nil {
		return nil, err
	}
	o := &openSession{undo: []func(){release}}
	defer func() {
		if err != nil {
			o.close()
		}
	}()
	q := db.New(g.opts.Pool)
	node, err := q.GetNodeForGateway(ctx, nodeID)
	if err != nil {
		return nil, fmt.Errorf("session of node %s: %w", nodeID, err)
	}
	if node.RevokedAt != nil {
		return nil, apierr.PermissionDenied("node %s is revoked", nodeID)
	}
	first, err := stream.Receive()
	if err != nil {
		if lerr := g.opts.Limits.overReadLimit(err); lerr != nil {
			return nil, lerr
		}
		return nil, fmt.Errorf("session of node %s: receive hello: %w", nodeID, err)
	}
	hello := first.GetHello()
	if hello == nil {
		return nil, apierr.InvalidArgument("hello", "the first message of a session must be a hello")
	}
	if err := g.opts.Limits.checkMessage(first); err != nil {
		return nil, err
	}
	if err := g.recordHello(ctx, q, nodeID, hello); err != nil {
		return nil, fmt.Errorf("record hello of node %s: %w", nodeID, err)
	}
	if g.opts.Wake != nil {
		g.opts.Wake(fleet.KindLiveness)
	}
	sess := &session{
		node: nodeID, tenant: node.TenantID, id: newSessionID(), send: make(chan *daemonv1.SessionResponse, sendQueue),
		ended: make(chan struct{}), out: stream.Send,
	}
	o.sess = sess
	// The hello vouched for the node; from here the session's heartbeats keep the vouch, and its
	// end, whatever ends it, ends the vouch (liveness.go).
	g.live.start(nodeID, sess.id, time.Now())
	o.undo = append(o.undo, func() { g.live.stop(nodeID, sess.id) })
	sctx, cancel := context.WithCancel(ctx)
	o.ctx = sctx
	o.undo = append(o.undo, cancel)
	sess.end = onceReason(sess, cancel)
	// Ending the session (on purpose, or with the daemon's connection) closes the request body,
	// which is what ends the handler's wait in Receive.
	if body, ok := ctx.Value(bodyKey{}).(io.Closer); ok {
		stop := context.AfterFunc(sctx, func() { _ = body.Close() })
		o.undo = append(o.undo, func() { stop() })
	}
	// After the handler returns, the stream is not to be written: wait for a write in progress.
	o.undo = append(o.undo, sess.close)
	if err := q.ClaimSession(ctx, db.ClaimSessionParams{NodeID: nodeID, GatewayID: g.opts.ID, SessionID: sess.id, Transport: string(transportOf(ctx))}); err != nil {
		return nil, fmt.Errorf("claim session of node %s: %w", nodeID, err)
	}
	g.add(sess)
	log := g.log.With("node_id", nodeID, "session_id", sess.id, "transport", transportOf(ctx))
	skew := clockSkew(hello, opened)
	log.Info("session started", "daemon_version", hello.GetDaemonVersion(), "clock_skew", skew)
	if skew > maxClockSkew || skew < -maxClockSkew {
		log.Warn("the daemon's clock is off", "clock_skew", skew)
	}
	o.undo = append(o.undo, func() {
		g.remove(sess)
		ectx, ecancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer ecancel()
		if err := q.EndSession(ectx, db.EndSessionParams{NodeID: nodeID, SessionID: sess.id}); err != nil {
			log.Warn("record session end", "err", err)
		}
		log.Info("session ended", "reason", sess.why())
	})

	if err := sess.write(&daemonv1.SessionResponse{Msg: &daemonv1.SessionResponse_Welcome{Welcome: &daemonv1.Welcome{
		NodeId: nodeID.String(), HeartbeatIntervalSeconds: int32(g.opts.HeartbeatInterval / time.Second),
		ServerTime:     timestamppb.Now(),
		MaxResultBytes: int32(min(g.opts.Limits.ResultBytes, math.MaxInt32)),
		MaxEventBytes:  int32(min(g.opts.Limits.EventBytes, math.MaxInt32)),
	}}}); err != nil {
		return nil, fmt.Errorf("send welcome: %w", err)
	}
	g.Poke(nodeID)
	return o, nil
}

// receive handles the daemon's messages until the stream ends.
func (g *Gateway) receive(ctx context.Context, sess *session, stream *connect.BidiStream[daemonv1.SessionRequest, daemonv1.SessionResponse]) error {
	q := db.New(g.opts.Pool)
	for {
		msg, err := stream.Receive()
		if err != nil {
			if errors.Is(err, context.Canceled) || connect.CodeOf(err) == connect.CodeCanceled {
				return context.Canceled
			}
			if lerr := g.opts.Limits.overReadLimit(err); lerr != nil {
				return lerr
			}
			if connect.CodeOf(err) == connect.CodeInvalidArgument {
				// A message that does not decode (invalid UTF-8 in a string, bad wire format):
				// refused at the edge, and the daemon is told why rather than seeing a bare EOF.
				return err
			}
			return nil // EOF or a broken connection: the daemon reconnects
		}
		if err := g.opts.Limits.checkMessage(msg); err != nil {
			return err
		}
		switch m := msg.Msg.(type) {
		case *daemonv1.SessionRequest_Heartbeat:
			g.live.beat(sess.node, sess.id, time.Now())
		case *daemonv1.SessionRequest_Ack:
			if id, err := uuid.Parse(m.Ack.GetCommandId()); err == nil { // else not one of ours
				g.ack(sess.node, id)
			}
		case *daemonv1.SessionRequest_Result:
			if err := g.finish(ctx, sess, m.Result); err != nil {
				return err
			}
		case *daemonv1.SessionRequest_Event:
			if err := g.event(ctx, q, sess, m.Event); err != nil {
				return err
			}
		case *daemonv1.SessionRequest_GpuHealth:
			if err := g.recordGPUHealth(ctx, q, sess, m.GpuHealth); err != nil {
				return fmt.Errorf("record GPU health: %w", err)
			}
		case *daemonv1.SessionRequest_GpuUsage:
			if err := g.recordGPUUsage(ctx, q, sess, m.GpuUsage); err != nil {
				return fmt.Errorf("record GPU usage: %w", err)
			}
		case *daemonv1.SessionRequest_Hello:
			// A second hello updates the inventory (the daemon re-read it).
			if err := g.recordHello(ctx, q, sess.node, m.Hello); err != nil {
				return fmt.Errorf("record hello: %w", err)
			}
			g.live.start(sess.node, sess.id, time.Now())
		}
	}
}

// recordHello stores what a hello reports: the daemon version and the inventory, with a
// history row and a node.inventory.changed event when the inventory changed (RecordNodeHello
// does it all in one statement). Its text is scrubbed first; a hello whose content PostgreSQL
// still refuses is logged and skipped (the node keeps its previous inventory) rather than
// failing the session, which the daemon would reopen with the same hello.
func (g *Gateway) recordHello(ctx context.Context, q *db.Queries, node uuid.UUID, h *daemonv1.Hello) error {
	scrub.Message(h)
	inventory, err := protojson.Marshal(h.GetInventory())
	if err == nil {
		_, err = q.RecordNodeHello(ctx, db.RecordNodeHelloParams{
			ID: node, DaemonVersion: h.GetDaemonVersion(), Inventory: inventory, GatewayID: g.opts.ID,
		})
	}
	switch {
	case isNoRows(err):
		return nil // the node is gone; the session ends with it
	case err != nil && (unstorable(err) || inventory == nil):
		g.log.Warn("a hello's inventory cannot be stored; keeping the previous one", "node_id", node, "err", err)
		// The node was heard from all the same, and the session vouches for it.
		return q.RecordLiveness(ctx, db.RecordLivenessParams{
			GatewayID: g.opts.ID, Ids: []uuid.UUID{node}, Seen: []time.Time{time.Now()}, Vouch: []bool{true},
		})
	}
	return err
}

// finish queues a result for resultLoop (results.go), which records it once: a result repeated
// after a reconnect finds the command finished and changes nothing. Its text is scrubbed first,
// and a result whose content cannot be encoded or stored is recorded as a failure that says so.
// It returns an error only when ctx ended while the queue was full.
func (g *Gateway) finish(ctx context.Context, sess *session, r *daemonv1.CommandResult) error {
	id, err := uuid.Parse(r.GetCommandId())
	if err != nil {
		return nil
	}
	scrub.Message(r)
	pr := pendingResult{sess: sess, id: id, success: r.GetSuccess(), errText: r.GetError()}
	if r.GetResult() != nil {
		if pr.result, err = protojson.Marshal(r.GetResult()); err != nil {
			g.log.Warn("a command result cannot be encoded; recording the command as failed", "node_id", sess.node, "command_id", id, "err", err)
			pr.success, pr.result, pr.errText = false, nil, "the daemon's result cannot be stored: "+err.Error()
		}
	}
	return g.queueResult(ctx, pr)
}

// recordOne records a result alone (a batch of results.go that the database refused), and a
// result whose content PostgreSQL refuses as a failure that says so.
func (g *Gateway) recordOne(ctx context.Context, r pendingResult) error {
	err := g.recordResults(ctx, []pendingResult{r})
	if unstorable(err) {
		g.log.Warn("a command result cannot be stored; recording the command as failed", "node_id", r.sess.node, "command_id", r.id, "err", err)
		failed := pendingResult{sess: r.sess, id: r.id, errText: "the daemon's result cannot be stored (PostgreSQL refused it, SQLSTATE " + sqlState(err) + ")"}
		err = g.recordResults(ctx, []pendingResult{failed})
	}
	return err
}

// recordInventory stores the inventory a collectInventory command returned, in the transaction
// that records its result, as a hello would: with a history row and a node.inventory.changed
// event when it changed. A result that is not an inventory is logged and leaves the stored one.
func (g *Gateway) recordInventory(ctx context.Context, q *db.Queries, node uuid.UUID, result []byte) error {
	inv := &daemonv1.Inventory{}
	err := protojson.UnmarshalOptions{DiscardUnknown: true}.Unmarshal(result, inv)
	var inventory []byte
	if err == nil {
		scrub.Message(inv)
		inventory, err = protojson.Marshal(inv)
	}
	if err != nil || len(result) == 0 {
		g.log.Warn("a collectInventory result is not an inventory; keeping the stored one", "node_id", node, "err", err)
		return nil
	}
	if _, err := q.RecordNodeInventory(ctx, db.RecordNodeInventoryParams{ID: node, Inventory: inventory}); err != nil && !isNoRows(err) {
		return fmt.Errorf("record the inventory of node %s: %w", node, err)
	}
	return nil
}

// event puts a daemon's event in the outbox. A malformed event (a type that is not
// dot-separated identifiers, data that cannot be encoded or stored) is logged and dropped, not
// fatal to the session.
func (g *Gateway) event(ctx context.Context, q *db.Queries, sess *session, e *daemonv1.Event) error {
	scrub.Message(e)
	if !event.ValidReport(e.GetType()) {
		g.log.Warn("an event with a malformed type was dropped", "node_id", sess.node, "type_bytes", len(e.GetType()))
		return nil
	}
	data, err := protojson.Marshal(e.GetData())
	if err == nil {
		err = event.Emit(ctx, q, sess.tenant, event.NodeReported{Node: sess.node, Report: e.GetType(), Data: data})
		if !unstorable(err) {
			return err
		}
	}
	g.log.Warn("an event that cannot be stored was dropped", "node_id", sess.node, "type", e.GetType(), "err", err)
	return nil
}

// add registers a session, superseding this gateway's older session of the node.
func (g *Gateway) add(s *session) {
	g.mu.Lock()
	old := g.sessions[s.node]
	g.sessions[s.node] = s
	g.mu.Unlock()
	if old != nil {
		old.end("superseded by a newer session")
	}
}

func (g *Gateway) remove(s *session) {
	g.mu.Lock()
	if g.sessions[s.node] == s {
		delete(g.sessions, s.node)
	}
	g.mu.Unlock()
}

func (g *Gateway) lookup(node uuid.UUID) *session {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.sessions[node]
}

// end ends a node's session on this gateway; sessionID "" matches any.
func (g *Gateway) end(node uuid.UUID, sessionID, reason string) {
	if s := g.lookup(node); s != nil && (sessionID == "" || s.id == sessionID) {
		s.end(reason)
	}
}

func (g *Gateway) endAll(reason string) {
	g.mu.Lock()
	all := make([]*session, 0, len(g.sessions))
	for _, s := range g.sessions {
		all = append(all, s)
	}
	g.mu.Unlock()
	for _, s := range all {
		s.end(reason)
	}
}

func onceReason(s *session, cancel context.CancelFunc) func(string) {
	return func(reason string) {
		s.once.Do(func() {
			s.mu.Lock()
			s.reason = reason
			s.mu.Unlock()
			close(s.ended)
			cancel()
		})
	}
}

func newSessionID() string {
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// maxClockSkew is the difference between a daemon's clock and the gateway's past which the
// gateway warns: certificates are backdated by minutes, but logs and results get confusing.
const maxClockSkew = 30 * time.Second

// clockSkew is how far the daemon's clock, sent in its hello, was ahead of the gateway's when
// the stream opened; zero when the hello carries no time.
func clockSkew(h *daemonv1.Hello, opened time.Time) time.Duration {
	if h.GetTime() == nil {
		return 0
	}
	return h.GetTime().AsTime().Sub(opened).Round(time.Millisecond)
}
