package daemon_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"io"
	"log"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/better-compute/better-compute/client/tunnel"
	daemonv1 "github.com/better-compute/better-compute/gen/go/bettercompute/daemon/v1"
	"github.com/better-compute/better-compute/gen/go/bettercompute/daemon/v1/daemonv1connect"
	"github.com/better-compute/better-compute/internal/daemon"
	"github.com/better-compute/better-compute/internal/poll"
	"github.com/better-compute/better-compute/internal/tunnelhop"
)

// nodeURI is the identity of the test's node certificate.
const nodeURI = "spiffe://" + td + "/node/n1"

// tunnelGateway is a gateway for tunnel tests: its session sends the TunnelOpens the test
// queues and counts heartbeats, and its data-plane route hands each stream to the test. It
// requires a client certificate of the test CA, and records the one each stream presented.
type tunnelGateway struct {
	daemonv1connect.UnimplementedDaemonServiceHandler
	opens      chan *daemonv1.TunnelOpen
	streams    chan *dataStream
	heartbeats atomic.Int64
	// sessionAddr is the daemon's address on the session's connection.
	sessionAddr atomic.Pointer[string]
}

// dataStream is a daemon's data-plane stream as the gateway sees it; closing done ends the
// gateway's side.
type dataStream struct {
	*tunnel.ByteStream
	id, remoteAddr, peer string
	done                 chan struct{}
	once                 sync.Once
}

func (s *dataStream) end() { s.once.Do(func() { close(s.done) }) }

func (g *tunnelGateway) Session(ctx context.Context, stream *connect.BidiStream[daemonv1.SessionRequest, daemonv1.SessionResponse]) error {
	addr := stream.Peer().Addr
	g.sessionAddr.Store(&addr)
	if _, err := stream.Receive(); err != nil { // the hello
		return err
	}
	if err := stream.Send(&daemonv1.SessionResponse{Msg: &daemonv1.SessionResponse_Welcome{Welcome: &daemonv1.Welcome{
		NodeId: "n1", HeartbeatIntervalSeconds: 1,
	}}}); err != nil {
		return err
	}
	go func() {
		for {
			m, err := stream.Receive()
			if err != nil {
				return
			}
			if m.GetHeartbeat() != nil {
				g.heartbeats.Add(1)
			}
		}
	}()
	for {
		select {
		case <-ctx.Done():
			return nil
		case o := <-g.opens:
			if err := stream.Send(&daemonv1.SessionResponse{Msg: &daemonv1.SessionResponse_TunnelOpen{TunnelOpen: o}}); err != nil {
				return err
			}
		}
	}
}

// dataPlane is the route a daemon POSTs a tunnel's stream to.
func (g *tunnelGateway) dataPlane(w http.ResponseWriter, r *http.Request) {
	peer := ""
	if r.TLS != nil && len(r.TLS.PeerCertificates) > 0 && len(r.TLS.PeerCertificates[0].URIs) > 0 {
		peer = r.TLS.PeerCertificates[0].URIs[0].String()
	}
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	if err := rc.Flush(); err != nil {
		return
	}
	s := &dataStream{
		ByteStream: tunnel.NewByteStream(r.Body, w, rc.Flush, nil, nil),
		id:         r.PathValue("id"), remoteAddr: r.RemoteAddr, peer: peer, done: make(chan struct{}),
	}
	select {
	case g.streams <- s:
	case <-r.Context().Done():
		return
	}
	select {
	case <-s.done:
	case <-r.Context().Done():
	}
}

