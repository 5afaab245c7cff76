package gateway

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/better-compute/better-compute/client/tunnel"
	"github.com/better-compute/better-compute/gen/db"
	daemonv1 "github.com/better-compute/better-compute/gen/go/bettercompute/daemon/v1"
	"github.com/better-compute/better-compute/internal/tunnelhop"
)

// Tunnels at the gateway, the middle of a tunnel's path (package tunnel draws it): the API
// streams a tunnel to the control API (serveTunnel); the gateway asks the node's daemon over its
// session to open it (TunnelOpen) and waits for the daemon's own stream on the daemon-facing
// listener (serveDataPlane); then it relays frames between the two with tunnelhop.Relay. A tunnel
// lives only in this process and only as long as both streams and the node's session here:
// nothing about it is stored, and the API learns how it ended from the frames.

// abortGrace bounds each write once a tunnel is aborted (guardedWriter): a peer that stopped
// reading (its window full) would otherwise hold the abort, and with it the handlers and the
// shutdown, until it reads again. Past it that peer's stream is reset instead.
const abortGrace = 3 * time.Second

// tunnelStream is the content type of both tunnel routes' bodies: frames (tunnel.AppendFrame).
const tunnelStream = "application/octet-stream"

// pendingTunnel is a tunnel this gateway asked a daemon to open, from the control handler's
// registration to its return.
type pendingTunnel struct {
	id, node uuid.UUID
	port     int
	// arrive carries the daemon's stream from the data-plane handler that claimed the tunnel,
	// once: it is buffered, and claimed guards it.
	arrive chan *nodeStream

	// claimed and abandoned are under Gateway.tunnelsMu: a data-plane stream claimed the tunnel,
	// or the control handler stopped waiting for one. Either refuses later claims.
	claimed, abandoned bool

	mu    sync.Mutex
	abort func(tunnel.Code, string) // set once relaying
	ended bool                      // the relay returned: abort does nothing, and must not
}

// nodeStream is a daemon's data-plane stream, handed by its handler to the control handler.
type nodeStream struct {
	stream *tunnel.ByteStream
	w      *guardedWriter
	// done is closed by the control handler once the relay ended: the data-plane handler, which
	// owns the stream's request and response, may return only then.
	done chan struct{}
}

// serveTunnel is the control API's tunnel route, POST tunnelhop.ControlPath (internal identities
// only, checked by ControlHandler): the API's stream of one tunnel to a port on a node whose
// session this gateway holds. Its contract, which the API's dialler (internal/tunnelhop/dial.go)
// relies on:
//
//   - The request names the tunnel with the header tunnelhop.HeaderOpen, a protobuf
//     bettercompute.gateway.v1.OpenTunnelRequest (proto/bettercompute/gateway/v1/control.proto):
//     tunnel_id (a UUID, unique per tunnel), node_id (the node's UUID) and port (1 to 65535). A
//     missing or malformed header is 400 naming the header, a bad field 400 naming the field.
//   - 503 when this gateway holds no session of the node or is shutting down, and 409 when a
//     tunnel of that id is already pending or open here: nothing was asked of the daemon.
//   - 503 too when the node's session here ended before its daemon answered, and 504 when the
//     daemon did not open its data-plane stream within the open timeout (tunnelhop.OpenTimeout
//     unless Options.TunnelOpenTimeout says otherwise). Both mean the node is offline to the
//     API (tunnel.CodeNodeOffline).
//   - 200 is written and flushed only once the daemon's stream arrived, so the API starts
//     relaying on it. From then on the request body carries the frames towards the node and the
//     response body (Content-Type application/octet-stream) the frames from it, each flushed as
//     it is relayed. A daemon's refusal (port not allowed, nothing listens) is an Abort frame
//     after the 200. The tunnel ends with CloseWrite frames both ways (the response then ends),
//     or with an Abort frame: tunnel.CodeGatewayLost when the daemon's stream breaks or the
//     node's session here ends, tunnel.CodeGoingAway when the gateway stops, or the code of the
//     Abort frame an end sent. A response that ends without either is a lost gateway.
//
// Refusals carry a text/plain reason. The route is full duplex and HTTP/2 only (505 otherwise);
// the control server's read timeout does not apply to it.
func (g *Gateway) serveTunnel(w http.ResponseWriter, r *http.Request) {
	if !http2Only(w, r) {
		return
	}
	id, node, port, err := tunnelOpening(r.Header)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	rc := http.NewResponseController(w)
	// The control server's timeouts bound its small unary calls; a tunnel lasts as long as it is
	// used (the API enforces its idle timeout, HTTP/2 pings find a dead peer).
	_ = rc.SetReadDeadline(time.Time{})
	_ = rc.SetWriteDeadline(time.Time{})
	sess := g.lookup(node)
	if sess == nil {
		http.Error(w, fmt.Sprintf("node %s has no session on this gateway", node), http.StatusServiceUnavailable)
		return
	}
	t, status, reason := g.pendTunnel(id, node, port)
	if t == nil {
		http.Error(w, reason, status)
		return
	}
	defer g.dropTunnel(t)
	log := g.log.With("tunnel_id", id, "node_id", node, "port", port)
	asked := time.Now()
	ns, status, reason := g.awaitNode(r.Context(), sess, t)
	if ns == nil {
		log.Info("tunnel not opened", "status", status, "reason", reason)
		http.Error(w, reason, status)
		return
	}
	defer close(ns.done)

	g.openTunnels.Add(1) // counted before the API can see the 200
	defer g.openTunnels.Add(-1)
	w.Header().Set("Content-Type", tunnelStream)
	w.WriteHeader(http.StatusOK)
	_ = rc.Flush() // an API that went away is found by the relay at once
	aw := &guardedWriter{w: w, rc: rc}
	api := tunnel.NewByteStream(r.Body, aw, aw.Flush, nil, r.Body.Close)
	relay := tunnelhop.NewRelay(api, ns.stream, tunnel.CodeGatewayLost, tunnel.CodeGatewayLost)
	g.startRelay(t, func(code tunnel.Code, reason string) {
		aw.abort()
		ns.w.abort()
		relay.Abort(code, reason)
	})
	log.Info("tunnel opened", "open_latency", time.Since(asked))

	// The node's session ending here ends its tunnels: the daemon reconnects elsewhere, or was
	// revoked or superseded.
	var watch sync.WaitGroup
	watch.Go(func() {
		select {
		case <-sess.ended:
			t.stop(tunnel.CodeGatewayLost, "the node's session ended: "+sess.why())
		case <-relay.Done():
		}
	})
	code, why := relay.Run()
	// No abort may touch the response once the handler returns.
	t.mu.Lock()
	t.ended = true
	t.mu.Unlock()
	watch.Wait()
	log.Info("tunnel ended", "code", int(code), "reason", why,
		"bytes_to_node", relay.AToB.Load(), "bytes_from_node", relay.BToA.Load(), "duration", time.Since(asked))
}

