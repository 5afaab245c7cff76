package client

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coder/websocket"

	"github.com/better-compute/better-compute/client/tunnel"
	tunnelsv1 "github.com/better-compute/better-compute/gen/go/bettercompute/tunnels/v1"
)

// TunnelAbortError is why an open tunnel ended before both sides closed it: the close code
// (docs/tunnels.md lists them: 4005 nothing listens on the port, 4001 the lease ended, …) and
// the reason. The errors of a TunnelConn wrap one when the API, the gateway or the node ended
// the tunnel; errors.As(err, &ae) with ae a *client.TunnelAbortError reads it.
type TunnelAbortError = tunnel.AbortError

// TunnelCode is a tunnel's close code; Describe says what it means.
type TunnelCode = tunnel.Code

// TunnelRefusedError is an upgrade the API refused with an HTTP status: nothing was opened. The
// statuses and their reasons are docs/tunnels.md's "Refusals before the upgrade" (401 no API
// key, 404 no such ticket, 409 the ticket was used already, 503 the node has no session, …);
// Reason is the API's text, the documented reason and a detail ("the ticket was used already:
// a ticket opens one tunnel: create another").
type TunnelRefusedError struct {
	Status int
	Reason string
}

func (e *TunnelRefusedError) Error() string {
	return fmt.Sprintf("tunnel refused: HTTP %d: %s", e.Status, e.Reason)
}

// Tunnel opens a tunnel to port on the loopback of node nodeID: it creates a ticket with
// tunnels/create and opens it as a WebSocket with the client's API key, and returns the byte
// stream as a net.Conn. ctx bounds the opening only; the tunnel lasts until it is closed.
//
// Write sends the bytes in frames of at most 64 KiB; CloseWrite half-closes (the node's end
// reads EOF, and its answer keeps coming); Read returns io.EOF once the node's end closed its
// side. An error that ended the tunnel wraps a *TunnelAbortError with its close code; a refused
// upgrade is a *TunnelRefusedError; a refused create is a *connect.Error. Close before both
// sides closed resets the tunnel (close code 4009 at the other end). Deadlines are not
// supported: SetDeadline and its kin return an error wrapping errors.ErrUnsupported for any time
// but the zero one. Keep reading while the tunnel is open, as with any connection: the API's
// pings are answered by reads (after the node's end closed, by the TunnelConn itself).
//
// The WebSocket is opened with the client's HTTP client when it is an *http.Client
// (WithHTTPClient), else with http.DefaultClient.
func (c *Client) Tunnel(ctx context.Context, nodeID string, port int) (*TunnelConn, error) {
	s, info, err := c.TunnelStream(ctx, nodeID, port)
	if err != nil {
		return nil, err
	}
	return &TunnelConn{s: s, info: info, remote: tunnelAddr(net.JoinHostPort(nodeID, strconv.Itoa(port)))}, nil
}

// TunnelStream opens a tunnel as Tunnel does and returns its frame stream, for code in this
// module that joins it to a local connection with tunnel.Pump (the CLI's `better-compute
// tunnel`), and the tunnel tunnels/create returned. Everyone else wants Tunnel.
func (c *Client) TunnelStream(ctx context.Context, nodeID string, port int) (*tunnel.WebSocketStream, *tunnelsv1.Tunnel, error) {
	if port < 1 || port > 65535 {
		return nil, nil, fmt.Errorf("tunnel: port must be 1 to 65535, got %d", port)
	}
	res, err := c.Tunnels.Create(ctx, &tunnelsv1.CreateRequest{NodeId: nodeID, Port: int32(port)})
	if err != nil {
		return nil, nil, err
	}
	s, err := c.dialTunnel(ctx, res.GetUrl())
	if err != nil {
		return nil, nil, fmt.Errorf("tunnel to node %s port %d: %w", nodeID, port, err)
	}
	return s, res.GetTunnel(), nil
}