// tunnelEnv is a daemon (an Agent or a FakeDaemon) holding a session with a tunnelGateway.
type tunnelEnv struct {
	gw    *tunnelGateway
	agent *daemon.Agent
	logs  *syncBuffer
	// stop stops the agent and waits for Run to return.
	stop func()
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

// record is the first log record with message msg, nil if none.
func (s *syncBuffer) record(msg string) map[string]any {
	for line := range strings.Lines(s.String()) {
		var r map[string]any
		if json.Unmarshal([]byte(line), &r) == nil && r["msg"] == msg {
			return r
		}
	}
	return nil
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// startTunnelEnv starts a gateway and a daemon allowing ports (fake: a FakeDaemon), and waits
// for its session.
func startTunnelEnv(t *testing.T, fake bool, ports []int, maxTunnels int) *tunnelEnv {
	t.Helper()
	ca := newCA(t)
	cert, _, _ := ca.issue(t, "spiffe://"+td+"/gateway/eu/gw-1", x509.ExtKeyUsageServerAuth)
	_, nodeChain, nodeKey := ca.issue(t, nodeURI, x509.ExtKeyUsageClientAuth)
	g := &tunnelGateway{opens: make(chan *daemonv1.TunnelOpen, 8), streams: make(chan *dataStream, 8)}
	_, h := daemonv1connect.NewDaemonServiceHandler(g)
	mux := http.NewServeMux()
	mux.Handle("/", h)
	mux.HandleFunc("POST "+tunnelhop.DataPlanePath+"{id}", g.dataPlane)
	srv := httptest.NewUnstartedServer(mux)
	srv.EnableHTTP2 = true
	srv.Config.ErrorLog = log.New(io.Discard, "", 0)
	pool := x509.NewCertPool()
	pool.AddCert(ca.cert)
	// The node certificate is required: a stream without it never reaches the handler.
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{cert}, ClientAuth: tls.RequireAndVerifyClientCert, ClientCAs: pool}
	srv.StartTLS()
	t.Cleanup(srv.Close)

	logs := &syncBuffer{}
	logger := slog.New(slog.NewJSONHandler(logs, nil))
	id := &daemon.Identity{NodeID: "n1", TrustDomain: td, Key: nodeKey, ChainPEM: nodeChain, RootPEM: ca.pem}
	dialer := daemon.Dialer{Gateway: srv.Listener.Addr().String()}
	var a *daemon.Agent
	if fake {
		f, err := daemon.NewFake(id, daemon.FakeOptions{Dialer: dialer, Logger: logger, TunnelPorts: ports})
		if err != nil {
			t.Fatal(err)
		}
		a = f.Agent()
	} else {
		var err error
		a, err = daemon.NewAgent(daemon.Options{Dialer: dialer, Identity: id, Logger: logger, TunnelPorts: ports, MaxTunnels: maxTunnels})
		if err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() { defer close(done); _ = a.Run(ctx) }()
	stop := sync.OnceFunc(func() { cancel(); <-done })
	t.Cleanup(stop)
	poll.Until(t, 10*time.Second, "the daemon holds its session", func() bool { return a.Status().Connected },
		poll.Report(logs.String))
	return &tunnelEnv{gw: g, agent: a, logs: logs, stop: stop}
}

// open sends a TunnelOpen and returns the data-plane stream it brings.
func (e *tunnelEnv) open(t *testing.T, id string, port int) *dataStream {
	t.Helper()
	e.gw.opens <- &daemonv1.TunnelOpen{TunnelId: id, Port: int32(port)}
	select {
	case s := <-e.gw.streams:
		t.Cleanup(s.end)
		if s.id != id || s.peer != nodeURI {
			t.Fatalf("data-plane stream for tunnel %q from %q; want %q from %q", s.id, s.peer, id, nodeURI)
		}
		return s
	case <-time.After(10 * time.Second):
		t.Fatalf("no data-plane stream for tunnel %s\n%s", id, e.logs)
		return nil
	}
}

// readFrames reads frames until the stream ends (io.EOF) or a frame of type until arrives, and
// returns the data and the frames' types in order.
func readFrames(t *testing.T, s tunnel.Stream, until tunnel.FrameType) (data []byte, types []tunnel.FrameType, last tunnel.Frame) {
	t.Helper()
	type result struct {
		data  []byte
		types []tunnel.FrameType
		last  tunnel.Frame
		err   error
	}
	ch := make(chan result, 1)
	go func() {
		var r result
		for {
			f, err := s.ReadFrame()
			if err != nil {
				if !errors.Is(err, io.EOF) {
					r.err = err
				}
				ch <- r
				return
			}
			r.types = append(r.types, f.Type)
			if f.Type == tunnel.Data {
				r.data = append(r.data, f.Payload...)
			}
			r.last = tunnel.Frame{Type: f.Type, Payload: bytes.Clone(f.Payload)}
			if f.Type == until {
				ch <- r
				return
			}
		}
	}()
	select {
	case r := <-ch:
		if r.err != nil {
			t.Fatalf("read frames: %v", r.err)
		}
		return r.data, r.types, r.last
	case <-time.After(20 * time.Second):
		t.Fatal("read frames: timed out")
		return nil, nil, tunnel.Frame{}
	}
}

// listen starts a TCP listener on loopback and returns it with its port.
func listen(t *testing.T) (net.Listener, int) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	return ln, ln.Addr().(*net.TCPAddr).Port
}

// TestTunnelRoundTrip opens a tunnel to an allowed port whose server reads to EOF and only then
// answers: the bytes cross both ways, the client's half-close reaches the server as EOF, the
// server's answer after it arrives, and both ends close normally. The same for a FakeDaemon.
func TestTunnelRoundTrip(t *testing.T) {
	t.Parallel()
	for _, fake := range []bool{false, true} {
		name := map[bool]string{false: "agent", true: "fake"}[fake]
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ln, port := listen(t)
			served := make(chan error, 1)
			go func() {
				c, err := ln.Accept()
				if err != nil {
					served <- err
					return
				}
				defer c.Close()
				got, err := io.ReadAll(c) // until the client's half-close
				if err == nil {
					_, err = c.Write(append(got, "bye"...))
				}
				served <- err
			}()
			e := startTunnelEnv(t, fake, []int{1, port}, 0)
			s := e.open(t, "t-"+name, port)

			payload := make([]byte, 300<<10) // several frames
			_, _ = rand.Read(payload)
			for p := payload; len(p) > 0; {
				n := min(len(p), tunnel.MaxPayload)
				if err := s.WriteFrame(tunnel.Frame{Type: tunnel.Data, Payload: p[:n]}); err != nil {
					t.Fatal(err)
				}
				p = p[n:]
			}
			if err := s.WriteFrame(tunnel.Frame{Type: tunnel.CloseWrite}); err != nil {
				t.Fatal(err)
			}
			data, types, _ := readFrames(t, s, tunnel.CloseWrite)
			if want := append(bytes.Clone(payload), "bye"...); !bytes.Equal(data, want) {
				t.Fatalf("got %d bytes back, want %d (the payload and the answer after EOF)", len(data), len(want))
			}
			if types[len(types)-1] != tunnel.CloseWrite {
				t.Fatalf("frames %v: want a close-write last", types)
			}
			if err := <-served; err != nil {
				t.Fatalf("the port's server: %v", err)
			}
			// The daemon sent everything: its request body ends.
			if _, types, _ := readFrames(t, s, 255); len(types) != 0 {
				t.Fatalf("frames after the close-write: %v", types)
			}
			s.end()
			var closed map[string]any
			poll.Until(t, 10*time.Second, "the daemon logs the tunnel closed", func() bool {
				closed = e.logs.record("tunnel closed")
				return closed != nil && e.agent.Status().Tunnels == 0
			}, poll.Report(e.logs.String))
			if closed["tunnel_id"] != "t-"+name || closed["code"] != 1000.0 || closed["bytes_to_port"] != float64(len(payload)) || closed["bytes_from_port"] != float64(len(payload)+3) {
				t.Errorf("the close logged: %v", closed)
			}
			if logs := e.logs.String(); strings.Contains(logs, "bye") {
				t.Errorf("the log holds payload bytes:\n%s", logs)
			}
		})
	}
}

