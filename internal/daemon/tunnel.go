package daemon

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/better-compute/better-compute/client/tunnel"
	daemonv1 "github.com/better-compute/better-compute/gen/go/bettercompute/daemon/v1"
	"github.com/better-compute/better-compute/internal/tunnelhop"
)

// The node end of a tunnel (package tunnel): a TunnelOpen on the session names a tunnel and a
// port; the daemon dials 127.0.0.1:port, and only that, when its own allow list has the port,
// and streams the tunnel to its gateway on a data-plane HTTP/2 stream of its own (POST
// tunnelhop.DataPlanePath + tunnel id, with the node certificate), joined to the TCP connection by
// tunnel.Pump. A tunnel it will not or cannot open is that stream with one Abort frame. The real
// daemon and the FakeDaemon share all of it: both are an Agent.

// MaxTunnelPorts bounds a daemon's tunnel allow list, as the control plane bounds a node
// spec's and a pool's tunnel_ports.
const MaxTunnelPorts = 64

// ValidateTunnelPorts checks a tunnel allow list: at most MaxTunnelPorts ports, each 1 to
// 65535.
func ValidateTunnelPorts(ports []int) error {
	if len(ports) > MaxTunnelPorts {
		return fmt.Errorf("tunnel ports: at most %d, got %d", MaxTunnelPorts, len(ports))
	}
	for _, p := range ports {
		if p < 1 || p > 65535 {
			return fmt.Errorf("tunnel port %d: want 1 to 65535", p)
		}
	}
	return nil
}

const (
	// tunnelDialTimeout bounds the dial of a tunnel's port on loopback, well within the time
	// the gateway waits for the daemon's stream (tunnelhop.OpenTimeout).
	tunnelDialTimeout = 5 * time.Second
	// tunnelCloseGrace is how long a closing data-plane stream waits for the gateway to end its
	// side, so that the last frames sent (a close-write, an abort) arrive before the stream is
	// reset.
	tunnelCloseGrace = 5 * time.Second
	// maxTunnelRefusals bounds the refusals in flight besides the open tunnels; a TunnelOpen
	// beyond both is ignored, and the gateway gives up on it (tunnel.CodeNodeOffline).
	maxTunnelRefusals = 64
	// maxTunnelIDLen bounds a tunnel id (a UUID today).
	maxTunnelIDLen = 64
)

// tunnels is an agent's tunnel state: the allow list, and the bounds on what runs at once.
type tunnels struct {
	allow []int
	// open holds a slot for each tunnel dialled or pumping; handling one for each TunnelOpen
	// being handled, refusals included.
	open, handling chan struct{}
	wg             sync.WaitGroup
	// count is the tunnels open now, for Status.
	count atomic.Int64
}

func (t *tunnels) init(allow []int, max int) {
	t.allow = slices.Clone(allow)
	t.open = make(chan struct{}, max)
	t.handling = make(chan struct{}, max+maxTunnelRefusals)
}

// wait waits for every tunnel to end (they end with the context they were opened on).
func (t *tunnels) wait() { t.wg.Wait() }

// openTunnel handles a TunnelOpen without blocking the session: the tunnel runs on its own
// until it ends or ctx does.
func (a *Agent) openTunnel(ctx context.Context, m *daemonv1.TunnelOpen) {
	id, port := m.GetTunnelId(), int(m.GetPort())
	if !validTunnelID(id) {
		// Nothing could name the stream to the gateway: it gives up on its own.
		a.log.Warn("ignored a tunnel open with an invalid tunnel id", "tunnel_id_len", len(id), "port", port)
		return
	}
	log := a.log.With("tunnel_id", id, "port", port)
	select {
	case a.tunnels.handling <- struct{}{}:
	default:
		log.Warn("ignored a tunnel open: too many tunnels and refusals in flight")
		return
	}
	a.tunnels.wg.Go(func() {
		defer func() { <-a.tunnels.handling }()
		a.runTunnel(ctx, log, id, port)
	})
}

// runTunnel opens one tunnel and pumps it until it ends, or refuses it.
func (a *Agent) runTunnel(ctx context.Context, log *slog.Logger, id string, port int) {
	if !slices.Contains(a.tunnels.allow, port) {
		a.refuseTunnel(ctx, log, id, tunnel.CodePortRefused, fmt.Sprintf("port %d is not in the daemon's tunnel allow list", port))
		return
	}
	select {
	case a.tunnels.open <- struct{}{}:
		defer func() { <-a.tunnels.open }()
	default:
		a.refuseTunnel(ctx, log, id, tunnel.CodeReset, "too many tunnels on the node")
		return
	}
	a.tunnels.count.Add(1)
	defer a.tunnels.count.Add(-1)
	// Loopback only, whatever asks: the port is the only thing a TunnelOpen chooses.
	d := net.Dialer{Timeout: tunnelDialTimeout}
	c, err := d.DialContext(ctx, "tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
	if err != nil {
		a.refuseTunnel(ctx, log, id, tunnel.CodeDialFailed, err.Error())
		return
	}
	conn := &countingConn{TCPConn: c.(*net.TCPConn)}
	start := time.Now()
	log.Info("tunnel opened")
	err = tunnel.Pump(conn, a.dataPlaneStream(ctx, id))
	code, reason := closeCode(err)
	log.Info("tunnel closed", "code", int(code), "reason", reason, "duration", time.Since(start).Round(time.Millisecond),
		"bytes_to_port", conn.written.Load(), "bytes_from_port", conn.read.Load())
}

// refuseTunnel answers a TunnelOpen with a data-plane stream that carries one Abort frame.
func (a *Agent) refuseTunnel(ctx context.Context, log *slog.Logger, id string, code tunnel.Code, reason string) {
	s := a.dataPlaneStream(ctx, id)
	err := s.WriteFrame(tunnel.Frame{Type: tunnel.Abort, Payload: tunnel.AbortPayload(code, reason)})
	if err == nil {
		err = s.CloseSend()
	} else if _, rerr := s.ReadFrame(); rerr != nil && !errors.Is(rerr, io.EOF) {
		err = rerr // why the stream broke: the gateway's answer, or why there was none
	}
	_ = s.Close() // once the gateway has ended its side, briefly
	if err != nil {
		log.Warn("tunnel refused; the gateway was not told", "code", int(code), "reason", reason, "err", err)
		return
	}
	log.Info("tunnel refused", "code", int(code), "reason", reason)
}

// closeCode is the code a tunnel ended with, from Pump's result, as the other end sees it.
func closeCode(err error) (tunnel.Code, string) {
	var ae *tunnel.AbortError
	switch {
	case err == nil:
		return tunnel.CodeNormal, ""
	case errors.As(err, &ae):
		return ae.Code, ae.Reason
	case errors.Is(err, tunnel.ErrProtocol):
		return tunnel.CodeProtocol, err.Error()
	}
	return tunnel.CodeReset, err.Error()
}

// validTunnelID accepts what can name a stream in a URL path: 1 to maxTunnelIDLen letters,
// digits, '-' and '_'.
func validTunnelID(id string) bool {
	if id == "" || len(id) > maxTunnelIDLen {
		return false
	}
	for _, c := range []byte(id) {
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '_') {
			return false
		}
	}
	return true
}