// http2Only refuses a tunnel stream over HTTP/1.1 with 505: its full duplex is fragile there (an
// HTTP/1.1 request body cannot be closed while a read waits on it, so an abort would wait for
// the peer).
func http2Only(w http.ResponseWriter, r *http.Request) bool {
	if r.ProtoMajor == 2 {
		return true
	}
	http.Error(w, "tunnel streams need HTTP/2", http.StatusHTTPVersionNotSupported)
	return false
}

// guardedWriter is a tunnel's response body, which an abort can unstick: once abort is called,
// the write in progress and every later one may take at most abortGrace, after which the
// stream is reset (its write deadline). Writes that do not wait are untouched, so the peer
// that still reads gets its Abort frame even when the other one stalls.
type guardedWriter struct {
	w  io.Writer
	rc *http.ResponseController

	mu       sync.Mutex
	busy     bool // a write or flush is in progress
	aborting bool
}

func (g *guardedWriter) Write(p []byte) (int, error) {
	g.begin()
	defer g.done()
	return g.w.Write(p)
}

// Flush pushes the written bytes to the peer (waiting for its window).
func (g *guardedWriter) Flush() error {
	g.begin()
	defer g.done()
	return g.rc.Flush()
}

func (g *guardedWriter) begin() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.busy = true
	if g.aborting {
		_ = g.rc.SetWriteDeadline(time.Now().Add(abortGrace))
	}
}

func (g *guardedWriter) done() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.busy = false
}

// abort bounds the write in progress and the ones to come. Call it only while the handler that
// owns the response runs.
func (g *guardedWriter) abort() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.aborting = true
	if g.busy {
		_ = g.rc.SetWriteDeadline(time.Now().Add(abortGrace))
	}
}

// tunnelOpening reads and checks the control route's OpenTunnelRequest (tunnelhop.HeaderOpen). Its
// errors name the header, or the message's field at fault (as apierr's field paths do).
func tunnelOpening(h http.Header) (id, node uuid.UUID, port int, err error) {
	req, err := tunnelhop.DecodeOpen(h.Get(tunnelhop.HeaderOpen))
	if err != nil {
		return id, node, 0, fmt.Errorf("%s header: %w", tunnelhop.HeaderOpen, err)
	}
	if id, err = uuid.Parse(req.GetTunnelId()); err != nil {
		return id, node, 0, fmt.Errorf("tunnel_id: must be the tunnel's UUID, got %q", req.GetTunnelId())
	}
	if node, err = uuid.Parse(req.GetNodeId()); err != nil {
		return id, node, 0, fmt.Errorf("node_id: must be the node's UUID, got %q", req.GetNodeId())
	}
	if p := req.GetPort(); p < 1 || p > 65535 {
		return id, node, 0, fmt.Errorf("port: must be 1 to 65535, got %d", p)
	}
	return id, node, int(req.GetPort()), nil
}