// TestTunnelRefusals: a port off the allow list is refused with one abort frame (4003) and
// never dialled; a port nothing listens on is refused with 4005.
func TestTunnelRefusals(t *testing.T) {
	t.Parallel()
	ln, port := listen(t)
	_, otherPort := listen(t)
	closed, closedPort := listen(t)
	closed.Close()
	e := startTunnelEnv(t, false, []int{otherPort, closedPort}, 0)

	s := e.open(t, "t-refused", port)
	_, types, last := readFrames(t, s, 255)
	s.end()
	code, reason := tunnel.ParseAbort(last.Payload)
	if len(types) != 1 || types[0] != tunnel.Abort || code != tunnel.CodePortRefused || !strings.Contains(reason, "not in the daemon's tunnel allow list") {
		t.Fatalf("frames %v, last abort %d %q; want one abort 4003", types, code, reason)
	}
	// Nothing reached the listener: a connection would be in its backlog, and Accept takes one
	// from there at once.
	_ = ln.(*net.TCPListener).SetDeadline(time.Now().Add(100 * time.Millisecond))
	if c, err := ln.Accept(); err == nil {
		c.Close()
		t.Fatal("the daemon dialled a port off its allow list")
	} else if !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatal(err)
	}

	s = e.open(t, "t-dial-failed", closedPort)
	_, types, last = readFrames(t, s, 255)
	s.end()
	if code, reason := tunnel.ParseAbort(last.Payload); len(types) != 1 || types[0] != tunnel.Abort || code != tunnel.CodeDialFailed {
		t.Fatalf("frames %v, last abort %d %q; want one abort 4005", types, code, reason)
	}
}