// dataPlaneStream opens tunnel id's stream to the gateway: a full-duplex POST on the data-plane
// client whose request body is a pipe (what the daemon sends) and whose response body is what
// it receives. It returns at once; the request goes out meanwhile, and reading waits for the
// gateway's answer, which must come within tunnelhop.OpenTimeout. CloseSend ends the request
// body; Close waits (tunnelCloseGrace at most) for the gateway to end the stream, so the last
// frames arrive, then cancels the request.
func (a *Agent) dataPlaneStream(ctx context.Context, id string) *tunnel.ByteStream {
	a.mu.Lock()
	client := a.dataPlane
	a.mu.Unlock()
	rctx, cancel := context.WithCancel(ctx)
	pr, pw := io.Pipe()
	body := &pipeBody{PipeReader: pr, done: make(chan struct{})}
	res := &lazyResponse{ready: make(chan struct{})}
	// The HTTP/2 transport does not see the context end while it waits on the request body:
	// closing the body is what aborts the stream then (and with it the response).
	context.AfterFunc(rctx, func() { _ = pr.CloseWithError(context.Cause(rctx)) })
	req, err := http.NewRequestWithContext(rctx, http.MethodPost, a.opts.Dialer.baseURL()+tunnelhop.DataPlanePath+url.PathEscape(id), body)
	if err != nil { // a gateway address no URL can hold
		res.err = err
		close(res.ready)
		_ = body.Close()
	} else {
		req.Header.Set("Content-Type", "application/octet-stream")
		go res.do(client, req, cancel)
	}
	closeAll := sync.OnceValue(func() error {
		_ = pw.Close()
		t := time.NewTimer(tunnelCloseGrace)
		select {
		case <-body.done: // the transport is done with the request: the gateway ended the stream
		case <-t.C:
		case <-rctx.Done():
		}
		t.Stop()
		cancel()
		res.close()
		return nil
	})
	return tunnel.NewByteStream(res, pw, nil, pw.Close, closeAll)
}

// pipeBody is a request body that says when the transport is done with it: the HTTP/2
// transport closes the body once the stream is over (both sides ended, or reset).
type pipeBody struct {
	*io.PipeReader
	once sync.Once
	done chan struct{}
}

func (b *pipeBody) Close() error {
	b.once.Do(func() { close(b.done) })
	return b.PipeReader.Close()
}

// lazyResponse is a response body to read before the response has come: reads wait for it.
type lazyResponse struct {
	ready chan struct{}
	res   *http.Response
	err   error
}

// do sends req and keeps its response, cancelling it when no answer comes in time.
func (l *lazyResponse) do(client *http.Client, req *http.Request, cancel context.CancelFunc) {
	defer close(l.ready)
	timer := time.AfterFunc(tunnelhop.OpenTimeout, cancel)
	res, err := client.Do(req)
	timer.Stop()
	if err != nil {
		l.err = fmt.Errorf("open the data-plane stream: %w", err)
		return
	}
	if res.StatusCode != http.StatusOK {
		msg, _ := io.ReadAll(io.LimitReader(res.Body, 256))
		_ = res.Body.Close()
		l.err = fmt.Errorf("open the data-plane stream: the gateway answered %s: %s", res.Status, bytes.TrimSpace(msg))
		return
	}
	l.res = res
}

func (l *lazyResponse) Read(p []byte) (int, error) {
	<-l.ready
	if l.err != nil {
		return 0, l.err
	}
	return l.res.Body.Read(p)
}

// close releases the response, once the request is over or cancelled.
func (l *lazyResponse) close() {
	<-l.ready
	if l.res != nil {
		_ = l.res.Body.Close()
	}
}

// countingConn is the tunnel's TCP connection, counting bytes for the log.
type countingConn struct {
	*net.TCPConn
	read, written atomic.Int64
}

func (c *countingConn) Read(p []byte) (int, error) {
	n, err := c.TCPConn.Read(p)
	c.read.Add(int64(n))
	return n, err
}

func (c *countingConn) Write(p []byte) (int, error) {
	n, err := c.TCPConn.Write(p)
	c.written.Add(int64(n))
	return n, err
}