// pendTunnel registers a tunnel before its daemon is asked, so that the daemon's stream, however
// quick, finds it; nil with a status and reason when it may not be opened.
func (g *Gateway) pendTunnel(id, node uuid.UUID, port int) (*pendingTunnel, int, string) {
	g.tunnelsMu.Lock()
	defer g.tunnelsMu.Unlock()
	if g.tunnelsClosed {
		return nil, http.StatusServiceUnavailable, "the gateway is shutting down"
	}
	if _, ok := g.tunnels[id]; ok {
		return nil, http.StatusConflict, fmt.Sprintf("tunnel %s is already pending or open on this gateway", id)
	}
	t := &pendingTunnel{id: id, node: node, port: port, arrive: make(chan *nodeStream, 1)}
	g.tunnels[id] = t
	return t, 0, ""
}

// dropTunnel forgets a tunnel once its control handler returns.
func (g *Gateway) dropTunnel(t *pendingTunnel) {
	g.tunnelsMu.Lock()
	defer g.tunnelsMu.Unlock()
	if g.tunnels[t.id] == t {
		delete(g.tunnels, t.id)
	}
}

// awaitNode asks the daemon, over its session, to open the tunnel and waits for its stream, at
// most the open timeout. Without one it returns the status and reason to refuse the API with.
func (g *Gateway) awaitNode(ctx context.Context, sess *session, t *pendingTunnel) (*nodeStream, int, string) {
	timer := time.NewTimer(g.opts.TunnelOpenTimeout)
	defer timer.Stop()
	give := func(status int, reason string) (*nodeStream, int, string) {
		// A stream that arrived as the wait ended is relayed all the same: its end (the
		// session's, the API's) ends the relay at once.
		if ns := g.abandon(t); ns != nil {
			return ns, 0, ""
		}
		return nil, status, reason
	}
	late := func() (*nodeStream, int, string) {
		return give(http.StatusGatewayTimeout, fmt.Sprintf("node %s did not open the tunnel within %v", t.node, g.opts.TunnelOpenTimeout))
	}
	gone := func() (*nodeStream, int, string) {
		return give(http.StatusServiceUnavailable, "the node's session ended: "+sess.why())
	}
	open := &daemonv1.SessionResponse{Msg: &daemonv1.SessionResponse_TunnelOpen{TunnelOpen: &daemonv1.TunnelOpen{
		TunnelId: t.id.String(), Port: int32(t.port),
	}}}
	// The session's queue has the stream's single writer: queue the message for it.
	select {
	case sess.send <- open:
		sess.wake()
	case <-sess.ended:
		return gone()
	case <-timer.C:
		return late()
	case <-g.tunnelsClosing:
		return give(http.StatusServiceUnavailable, "the gateway is shutting down")
	case <-ctx.Done():
		return give(http.StatusServiceUnavailable, "the caller went away")
	}
	select {
	case ns := <-t.arrive:
		return ns, 0, ""
	case <-sess.ended:
		return gone()
	case <-timer.C:
		return late()
	case <-g.tunnelsClosing:
		return give(http.StatusServiceUnavailable, "the gateway is shutting down")
	case <-ctx.Done():
		return give(http.StatusServiceUnavailable, "the caller went away")
	}
}

// abandon stops the wait for a tunnel's data-plane stream: later claims are refused, and a
// stream that claimed it already is returned (its handler hands it over right after its
// headers).
func (g *Gateway) abandon(t *pendingTunnel) *nodeStream {
	g.tunnelsMu.Lock()
	t.abandoned = true
	claimed := t.claimed
	g.tunnelsMu.Unlock()
	if claimed {
		return <-t.arrive
	}
	return nil
}

// pendingFor says whether a tunnel waits for node's stream, without claiming it.
func (g *Gateway) pendingFor(id, node uuid.UUID) bool {
	g.tunnelsMu.Lock()
	defer g.tunnelsMu.Unlock()
	t := g.tunnels[id]
	return t != nil && t.node == node && !t.claimed && !t.abandoned
}

// claim takes a tunnel waiting for node's stream, once; nil when there is none.
func (g *Gateway) claim(id, node uuid.UUID) *pendingTunnel {
	g.tunnelsMu.Lock()
	defer g.tunnelsMu.Unlock()
	t := g.tunnels[id]
	if t == nil || t.node != node || t.claimed || t.abandoned {
		return nil
	}
	t.claimed = true
	return t
}