// TestTunnelLimit: a tunnel beyond MaxTunnels is refused (4009) while the others carry on, and
// stopping the daemon closes the open ones.
func TestTunnelLimit(t *testing.T) {
	t.Parallel()
	ln, port := listen(t)
	accepted := make(chan net.Conn, 2)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			accepted <- c
		}
	}()
	e := startTunnelEnv(t, false, []int{port}, 1)
	first := e.open(t, "t-1", port)
	var c net.Conn
	select {
	case c = <-accepted:
		defer c.Close()
	case <-time.After(10 * time.Second):
		t.Fatal("the first tunnel did not dial its port")
	}
	if err := first.WriteFrame(tunnel.Frame{Type: tunnel.Data, Payload: []byte("ping")}); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 4)
	if _, err := io.ReadFull(c, buf); err != nil || string(buf) != "ping" {
		t.Fatalf("the port read %q, %v", buf, err)
	}

	s := e.open(t, "t-2", port)
	_, types, last := readFrames(t, s, 255)
	if code, reason := tunnel.ParseAbort(last.Payload); len(types) != 1 || code != tunnel.CodeReset || reason != "too many tunnels on the node" {
		t.Fatalf("frames %v, last abort %d %q; want one abort 4009", types, code, reason)
	}
	if n := e.agent.Status().Tunnels; n != 1 {
		t.Fatalf("%d tunnels open, want 1", n)
	}

	// Stopping the daemon ends the tunnel: Run returns only once it is closed.
	e.stop()
	if n := e.agent.Status().Tunnels; n != 0 {
		t.Fatalf("%d tunnels open after Run returned", n)
	}
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := c.Read(buf); err == nil || errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("the port's connection after the daemon stopped: %v", err)
	}
}

// TestTunnelKeepsSessionAlive: a tunnel streaming as fast as it can, then one whose reader at
// the gateway stopped (its windows full), never holds up the session's heartbeats, because the
// data plane has a connection of its own.
func TestTunnelKeepsSessionAlive(t *testing.T) {
	t.Parallel()
	ln, port := listen(t)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		chunk := make([]byte, 64<<10)
		for {
			if _, err := c.Write(chunk); err != nil {
				return
			}
		}
	}()
	e := startTunnelEnv(t, false, []int{port}, 0)
	s := e.open(t, "t-bulk", port)
	if addr := e.gw.sessionAddr.Load(); addr == nil || *addr == s.remoteAddr {
		t.Fatalf("the data-plane stream came from %s, the session's connection", s.remoteAddr)
	}

	// Flowing: count what arrives while two heartbeats come.
	var received atomic.Int64
	stopReading := make(chan struct{})
	readerDone := make(chan struct{})
	go func() {
		defer close(readerDone)
		for {
			select {
			case <-stopReading:
				return
			default:
			}
			f, err := s.ReadFrame()
			if err != nil {
				return
			}
			received.Add(int64(len(f.Payload)))
		}
	}()
	h := e.gw.heartbeats.Load()
	poll.Until(t, 10*time.Second, "two heartbeats while the tunnel streams", func() bool {
		return e.gw.heartbeats.Load() >= h+2
	})
	flowing := received.Load()
	if flowing < 1<<20 {
		t.Fatalf("only %d bytes crossed the tunnel", flowing)
	}

	// Stalled: the gateway stops reading, the windows fill, and the session goes on.
	close(stopReading)
	<-readerDone
	h = e.gw.heartbeats.Load()
	poll.Until(t, 10*time.Second, "two heartbeats while the tunnel is stalled", func() bool {
		return e.gw.heartbeats.Load() >= h+2
	})
	if !e.agent.Status().Connected {
		t.Fatal("the session broke while the tunnel was stalled")
	}
	t.Logf("%d bytes crossed before the stall", flowing)
}

// TestTunnelPortsValidated: an allow list with a port out of range or too many ports makes no
// agent.
func TestTunnelPortsValidated(t *testing.T) {
	t.Parallel()
	ca := newCA(t)
	_, nodeChain, nodeKey := ca.issue(t, nodeURI, x509.ExtKeyUsageClientAuth)
	id := &daemon.Identity{NodeID: "n1", TrustDomain: td, Key: nodeKey, ChainPEM: nodeChain, RootPEM: ca.pem}
	most := make([]int, daemon.MaxTunnelPorts)
	for i := range most {
		most[i] = 1000 + i
	}
	for _, tc := range []struct {
		ports []int
		ok    bool
	}{
		{nil, true}, {[]int{1, 22, 65535}, true}, {most, true},
		{[]int{0}, false}, {[]int{22, 65536}, false}, {[]int{-1}, false}, {append(most, 22), false},
	} {
		_, err := daemon.NewAgent(daemon.Options{Dialer: daemon.Dialer{Gateway: "127.0.0.1:1"}, Identity: id, TunnelPorts: tc.ports})
		if (err == nil) != tc.ok {
			t.Errorf("%d ports %v…: %v", len(tc.ports), tc.ports[:min(len(tc.ports), 3)], err)
		}
	}
}
