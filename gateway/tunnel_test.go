package gateway_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/google/uuid"
	"google.golang.org/protobuf/proto"

	"github.com/better-compute/better-compute/client/tunnel"
	"github.com/better-compute/better-compute/gateway"
	"github.com/better-compute/better-compute/gateway/gatewaytest"
	daemonv1 "github.com/better-compute/better-compute/gen/go/bettercompute/daemon/v1"
	gatewayv1 "github.com/better-compute/better-compute/gen/go/bettercompute/gateway/v1"
	"github.com/better-compute/better-compute/internal/poll"
	"github.com/better-compute/better-compute/internal/tunnelhop"
	"github.com/better-compute/better-compute/internal/tunnelhop/tunneltest"
)

// tunnelEnv is a gateway and the API's client of its control API (an internal certificate), to
// stream tunnels to it as the API does.
type tunnelEnv struct {
	*env
	gw  *gatewaytest.Gateway
	api *http.Client
}

// newTunnelEnv starts a gateway whose daemons get openTimeout to answer a TunnelOpen (the
// default when zero).
func newTunnelEnv(t *testing.T, openTimeout time.Duration) *tunnelEnv {
	t.Helper()
	e := newEnv(t)
	gw := e.StartGateway("gw1", func(o *gateway.Options) { o.TunnelOpenTimeout = openTimeout })
	certPEM, keyPEM, err := e.bundle.IssueInternal("api", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	return &tunnelEnv{env: e, gw: gw, api: h2Client(t, &tls.Config{Certificates: []tls.Certificate{cert}, RootCAs: e.bundle.InternalCAPool()})}
}

// h2Client is an HTTP/2 client with the tunnels' windows.
func h2Client(t *testing.T, cfg *tls.Config) *http.Client {
	t.Helper()
	cfg.MinVersion = tls.VersionTLS13
	tr := &http.Transport{TLSClientConfig: cfg, Protocols: new(http.Protocols), HTTP2: &http.HTTP2Config{
		MaxReceiveBufferPerStream: tunnelhop.StreamWindow, MaxReceiveBufferPerConnection: tunnelhop.ConnWindow,
	}}
	tr.Protocols.SetHTTP2(true)
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr}
}

// sentReader is a request body that says when the transport has read it to its end: the HTTP/2
// transport has then written everything read before (it writes each read before the next), so
// the stream may be cancelled without losing the last frames.
type sentReader struct {
	r    io.Reader
	once sync.Once
	sent chan struct{}
}

func (s *sentReader) Read(p []byte) (int, error) {
	n, err := s.r.Read(p)
	if err != nil {
		s.once.Do(func() { close(s.sent) })
	}
	return n, err
}

// stream POSTs a full-duplex frame stream to url: with 200 it returns the stream (its request
// body is a pipe the stream writes), otherwise the status and the refusal's text. Closing the
// stream ends its request body and, once the transport sent it (or after a second), cancels it:
// cancelling at once could drop the last frames (a CloseWrite, an Abort) still in the transport.
// The end of ctx tears the stream down: the HTTP/2 transport does not watch it while it waits
// on the request body.
func stream(ctx context.Context, c *http.Client, url string, header http.Header) (int, *tunnel.ByteStream, string, error) {
	pr, pw := io.Pipe()
	body := &sentReader{r: pr, sent: make(chan struct{})}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, body)
	if err != nil {
		return 0, nil, "", err
	}
	for k, v := range header {
		req.Header[k] = v
	}
	res, err := c.Do(req)
	if err != nil {
		pw.Close()
		return 0, nil, "", err
	}
	if res.StatusCode != http.StatusOK {
		defer res.Body.Close()
		pw.Close()
		body, _ := io.ReadAll(res.Body)
		return res.StatusCode, nil, string(body), nil
	}
	stop := context.AfterFunc(ctx, func() {
		_ = pw.CloseWithError(ctx.Err())
		_ = res.Body.Close()
	})
	return res.StatusCode, tunnel.NewByteStream(res.Body, pw, nil, pw.Close, func() error {
		stop()
		_ = pw.Close()
		select {
		case <-body.sent:
		case <-time.After(time.Second):
		}
		return res.Body.Close()
	}), "", nil
}

