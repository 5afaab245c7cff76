package gateway

import (
	"context"
	"crypto/tls"
	"errors"
	"net"
	"sync"
	"time"
)

// The gateway serves its listeners itself: it accepts each connection, counts it against its
// client address, completes the TLS handshake, and hands it to one of two HTTP/2 servers by what
// the handshake showed. A verified node certificate goes to the daemons' server, with the
// tunnels' large flow-control windows; no certificate to the anonymous server, whose windows are
// small, whose streams are few, and whose requests are bounded by anonymousRequests.

// connQueue is a net.Listener fed by the gateway's accept loops.
type connQueue struct {
	addr      net.Addr
	conns     chan net.Conn
	closeOnce sync.Once
	done      chan struct{}
}

func newConnQueue(addr net.Addr) *connQueue {
	return &connQueue{addr: addr, conns: make(chan net.Conn), done: make(chan struct{})}
}

// Accept waits for the next connection handed over; after Close it returns net.ErrClosed.
func (q *connQueue) Accept() (net.Conn, error) {
	select {
	case c := <-q.conns:
		return c, nil
	case <-q.done:
		return nil, net.ErrClosed
	}
}

// Close stops Accept; connections handed over afterwards are closed.
func (q *connQueue) Close() error {
	q.closeOnce.Do(func() { close(q.done) })
	return nil
}

// Addr is the address of the listener the connections came from.
func (q *connQueue) Addr() net.Addr { return q.addr }

// hand gives c to the server behind q, or closes it when q is closed.
func (q *connQueue) hand(c net.Conn) {
	select {
	case q.conns <- c:
	case <-q.done:
		_ = c.Close()
	}
}

// acceptLoop accepts ln's connections until it is closed and admits each in its own goroutine.
// byAddress is false where the peer is not the client (a WebSocket listener behind a proxy that
// terminates TLS): there only the totals apply.
func (g *Gateway) acceptLoop(ctx context.Context, ln net.Listener, byAddress bool, nodes, anonymous *connQueue) error {
	var backoff time.Duration
	for {
		raw, err := ln.Accept()
		if err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				backoff = min(max(2*backoff, 5*time.Millisecond), time.Second)
				time.Sleep(backoff)
				continue
			}
			return err // Serve reports it as the gateway's
		}
		backoff = 0
		go g.admit(ctx, raw, byAddress, nodes, anonymous)
	}
}

// admit completes raw's handshake within ReadHeaderTimeout and hands it to nodes (a verified
// certificate) or, while the caps per address and in total allow, to anonymous. Connections
// still in their handshake are not counted: a node's is one too (a fleet behind one address
// reconnecting at once must not be refused), and ReadHeaderTimeout bounds them.
func (g *Gateway) admit(ctx context.Context, raw net.Conn, byAddress bool, nodes, anonymous *connQueue) {
	a := g.admission
	key := ""
	if byAddress {
		key = addressKey(raw.RemoteAddr())
	}
	c := &anonConn{Conn: raw, key: key, a: a}
	tc := tls.Server(c, g.TLSConfig())
	_ = tc.SetDeadline(time.Now().Add(g.opts.Limits.ReadHeaderTimeout))
	if err := tc.HandshakeContext(ctx); err != nil {
		g.log.Debug("daemon TLS handshake failed", "client", key, "err", err)
		_ = tc.Close()
		return
	}
	_ = tc.SetDeadline(time.Time{})
	if len(tc.ConnectionState().VerifiedChains) > 0 {
		nodes.hand(tc)
		return
	}
	if reason := a.take(a.connsByAddr, a.l.AnonymousConnsPerAddress, &a.conns, a.l.AnonymousConns, key, refusedAddressConns, refusedConns); reason != "" {
		g.refuse(ctx, reason, key)
		_ = tc.Close()
		return
	}
	c.held.Store(true)
	anonymous.hand(tc)
}
