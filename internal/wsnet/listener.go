// Package wsnet carries byte streams over WebSockets, so that a protocol made for a TCP
// connection (the daemons' TLS and HTTP/2) passes HTTP proxies, TLS-inspecting middleboxes and
// load balancers that speak only HTTP. A Listener is a net.Listener whose connections are the
// WebSocket upgrades its ServeHTTP accepts; Dial opens one through the standard proxy
// environment. Each Write is one binary message; the stream inside is opaque to this package,
// which is why a TLS session inside keeps its end-to-end identity whatever the proxies do to the
// outer connection.
package wsnet

import (
	"context"
	"net"
	"net/http"
	"strings"
	"sync"

	"github.com/coder/websocket"
)

// Subprotocol names the daemon protocol's byte stream; both sides insist on it, so a
// WebSocket endpoint of another kind is never mistaken for a gateway.
const Subprotocol = "bettercompute.daemon.v1"

// DefaultPath is where gateways accept daemons' WebSockets unless configured otherwise.
const DefaultPath = "/bettercompute.daemon.v1/websocket"

// DefaultBacklog is how many upgraded connections may wait for Accept.
const DefaultBacklog = 128

// Conn is a connection a Listener accepted: a net.Conn over one WebSocket. Its type tells the
// server which transport a connection came over (see Over).
type Conn struct {
	net.Conn
	closeOnce sync.Once
	closed    chan struct{}
}

// Close closes the WebSocket (a normal closure) and ends the upgrade's handler.
func (c *Conn) Close() error {
	var err error
	c.closeOnce.Do(func() {
		err = c.Conn.Close()
		close(c.closed)
	})
	return err
}

// Over reports whether c, or the connection it wraps (a *tls.Conn's, through NetConn), came
// from a Listener.
func Over(c net.Conn) bool {
	for c != nil {
		if _, ok := c.(*Conn); ok {
			return true
		}
		inner, ok := c.(interface{ NetConn() net.Conn })
		if !ok {
			return false
		}
		c = inner.NetConn()
	}
	return false
}

// Listener hands out the WebSockets its ServeHTTP upgrades. Mount it on an HTTP server (with
// or without TLS: the stream inside brings its own) and serve another server on it.
type Listener struct {
	addr  net.Addr
	conns chan *Conn

	// ctx bounds every connection: Shutdown cancels it.
	ctx    context.Context
	cancel context.CancelFunc

	closeOnce sync.Once
	done      chan struct{} // closed by Close: no more Accepts
}

// NewListener returns a Listener reporting addr (the HTTP server's) as its address, holding at
// most backlog upgraded connections not yet accepted (DefaultBacklog when not positive).
func NewListener(addr net.Addr, backlog int) *Listener {
	if backlog <= 0 {
		backlog = DefaultBacklog
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &Listener{addr: addr, conns: make(chan *Conn, backlog), ctx: ctx, cancel: cancel, done: make(chan struct{})}
}

// ServeHTTP upgrades a GET of Subprotocol to a WebSocket and queues it for Accept; it returns
// when the connection closes. Everything is checked before the upgrade is answered: another
// method is refused with 405, a request that does not offer Subprotocol with 400, and one while
// the backlog is full, or after Close, with 503.
func (l *Listener) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet {
		w.Header().Set("Allow", http.MethodGet)
		http.Error(w, "a WebSocket upgrade is a GET", http.StatusMethodNotAllowed)
		return
	}
	if !offers(r, Subprotocol) {
		http.Error(w, "subprotocol "+Subprotocol+" is required", http.StatusBadRequest)
		return
	}
	select {
	case <-l.done:
		http.Error(w, "not accepting connections", http.StatusServiceUnavailable)
		return
	default:
	}
	if len(l.conns) == cap(l.conns) {
		http.Error(w, "too many connections waiting", http.StatusServiceUnavailable)
		return
	}
	ws, err := websocket.Accept(w, r, &websocket.AcceptOptions{
		Subprotocols: []string{Subprotocol},
		// No browser holds a credential for this endpoint: the only one is the client
		// certificate inside, which a page on another origin does not have.
		InsecureSkipVerify: true,
		// The stream inside is TLS: it does not compress.
		CompressionMode: websocket.CompressionDisabled,
	})
	if err != nil {
		return // Accept answered the request
	}
	c := &Conn{Conn: websocket.NetConn(l.ctx, ws, websocket.MessageBinary), closed: make(chan struct{})}
	select {
	case l.conns <- c:
	default: // the backlog filled since the check
		_ = ws.Close(websocket.StatusTryAgainLater, "too many connections waiting")
		return
	}
	// A Close since the check above drained the backlog before c was in it: drain it again, or c
	// would wait there, never accepted and never closed.
	select {
	case <-l.done:
		l.drain()
	default:
	}
	// The request's context ends with this handler; the connection's is the listener's.
	select {
	case <-c.closed:
	case <-l.ctx.Done():
		_ = c.Close()
	}
}

// Accept waits for the next upgraded connection; after Close it returns net.ErrClosed.
func (l *Listener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.done:
		return nil, net.ErrClosed
	}
}

// Close stops accepting: upgrades are refused and Accept returns net.ErrClosed. Connections
// already accepted go on (a server's graceful shutdown closes its listeners first, then drains
// them), and those queued but not accepted are closed.
func (l *Listener) Close() error {
	l.closeOnce.Do(func() {
		close(l.done)
		l.drain()
	})
	return nil
}

// drain closes the connections queued and not accepted.
func (l *Listener) drain() {
	for {
		select {
		case c := <-l.conns:
			// A WebSocket's close waits for the peer's answer (up to 5 s): not here.
			go c.Close()
		default:
			return
		}
	}
}

// Shutdown closes the listener and every connection it handed out.
func (l *Listener) Shutdown() {
	_ = l.Close()
	l.cancel()
}

// Addr is the address of the HTTP server the listener is mounted on.
func (l *Listener) Addr() net.Addr { return l.addr }

// offers reports whether the request's Sec-WebSocket-Protocol headers list protocol.
func offers(r *http.Request, protocol string) bool {
	for _, v := range r.Header.Values("Sec-WebSocket-Protocol") {
		for p := range strings.SplitSeq(v, ",") {
			if strings.TrimSpace(p) == protocol {
				return true
			}
		}
	}
	return false
}