// open streams a tunnel to node's port through the control API, as the API does.
func (te *tunnelEnv) open(ctx context.Context, id uuid.UUID, node string, port int) (int, *tunnel.ByteStream, string, error) {
	return stream(ctx, te.api, te.gw.ControlURL+tunnelhop.ControlPath, openHeader(te.t, &gatewayv1.OpenTunnelRequest{
		TunnelId: id.String(), NodeId: node, Port: int32(port),
	}))
}

// openHeader is the control route's header opening the tunnel req, as the API's dialler sends it.
func openHeader(t *testing.T, req *gatewayv1.OpenTunnelRequest) http.Header {
	t.Helper()
	v, err := tunnelhop.EncodeOpen(req)
	if err != nil {
		t.Fatal(err)
	}
	h := http.Header{}
	h.Set(tunnelhop.HeaderOpen, v)
	return h
}

// tunnelNode is a hand-driven daemon: a raw session on the gateway, and a client with the node's
// certificate for its data-plane streams, on a connection of their own.
type tunnelNode struct {
	*rawNode
	nodeID  string
	addr    string
	session *connect.BidiStreamForClient[raw, daemonv1.SessionResponse]
	data    *http.Client
}

// tunnelNode joins a node through the gateway and opens its session.
func (te *tunnelEnv) tunnelNode() *tunnelNode {
	te.t.Helper()
	rn := te.joinNode(te.gw.Addr)
	cert, err := rn.id.Certificate()
	if err != nil {
		te.t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(te.bundle.RootPEM())
	n := &tunnelNode{rawNode: rn, nodeID: rn.id.NodeID, addr: te.gw.Addr,
		data: h2Client(te.t, &tls.Config{Certificates: []tls.Certificate{cert}, RootCAs: roots, NextProtos: []string{"h2"}})}
	n.reopen(te.t)
	return n
}

// reopen opens a new session, the old one having ended.
func (n *tunnelNode) reopen(t *testing.T) {
	t.Helper()
	sctx, cancel := context.WithCancel(ctx)
	t.Cleanup(cancel)
	n.session = n.open(t, sctx)
}

// nextOpen returns the next TunnelOpen its session receives.
func (n *tunnelNode) nextOpen() (*daemonv1.TunnelOpen, error) {
	for {
		msg, err := n.session.Receive()
		if err != nil {
			return nil, err
		}
		if o := msg.GetTunnelOpen(); o != nil {
			return o, nil
		}
	}
}

// dataPlane POSTs the node's stream of a tunnel.
func (n *tunnelNode) dataPlane(ctx context.Context, tunnelID string) (int, *tunnel.ByteStream, string, error) {
	return stream(ctx, n.data, "https://"+n.addr+tunnelhop.DataPlanePath+tunnelID, nil)
}

// answer opens the tunnel as a daemon does: it dials the port on loopback and pumps, or, when
// refused, sends the one Abort frame of a refusal.
func (n *tunnelNode) answer(ctx context.Context, o *daemonv1.TunnelOpen, allowed bool) error {
	status, s, body, err := n.dataPlane(ctx, o.GetTunnelId())
	if err != nil {
		return fmt.Errorf("data-plane stream: %w", err)
	}
	if status != http.StatusOK {
		return fmt.Errorf("data-plane stream: %d %s", status, body)
	}
	if !allowed {
		defer s.Close()
		return s.WriteFrame(tunnel.Frame{Type: tunnel.Abort, Payload: tunnel.AbortPayload(tunnel.CodePortRefused, "not on the allow list")})
	}
	conn, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", o.GetPort()))
	if err != nil {
		return err
	}
	return tunnel.Pump(conn.(*net.TCPConn), s)
}

// readData reads Data frames until a CloseWrite, and returns their bytes.
func readData(s tunnel.Stream) ([]byte, error) {
	var got []byte
	for {
		f, err := s.ReadFrame()
		if err != nil {
			return got, err
		}
		switch f.Type {
		case tunnel.Data:
			got = append(got, f.Payload...)
		case tunnel.CloseWrite:
			return got, nil
		case tunnel.Abort:
			code, reason := tunnel.ParseAbort(f.Payload)
			return got, &tunnel.AbortError{Code: code, Reason: reason}
		}
	}
}

// wantAbort reads frames until an Abort frame and checks its code.
func wantAbort(t *testing.T, s tunnel.Stream, code tunnel.Code) string {
	t.Helper()
	_, err := readData(s)
	ae, ok := errors.AsType[*tunnel.AbortError](err)
	if !ok || ae.Code != code {
		t.Fatalf("the stream ended with %v, want an abort with %d (%s)", err, code, code.Describe())
	}
	return ae.Reason
}

// TestTunnelRoundTrip: a tunnel streamed to the control API reaches the node's daemon, which
// opens its data-plane stream and dials the port; bytes cross both ways, the client's half-close
// reaches the port, and the port's last bytes after it still come back, then both streams end
// cleanly. A daemon's refusal reaches the API as an Abort frame after the 200.
func TestTunnelRoundTrip(t *testing.T) {
	t.Parallel()
	te := newTunnelEnv(t, 0)
	n := te.tunnelNode()
	port := tunneltest.EchoPort(t, "bye")
	tctx, cancel := context.WithTimeout(ctx, 30*time.Second) // nothing hangs
	defer cancel()

	id := uuid.New()
	daemon := make(chan error, 1)
	go func() {
		o, err := n.nextOpen()
		if err == nil && (o.GetTunnelId() != id.String() || o.GetPort() != int32(port)) {
			err = fmt.Errorf("TunnelOpen %v, want tunnel %s port %d", o, id, port)
		}
		if err == nil {
			err = n.answer(tctx, o, true)
		}
		daemon <- err
	}()
	status, s, body, err := te.open(tctx, id, n.nodeID, port)
	if err != nil || status != http.StatusOK {
		t.Fatalf("open: %d %s %v", status, body, err)
	}
	defer s.Close()
	if got := te.gw.Tunnels(); got != 1 {
		t.Errorf("the gateway counts %d open tunnels", got)
	}
	sent := make([]byte, 300<<10)
	_, _ = rand.Read(sent)
	var wg sync.WaitGroup
	wg.Go(func() {
		for rest := sent; len(rest) > 0; {
			k := min(len(rest), tunnel.MaxPayload)
			if err := s.WriteFrame(tunnel.Frame{Type: tunnel.Data, Payload: rest[:k]}); err != nil {
				t.Errorf("write: %v", err)
				return
			}
			rest = rest[k:]
		}
		if err := s.WriteFrame(tunnel.Frame{Type: tunnel.CloseWrite}); err != nil {
			t.Errorf("close write: %v", err)
		}
		_ = s.CloseSend()
	})
	got, err := readData(s)
	wg.Wait()
	if err != nil {
		t.Fatalf("read: %v", err)
	}
	if want := append(bytes.Clone(sent), "bye"...); !bytes.Equal(got, want) {
		t.Fatalf("got %d bytes back, want %d (the echo, then bye)", len(got), len(want))
	}
	if _, err := s.ReadFrame(); !errors.Is(err, io.EOF) {
		t.Errorf("after both closed, the control stream: %v, want its end", err)
	}
	if err := <-daemon; err != nil {
		t.Errorf("daemon: %v", err)
	}
	poll.Until(t, 5*time.Second, "the gateway counts no open tunnel", func() bool { return te.gw.Tunnels() == 0 })

	// A port the daemon refuses: 200, then its Abort frame.
	id = uuid.New()
	go func() {
		o, err := n.nextOpen()
		if err == nil {
			err = n.answer(tctx, o, false)
		}
		daemon <- err
	}()
	status, s, body, err = te.open(tctx, id, n.nodeID, 22)
	if err != nil || status != http.StatusOK {
		t.Fatalf("open: %d %s %v", status, body, err)
	}
	defer s.Close()
	if reason := wantAbort(t, s, tunnel.CodePortRefused); reason != "not on the allow list" {
		t.Errorf("reason %q", reason)
	}
	if err := <-daemon; err != nil {
		t.Errorf("daemon: %v", err)
	}
}

// TestTunnelRefusals: the control route refuses bad headers (400), a node without a session
// here (503) and a tunnel id already pending (409); the data-plane route serves only the node
// the tunnel waits for (404 for another node's certificate, an unknown or spent id; 401 without
// a certificate), and nothing is relayed on a refusal; a session that ends while its daemon is
// awaited is 503.
func TestTunnelRefusals(t *testing.T) {
	t.Parallel()
	te := newTunnelEnv(t, 0)
	tctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	opening := func(tunnelID, node string, port int32) http.Header {
		return openHeader(t, &gatewayv1.OpenTunnelRequest{TunnelId: tunnelID, NodeId: node, Port: port})
	}
	raw := func(v string) http.Header { return http.Header{tunnelhop.HeaderOpen: {v}} }
	for _, tc := range []struct {
		name   string
		header http.Header
		want   string
	}{
		{"no header", http.Header{}, tunnelhop.HeaderOpen + " header: missing"},
		{"not base64", raw("not base64!"), tunnelhop.HeaderOpen + " header: not base64"},
		{"not protobuf", raw(base64.RawStdEncoding.EncodeToString([]byte{0xff, 0xff})), tunnelhop.HeaderOpen + " header: not an OpenTunnelRequest"},
		{"too long", raw(strings.Repeat("A", 4<<10)), tunnelhop.HeaderOpen + " header: longer than"},
		{"no tunnel id", opening("", uuid.NewString(), 22), "tunnel_id:"},
		{"bad node id", opening(uuid.NewString(), "node-1", 22), "node_id:"},
		{"port 0", opening(uuid.NewString(), uuid.NewString(), 0), "port:"},
		{"port 65536", opening(uuid.NewString(), uuid.NewString(), 65536), "port:"},
		{"port -22", opening(uuid.NewString(), uuid.NewString(), -22), "port:"},
	} {
		status, _, body, err := stream(tctx, te.api, te.gw.ControlURL+tunnelhop.ControlPath, tc.header)
		if err != nil || status != http.StatusBadRequest || !strings.Contains(body, tc.want) {
			t.Errorf("%s: %d %q %v, want 400 naming %s", tc.name, status, body, err, tc.want)
		}
	}
	// The padded base64 that some encoders write is accepted too: this one is refused only for
	// the node's missing session.
	padded, err := proto.Marshal(&gatewayv1.OpenTunnelRequest{TunnelId: uuid.NewString(), NodeId: uuid.NewString(), Port: 22})
	if err != nil {
		t.Fatal(err)
	}
	if status, _, body, err := stream(tctx, te.api, te.gw.ControlURL+tunnelhop.ControlPath, raw(base64.StdEncoding.EncodeToString(padded))); err != nil || status != http.StatusServiceUnavailable {
		t.Errorf("padded base64: %d %q %v, want 503 (no session)", status, body, err)
	}
	if status, _, body, err := te.open(tctx, uuid.New(), uuid.NewString(), 22); err != nil || status != http.StatusServiceUnavailable {
		t.Errorf("a node without a session: %d %q %v, want 503", status, body, err)
	}

	a, b := te.tunnelNode(), te.tunnelNode()
	port := tunneltest.EchoPort(t, "bye")
	id := uuid.New()
	type opened struct {
		status int
		s      *tunnel.ByteStream
		body   string
		err    error
	}
	api := make(chan opened, 1)
	go func() {
		status, s, body, err := te.open(tctx, id, a.nodeID, port)
		api <- opened{status, s, body, err}
	}()
	o, err := a.nextOpen()
	if err != nil {
		t.Fatal(err)
	}
	// Pending now: the same id again is a conflict.
	if status, _, body, err := te.open(tctx, id, a.nodeID, port); err != nil || status != http.StatusConflict {
		t.Errorf("the same tunnel id twice: %d %q %v, want 409", status, body, err)
	}
	for name, try := range map[string]func() (int, *tunnel.ByteStream, string, error){
		"another node's certificate": func() (int, *tunnel.ByteStream, string, error) { return b.dataPlane(tctx, o.GetTunnelId()) },
		"an unknown tunnel":          func() (int, *tunnel.ByteStream, string, error) { return a.dataPlane(tctx, uuid.NewString()) },
		"a malformed tunnel id":      func() (int, *tunnel.ByteStream, string, error) { return a.dataPlane(tctx, "nope") },
	} {
		if status, _, body, err := try(); err != nil || status != http.StatusNotFound {
			t.Errorf("%s: %d %q %v, want 404", name, status, body, err)
		}
	}
	anon := h2Client(t, &tls.Config{RootCAs: rootPool(te.bundle.RootPEM()), NextProtos: []string{"h2"}})
	if status, _, body, err := stream(tctx, anon, "https://"+te.gw.Addr+tunnelhop.DataPlanePath+o.GetTunnelId(), nil); err != nil || status != http.StatusUnauthorized {
		t.Errorf("no certificate: %d %q %v, want 401", status, body, err)
	}
	select {
	case res := <-api:
		t.Fatalf("the control stream answered %d %q %v before its node's stream arrived", res.status, res.body, res.err)
	default:
	}
	// The right node's stream is still matched, and carries the tunnel.
	daemon := make(chan error, 1)
	go func() { daemon <- a.answer(tctx, o, true) }()
	res := <-api
	if res.err != nil || res.status != http.StatusOK {
		t.Fatalf("open: %d %q %v", res.status, res.body, res.err)
	}
	if err := res.s.WriteFrame(tunnel.Frame{Type: tunnel.Data, Payload: []byte("ping")}); err != nil {
		t.Fatal(err)
	}
	if err := res.s.WriteFrame(tunnel.Frame{Type: tunnel.CloseWrite}); err != nil {
		t.Fatal(err)
	}
	if got, err := readData(res.s); err != nil || string(got) != "pingbye" {
		t.Errorf("got %q, %v", got, err)
	}
	res.s.Close()
	if err := <-daemon; err != nil {
		t.Errorf("daemon: %v", err)
	}
	// A claimed tunnel takes no second stream.
	if status, _, body, err := a.dataPlane(tctx, o.GetTunnelId()); err != nil || status != http.StatusNotFound {
		t.Errorf("a second stream for the tunnel: %d %q %v, want 404", status, body, err)
	}

	// The node's session ends while its daemon is awaited: 503.
	go func() {
		status, s, body, err := te.open(tctx, uuid.New(), b.nodeID, port)
		api <- opened{status, s, body, err}
	}()
	if _, err := b.nextOpen(); err != nil {
		t.Fatal(err)
	}
	te.gw.Revoke(uuid.MustParse(b.nodeID))
	if res := <-api; res.err != nil || res.status != http.StatusServiceUnavailable {
		t.Errorf("the session ended while awaited: %d %q %v, want 503", res.status, res.body, res.err)
	}
}

func rootPool(pemBytes []byte) *x509.CertPool {
	p := x509.NewCertPool()
	p.AppendCertsFromPEM(pemBytes)
	return p
}

// TestTunnelOpenTimeout: a daemon that never opens its stream is 504 once the open timeout
// passed, and a stream that comes later finds nothing (404).
func TestTunnelOpenTimeout(t *testing.T) {
	t.Parallel()
	const timeout = 300 * time.Millisecond
	te := newTunnelEnv(t, timeout)
	n := te.tunnelNode()
	tctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	id := uuid.New()
	opens := make(chan *daemonv1.TunnelOpen, 1)
	go func() {
		o, _ := n.nextOpen() // and ignore it, as a daemon that does not know the message
		opens <- o
	}()
	start := time.Now()
	status, _, body, err := te.open(tctx, id, n.nodeID, 8888)
	took := time.Since(start)
	if err != nil || status != http.StatusGatewayTimeout {
		t.Fatalf("%d %q %v, want 504", status, body, err)
	}
	if took < timeout || took > timeout+5*time.Second {
		t.Errorf("refused after %v, want the open timeout of %v", took, timeout)
	}
	if o := <-opens; o.GetTunnelId() != id.String() || o.GetPort() != 8888 {
		t.Errorf("the daemon was asked %v", o)
	}
	if status, _, body, err := n.dataPlane(tctx, id.String()); err != nil || status != http.StatusNotFound {
		t.Errorf("a stream after the timeout: %d %q %v, want 404", status, body, err)
	}
	if got := te.gw.Tunnels(); got != 0 {
		t.Errorf("the gateway counts %d open tunnels", got)
	}
}

// TestTunnelLifetimes: a tunnel ends with its node's session here (the API and the daemon both
// get an Abort frame with CodeGatewayLost), and with the gateway (CodeGoingAway); neither
// hangs.
func TestTunnelLifetimes(t *testing.T) {
	t.Parallel()
	te := newTunnelEnv(t, 0)
	n := te.tunnelNode()
	port := tunneltest.EchoPort(t, "bye")
	tctx, cancel := context.WithTimeout(ctx, 30*time.Second) // a hang fails the reads below
	defer cancel()

	// open opens a tunnel to the echo server and checks it carries bytes.
	open := func() (*tunnel.ByteStream, chan error) {
		t.Helper()
		daemon := make(chan error, 1)
		go func() {
			o, err := n.nextOpen()
			if err == nil {
				err = n.answer(tctx, o, true)
			}
			daemon <- err
		}()
		status, s, body, err := te.open(tctx, uuid.New(), n.nodeID, port)
		if err != nil || status != http.StatusOK {
			t.Fatalf("open: %d %q %v", status, body, err)
		}
		t.Cleanup(func() { s.Close() })
		if err := s.WriteFrame(tunnel.Frame{Type: tunnel.Data, Payload: []byte("ping")}); err != nil {
			t.Fatal(err)
		}
		if f, err := s.ReadFrame(); err != nil || f.Type != tunnel.Data || string(f.Payload) != "ping" {
			t.Fatalf("echo: type %d %q, %v", f.Type, f.Payload, err)
		}
		return s, daemon
	}

	s, daemon := open()
	te.gw.Revoke(uuid.MustParse(n.nodeID)) // ends the session, as a revocation or a newer session does
	if reason := wantAbort(t, s, tunnel.CodeGatewayLost); !strings.Contains(reason, "session ended") {
		t.Errorf("reason %q", reason)
	}
	if ae, ok := errors.AsType[*tunnel.AbortError](<-daemon); !ok || ae.Code != tunnel.CodeGatewayLost {
		t.Errorf("the daemon's pump: %v, want an abort with %d", ae, tunnel.CodeGatewayLost)
	}
	poll.Until(t, 5*time.Second, "the gateway counts no open tunnel", func() bool { return te.gw.Tunnels() == 0 })

	n.reopen(t)
	s, daemon = open()
	stopped := make(chan struct{})
	go func() { defer close(stopped); te.gw.Stop() }()
	wantAbort(t, s, tunnel.CodeGoingAway)
	if ae, ok := errors.AsType[*tunnel.AbortError](<-daemon); !ok || ae.Code != tunnel.CodeGoingAway {
		t.Errorf("the daemon's pump: %v, want an abort with %d", ae, tunnel.CodeGoingAway)
	}
	<-stopped
}

// TestTunnelAbortWithStalledReader: an API that stops reading while the node sends fills the
// windows, and the gateway's relay waits in a write; the node's session ending still ends the
// tunnel within the abort's grace: the daemon gets its Abort frame, and the relay is gone.
func TestTunnelAbortWithStalledReader(t *testing.T) {
	t.Parallel()
	te := newTunnelEnv(t, 0)
	n := te.tunnelNode()
	tctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	node := make(chan *tunnel.ByteStream, 1)
	go func() {
		o, err := n.nextOpen()
		if err != nil {
			t.Errorf("session: %v", err)
			close(node)
			return
		}
		status, s, body, err := n.dataPlane(tctx, o.GetTunnelId())
		if err != nil || status != http.StatusOK {
			t.Errorf("data-plane stream: %d %s %v", status, body, err)
			close(node)
			return
		}
		node <- s
	}()
	status, api, body, err := te.open(tctx, uuid.New(), n.nodeID, 9)
	if err != nil || status != http.StatusOK {
		t.Fatalf("open: %d %q %v", status, body, err)
	}
	defer api.Close() // and never read
	s := <-node
	if s == nil {
		t.FailNow()
	}
	defer s.Close()
	// Send until the windows are full (4 MiB a hop): the writes then wait, and so does the relay.
	chunk := make([]byte, tunnel.MaxPayload)
	var written atomic.Int64
	go func() {
		for s.WriteFrame(tunnel.Frame{Type: tunnel.Data, Payload: chunk}) == nil {
			written.Add(int64(len(chunk)))
		}
	}()
	last, still := int64(-1), 0
	poll.Until(t, 20*time.Second, "the node's writes stall on full windows", func() bool {
		w := written.Load()
		if w == last {
			still++
		} else {
			last, still = w, 0
		}
		return w > tunnelhop.StreamWindow && still >= 5
	}, poll.Every(50*time.Millisecond))
	te.gw.Revoke(uuid.MustParse(n.nodeID))
	start := time.Now()
	wantAbort(t, s, tunnel.CodeGatewayLost)
	t.Logf("the stalled tunnel ended %v after the session", time.Since(start))
	poll.Until(t, 10*time.Second, "the gateway counts no open tunnel", func() bool { return te.gw.Tunnels() == 0 })
}