// dialTunnel opens a ticket's URL as a WebSocket of the tunnel subprotocol.
func (c *Client) dialTunnel(ctx context.Context, url string) (*tunnel.WebSocketStream, error) {
	h := http.Header{}
	h.Set(ClientHeader, "1")
	if c.apiKey != "" {
		h.Set("Authorization", "Bearer "+c.apiKey)
	}
	hc, _ := c.httpClient.(*http.Client) // nil: http.DefaultClient
	conn, res, err := websocket.Dial(ctx, url, &websocket.DialOptions{
		HTTPClient:      withFrameWrites(hc),
		HTTPHeader:      h,
		Subprotocols:    []string{tunnel.Subprotocol},
		CompressionMode: websocket.CompressionDisabled,
	})
	if res != nil && res.Body != nil {
		defer res.Body.Close()
	}
	if err != nil {
		if res != nil && res.StatusCode != http.StatusSwitchingProtocols {
			return nil, refusal(res)
		}
		return nil, err
	}
	if p := conn.Subprotocol(); p != tunnel.Subprotocol {
		_ = conn.Close(websocket.StatusProtocolError, "subprotocol "+tunnel.Subprotocol+" is required")
		return nil, fmt.Errorf("the API answered with subprotocol %q, not %s", p, tunnel.Subprotocol)
	}
	return tunnel.NewWebSocketStream(context.WithoutCancel(ctx), conn), nil
}

// refusal reads why the API refused an upgrade: the first line of a text body (the API writes
// the reason of tunnel.Refusals and a detail; the dial kept at most 1 KiB of it), else the
// documented reason of the status, else the status text.
func refusal(res *http.Response) *TunnelRefusedError {
	if res.Body != nil && strings.HasPrefix(res.Header.Get("Content-Type"), "text/plain") {
		line, _ := bufio.NewReader(io.LimitReader(res.Body, 1024)).ReadString('\n')
		if line = strings.TrimSpace(line); line != "" {
			return &TunnelRefusedError{Status: res.StatusCode, Reason: line}
		}
	}
	for _, r := range tunnel.Refusals {
		if r.Status == res.StatusCode {
			return &TunnelRefusedError{Status: r.Status, Reason: r.Reason}
		}
	}
	return &TunnelRefusedError{Status: res.StatusCode, Reason: http.StatusText(res.StatusCode)}
}

// TunnelConn is an open tunnel: a net.Conn whose bytes go to and come from a port on a node,
// with CloseWrite to half-close. Read and Write may be called concurrently with each other
// and with Close.
type TunnelConn struct {
	s      *tunnel.WebSocketStream
	info   *tunnelsv1.Tunnel
	remote tunnelAddr

	rmu  sync.Mutex
	rest []byte // unread bytes of the last Data frame (valid until the next ReadFrame)
	wmu  sync.Mutex

	readDone, writeDone atomic.Bool // the node's end's CloseWrite came; ours went

	mu     sync.Mutex
	err    error // what ended the tunnel; net.ErrClosed after Close
	closed bool
}

// Info is the tunnel as tunnels/create returned it: its id (for tunnels/close), node and port.
func (c *TunnelConn) Info() *tunnelsv1.Tunnel { return c.info }

// Read reads bytes from the node's end; io.EOF once it closed its side.
func (c *TunnelConn) Read(p []byte) (int, error) {
	c.rmu.Lock()
	defer c.rmu.Unlock()
	for len(c.rest) == 0 {
		if c.readDone.Load() {
			return 0, io.EOF
		}
		if err := c.failed(); err != nil {
			return 0, err
		}
		f, err := c.s.ReadFrame()
		if err != nil {
			return 0, c.fail(err)
		}
		switch f.Type {
		case tunnel.Data:
			c.rest = f.Payload
		case tunnel.CloseWrite:
			c.readDone.Store(true)
			// Nothing but the end comes now; read it, so pings and the close are answered
			// and an abort is seen even if the caller only writes from here on.
			go c.drain()
			return 0, io.EOF
		case tunnel.Abort:
			code, reason := tunnel.ParseAbort(f.Payload)
			return 0, c.fail(&tunnel.AbortError{Code: code, Reason: reason})
		}
	}
	n := copy(p, c.rest)
	c.rest = c.rest[n:]
	return n, nil
}

// drain reads the frames that follow the node's end's CloseWrite: none but an abort, until the
// API closes the WebSocket.
func (c *TunnelConn) drain() {
	f, err := c.s.ReadFrame()
	switch {
	case errors.Is(err, io.EOF): // closed normally
	case err != nil:
		_ = c.fail(err)
	case f.Type == tunnel.Abort:
		code, reason := tunnel.ParseAbort(f.Payload)
		_ = c.fail(&tunnel.AbortError{Code: code, Reason: reason})
	default:
		_ = c.fail(fmt.Errorf("%w: a frame after close-write", tunnel.ErrProtocol))
	}
}