// startRelay records a tunnel's relay as open with the way to abort it, and aborts it at once
// when the gateway stopped taking tunnels meanwhile.
func (g *Gateway) startRelay(t *pendingTunnel, abort func(tunnel.Code, string)) {
	g.tunnelsMu.Lock()
	t.mu.Lock()
	t.abort = abort
	t.mu.Unlock()
	closed := g.tunnelsClosed
	g.tunnelsMu.Unlock()
	if closed {
		t.stop(tunnel.CodeGoingAway, "the gateway is shutting down")
	}
}

// stop aborts a relaying tunnel; it does nothing before the relay starts (the control handler
// watches for that itself) or after it ended.
func (t *pendingTunnel) stop(code tunnel.Code, reason string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.abort != nil && !t.ended {
		t.abort(code, reason)
	}
}

// closeTunnels stops taking tunnels and aborts the open ones with code: the gateway is going
// away, and the API tells the clients so. It may be called more than once.
func (g *Gateway) closeTunnels(code tunnel.Code, reason string) {
	g.tunnelsMu.Lock()
	if !g.tunnelsClosed {
		g.tunnelsClosed = true
		close(g.tunnelsClosing)
	}
	all := make([]*pendingTunnel, 0, len(g.tunnels))
	for _, t := range g.tunnels {
		all = append(all, t)
	}
	g.tunnelsMu.Unlock()
	// Each abort may wait up to abortGrace for a stalled peer: abort them together.
	var wg sync.WaitGroup
	for _, t := range all {
		wg.Go(func() { t.stop(code, reason) })
	}
	wg.Wait()
}

// Tunnels is the number of tunnels this gateway relays now.
func (g *Gateway) Tunnels() int { return int(g.openTunnels.Load()) }

// serveDataPlane is the daemon-facing route POST tunnelhop.DataPlanePath + {tunnel id}: a daemon's
// stream of a tunnel it was asked to open (TunnelOpen) on its session here. Its contract, which
// the daemon relies on:
//
//   - 401 without the node's client certificate; 403 when the node is revoked (or unknown), as
//     Session refuses it.
//   - 404 unless that tunnel waits on this gateway for this node's stream: the tunnel id is
//     unknown, another node's, already claimed by a stream, or its wait ended (the open
//     timeout, the API gave up). Nothing is relayed.
//   - 200, written and flushed at once: the tunnel is matched. The request body carries the
//     frames from the node (a refusal is one Abort frame: tunnel.CodePortRefused,
//     tunnel.CodeDialFailed), the response body (Content-Type application/octet-stream) the
//     frames towards it, each flushed as it is relayed. The tunnel ends with CloseWrite frames
//     both ways (the response then ends) or with an Abort frame; a response that ends without
//     either is a lost gateway.
//
// The handler runs until the relay ends.
func (g *Gateway) serveDataPlane(w http.ResponseWriter, r *http.Request) {
	if !http2Only(w, r) {
		return
	}
	node, err := nodeFrom(r.Context())
	if err != nil {
		http.Error(w, "this route needs the node's client certificate", http.StatusUnauthorized)
		return
	}
	id, err := uuid.Parse(r.PathValue("id"))
	if err != nil || !g.pendingFor(id, node) {
		http.Error(w, "no tunnel waits for this node's stream on this gateway", http.StatusNotFound)
		return
	}
	n, err := db.New(g.opts.Pool).GetNodeForGateway(r.Context(), node)
	switch {
	case isNoRows(err):
		http.Error(w, fmt.Sprintf("node %s does not exist", node), http.StatusForbidden)
		return
	case err != nil:
		g.log.Warn("check a tunnel's node", "node_id", node, "tunnel_id", id, "err", err)
		http.Error(w, "the gateway cannot check the node now", http.StatusServiceUnavailable)
		return
	case n.RevokedAt != nil:
		http.Error(w, fmt.Sprintf("node %s is revoked", node), http.StatusForbidden)
		return
	}
	t := g.claim(id, node)
	if t == nil {
		http.Error(w, "no tunnel waits for this node's stream on this gateway", http.StatusNotFound)
		return
	}
	rc := http.NewResponseController(w)
	w.Header().Set("Content-Type", tunnelStream)
	w.WriteHeader(http.StatusOK)
	_ = rc.Flush() // a daemon that went away is found by the relay at once
	nw := &guardedWriter{w: w, rc: rc}
	ns := &nodeStream{stream: tunnel.NewByteStream(r.Body, nw, nw.Flush, nil, r.Body.Close), w: nw, done: make(chan struct{})}
	t.arrive <- ns // buffered, and claimed once
	<-ns.done
}