// Write sends p in Data frames of at most tunnel.MaxPayload bytes.
func (c *TunnelConn) Write(p []byte) (int, error) {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	if err := c.failed(); err != nil {
		return 0, err
	}
	if c.writeDone.Load() {
		return 0, fmt.Errorf("tunnel to %s: write after CloseWrite: %w", c.remote, net.ErrClosed)
	}
	n := 0
	for len(p) > 0 {
		chunk := p[:min(len(p), tunnel.MaxPayload)]
		if err := c.s.WriteFrame(tunnel.Frame{Type: tunnel.Data, Payload: chunk}); err != nil {
			return n, c.fail(err)
		}
		n += len(chunk)
		p = p[len(chunk):]
	}
	return n, nil
}

// CloseWrite half-closes: the node's end reads EOF, and Read goes on.
func (c *TunnelConn) CloseWrite() error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	if c.writeDone.Load() {
		return nil
	}
	if err := c.failed(); err != nil {
		return err
	}
	if err := c.s.WriteFrame(tunnel.Frame{Type: tunnel.CloseWrite}); err != nil {
		return c.fail(err)
	}
	c.writeDone.Store(true)
	return nil
}

// Close ends the tunnel: normally once both sides closed their side, else as a reset (close
// code 4009, "a connection at one end was reset", at the node's end).
func (c *TunnelConn) Close() error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil
	}
	c.closed = true
	ended := c.err != nil
	if !ended {
		c.err = fmt.Errorf("tunnel to %s: %w", c.remote, net.ErrClosed)
	}
	c.mu.Unlock()
	if ended { // fail closed the stream already
		return nil
	}
	var err error
	if c.readDone.Load() && c.writeDone.Load() {
		err = c.s.Close()
	} else {
		err = c.s.CloseWith(tunnel.CodeReset, "the client closed the tunnel")
	}
	if err != nil && !errors.Is(err, net.ErrClosed) && websocket.CloseStatus(err) == -1 {
		return fmt.Errorf("tunnel to %s: %w", c.remote, err)
	}
	return nil
}

// failed is what ended the tunnel, or nil.
func (c *TunnelConn) failed() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}

// fail ends the tunnel for err, unless it ended already, and returns what ended it.
func (c *TunnelConn) fail(err error) error {
	c.mu.Lock()
	if c.err != nil {
		c.mu.Unlock()
		return c.err
	}
	var ae *tunnel.AbortError
	switch {
	case errors.As(err, &ae):
	case errors.Is(err, io.EOF):
		ae = &tunnel.AbortError{Code: tunnel.CodeGatewayLost, Reason: "the stream ended without closing"}
	case errors.Is(err, tunnel.ErrProtocol):
		ae = &tunnel.AbortError{Code: tunnel.CodeProtocol, Reason: err.Error()}
	default:
		if code := websocket.CloseStatus(err); code != -1 {
			var ce websocket.CloseError
			errors.As(err, &ce)
			ae = &tunnel.AbortError{Code: tunnel.Code(code), Reason: ce.Reason}
		}
	}
	if ae != nil {
		c.err = fmt.Errorf("tunnel to %s: %w", c.remote, ae)
	} else {
		c.err = fmt.Errorf("tunnel to %s: %w", c.remote, err)
	}
	c.mu.Unlock()
	code, reason := tunnel.CodeReset, err.Error()
	if ae != nil {
		code, reason = ae.Code, ae.Reason
	}
	_ = c.s.CloseWith(code, reason)
	return c.err
}

// LocalAddr names the client's end of the tunnel.
func (c *TunnelConn) LocalAddr() net.Addr { return tunnelAddr("client") }

// RemoteAddr is the node id and port, as "node-id:port".
func (c *TunnelConn) RemoteAddr() net.Addr { return c.remote }

// SetDeadline is not supported: it returns an error wrapping errors.ErrUnsupported for any
// time but the zero one (no deadline), which it accepts.
func (c *TunnelConn) SetDeadline(t time.Time) error { return noDeadline(t) }

// SetReadDeadline is not supported; see SetDeadline.
func (c *TunnelConn) SetReadDeadline(t time.Time) error { return noDeadline(t) }

// SetWriteDeadline is not supported; see SetDeadline.
func (c *TunnelConn) SetWriteDeadline(t time.Time) error { return noDeadline(t) }

func noDeadline(t time.Time) error {
	if t.IsZero() {
		return nil
	}
	return fmt.Errorf("tunnel: deadlines: %w", errors.ErrUnsupported)
}

// tunnelAddr is an address of a tunnel's end.
type tunnelAddr string

func (a tunnelAddr) Network() string { return "bettercompute-tunnel" }
func (a tunnelAddr) String() string  { return string(a) }

var _ tunnel.Conn = (*TunnelConn)(nil)
var _ net.Conn = (*TunnelConn)(nil)
