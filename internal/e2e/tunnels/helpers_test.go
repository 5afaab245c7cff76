// Package tunnels_test runs tunnels end to end in one process: the real API (servertest, with
// its tunnel dialer holding a client certificate of the internal CA), a real gateway with its
// control API (gatewaytest), a FakeDaemon that joined it with a token and opens tunnels as bcd
// does, and TCP servers on the loopback as the node's ports. Clients are the Go SDK
// (client.Tunnel), a WebSocket opened on a ticket's URL, and the CLI's `tunnel --stdio` under
// ssh. bench_test.go measures the same path.
package tunnels_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/google/uuid"

	"github.com/better-compute/better-compute/client"
	"github.com/better-compute/better-compute/client/tunnel"
	"github.com/better-compute/better-compute/gateway"
	"github.com/better-compute/better-compute/gateway/gatewaytest"
	daemonv1 "github.com/better-compute/better-compute/gen/go/bettercompute/daemon/v1"
	iamv1 "github.com/better-compute/better-compute/gen/go/bettercompute/iam/v1"
	nodesv1 "github.com/better-compute/better-compute/gen/go/bettercompute/nodes/v1"
	"github.com/better-compute/better-compute/internal/daemon"
	"github.com/better-compute/better-compute/internal/dbtest"
	"github.com/better-compute/better-compute/internal/poll"
	"github.com/better-compute/better-compute/internal/tunnelhop"
	"github.com/better-compute/better-compute/server"
	"github.com/better-compute/better-compute/server/servertest"
)

func TestMain(m *testing.M) { dbtest.Main(m) }

var ctx = context.Background()

// env is the API and a gateway on a fresh database, and the clients of the root tenant's admin.
type env struct {
	*gatewaytest.Env
	t   testing.TB
	api *servertest.Env
	gw  *gatewaytest.Gateway
	// controlNet and daemonNet carry the gateway's connections (the API's to its control API,
	// the daemons' to it) when the env was made killable: cutting both is what killing the
	// gateway's process does to its peers.
	controlNet, daemonNet *proxy
	admin                 *client.Client
}

// newEnv starts the API and a gateway. A killable env reaches the gateway through proxies
// (killGateway); the benchmarks use direct connections.
func newEnv(t testing.TB, killable bool) *env {
	t.Helper()
	return newEnvWith(t, envOptions{killable: killable})
}

// envOptions configure newEnvWith.
type envOptions struct {
	// killable reaches the gateway through proxies (killGateway).
	killable bool
	// gateway, when set, adjusts the gateway's options (gatewaytest.WebSocket, for one).
	gateway func(*gateway.Options)
	// notifier gives the API a gateway.Notifier, so that commands and revocations reach the
	// gateway at once rather than at its next loop.
	notifier bool
}

// newEnvWith starts the API and a gateway as o says.
func newEnvWith(t testing.TB, o envOptions) *env {
	t.Helper()
	e := &env{Env: gatewaytest.New(t), t: t}
	dialer, err := tunnelhop.NewDialer(e.Bundle)
	if err != nil {
		t.Fatal(err)
	}
	var notifier *gateway.Notifier
	if o.notifier {
		if notifier, err = gateway.NewNotifier(e.Pool, e.Bundle, nil); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(notifier.Wait)
	}
	e.api = servertest.Start(t, e.Pool, func(so *server.Options) {
		so.Tunnels = server.TunnelOptions{Dialer: dialer}
		if notifier != nil {
			so.Notifier = notifier
		}
	})
	configure := o.gateway
	if o.killable {
		e.controlNet = newProxy(t)
		configure = func(g *gateway.Options) {
			g.ControlURL = "https://" + e.controlNet.addr()
			if o.gateway != nil {
				o.gateway(g)
			}
		}
	}
	e.gw = e.StartGateway("gw1", configure)
	if o.killable {
		e.controlNet.to(e.gw.ControlURL[len("https://"):])
		e.daemonNet = newProxy(t)
		e.daemonNet.to(e.gw.Addr)
	}
	e.admin = e.client(e.api.AdminKey)
	return e
}

// client is the Go SDK calling the API with key.
func (e *env) client(key string) *client.Client {
	return client.New(e.api.URL, client.WithAPIKey(key))
}

// killGateway does to the gateway's peers what killing its process does: every connection to it
// (the API's tunnel streams, the daemons' sessions and data planes) is reset at once, with no
// frame or GOAWAY sent; then it stops.
func (e *env) killGateway() {
	e.controlNet.cut()
	e.daemonNet.cut()
	e.daemonNet.close() // the daemons cannot reconnect to it either
	e.gw.Stop()
}

// fakeOptions configure startFake.
type fakeOptions struct {
	// tunnelPorts is the daemon's allow list.
	tunnelPorts []int
	// tunnelDial, when set, opens the connections of the daemon's tunnel data plane (the
	// benchmarks delay them with sim.DelayConn, as the simulator's TunnelRTT does).
	tunnelDial func(ctx context.Context, network, addr string) (net.Conn, error)
	// dialer, when set, adjusts the daemon's Dialer (its transport, WebSocket URL, proxy),
	// for the join and the session alike.
	dialer func(*daemon.Dialer)
}

// node is a FakeDaemon joined with a token of the root tenant, with two H100s in its inventory,
// holding a session on the env's gateway.
type node struct {
	id   string
	fake *daemon.Fake
	// stop ends the daemon and waits for it.
	stop func()
}

// startFake joins a FakeDaemon and runs it until stop or the end of the test.
func (e *env) startFake(o fakeOptions) *node {
	e.t.Helper()
	gw := e.gw.Addr
	if e.daemonNet != nil {
		gw = e.daemonNet.addr()
	}
	host := "host-" + uuid.NewString()[:8]
	inv := &daemonv1.Inventory{Hostname: host, Os: "linux", Cpus: 16, MemoryBytes: 64 << 30}
	for i := range 2 {
		inv.Gpus = append(inv.Gpus, &daemonv1.Gpu{Index: int32(i), Model: "H100", MemoryBytes: 80 << 30, Uuid: fmt.Sprintf("GPU-%s-%d", host, i)})
	}
	d := daemon.Dialer{Gateway: gw, TunnelDialContext: o.tunnelDial}
	if o.dialer != nil {
		o.dialer(&d)
	}
	f, err := daemon.JoinFake(ctx, e.Bundle.RootPEM(), e.Token(1, time.Now().Add(time.Hour)), host, daemon.FakeOptions{
		Dialer: d, Inventory: inv, TunnelPorts: o.tunnelPorts,
	})
	if err != nil {
		e.t.Fatal(err)
	}
	fctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); _ = f.Run(fctx) }()
	stop := sync.OnceFunc(func() { cancel(); <-done })
	e.t.Cleanup(stop)
	n := &node{id: f.Status().NodeID, fake: f, stop: stop}
	poll.Until(e.t, 60*time.Second, "the daemon connects", func() bool { return f.Status().Connected })
	return n
}

// allow sets the node's spec to allow tunnels to ports.
func (e *env) allow(n *node, ports ...int) {
	e.t.Helper()
	spec := &nodesv1.NodeSpec{}
	for _, p := range ports {
		spec.TunnelPorts = append(spec.TunnelPorts, int32(p))
	}
	if _, err := e.admin.Nodes.UpdateSpec(ctx, &nodesv1.UpdateSpecRequest{Id: n.id, Spec: spec}); err != nil {
		e.t.Fatal(err)
	}
}

// tenant creates a tenant below the root and returns its id and owner key.
func (e *env) tenant(name string) (uuid.UUID, string) {
	e.t.Helper()
	res, err := e.admin.IAM.CreateTenant(ctx, &iamv1.CreateTenantRequest{Name: name})
	if err != nil {
		e.t.Fatal(err)
	}
	return uuid.MustParse(res.GetTenant().GetId()), res.GetOwnerApiKey()
}

// open opens a tunnel through the SDK, failing the test if it does not open.
func (e *env) open(c *client.Client, n *node, port int) *client.TunnelConn {
	e.t.Helper()
	octx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	conn, err := c.Tunnel(octx, n.id, port)
	if err != nil {
		e.t.Fatalf("open a tunnel to %s:%d: %v", n.id, port, err)
	}
	e.t.Cleanup(func() { _ = conn.Close() })
	return conn
}

// tunnelRow is what the tunnels table says of a tunnel.
type tunnelRow struct {
	opened, closed bool
	code           int32
}

func (e *env) row(id string) tunnelRow {
	e.t.Helper()
	var r tunnelRow
	var code *int32
	if err := e.Pool.QueryRow(ctx, `SELECT opened_at IS NOT NULL, closed_at IS NOT NULL, close_code FROM tunnels WHERE id = $1`, id).
		Scan(&r.opened, &r.closed, &code); err != nil {
		e.t.Fatal(err)
	}
	if code != nil {
		r.code = *code
	}
	return r
}

// dialTicket opens a ticket's URL as a WebSocket with key, as the SDK does, and returns the
// stream or the status the upgrade was refused with.
func dialTicket(t testing.TB, url, key string) (*tunnel.WebSocketStream, int, error) {
	t.Helper()
	h := http.Header{}
	h.Set("Authorization", "Bearer "+key)
	dctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	conn, res, err := websocket.Dial(dctx, url, &websocket.DialOptions{HTTPHeader: h, Subprotocols: []string{tunnel.Subprotocol}})
	status := 0
	if res != nil {
		status = res.StatusCode
		if res.Body != nil {
			_ = res.Body.Close()
		}
	}
	if err != nil {
		return nil, status, err
	}
	t.Cleanup(func() { _ = conn.CloseNow() })
	sctx, scancel := context.WithTimeout(ctx, 30*time.Second)
	t.Cleanup(scancel)
	return tunnel.NewWebSocketStream(sctx, conn), status, nil
}

// port is a TCP server on the loopback, a port of the node: each connection it accepts runs
// handle. It counts the connections it accepted and those whose handler returned.
type port struct {
	ln       net.Listener
	port     int
	accepted atomic.Int64
	ended    atomic.Int64
}

// listen starts a port whose connections run handle, until the test ends.
func listen(t testing.TB, handle func(*net.TCPConn)) *port {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &port{ln: ln, port: ln.Addr().(*net.TCPAddr).Port}
	var wg sync.WaitGroup
	var mu sync.Mutex
	conns := map[net.Conn]bool{}
	t.Cleanup(func() {
		_ = ln.Close()
		mu.Lock()
		for c := range conns {
			_ = c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			p.accepted.Add(1)
			mu.Lock()
			conns[c] = true
			mu.Unlock()
			wg.Go(func() {
				defer p.ended.Add(1)
				defer func() {
					mu.Lock()
					delete(conns, c)
					mu.Unlock()
					_ = c.Close()
				}()
				handle(c.(*net.TCPConn))
			})
		}
	})
	return p
}

// echo is the node's service of most tests: it echoes what it reads and, once the client
// half-closed, writes the SHA-256 of what it read (64 hex digits) as its last bytes and closes:
// both the node's hash of the bytes and the server's last bytes after the client's EOF.
func echo(c *net.TCPConn) {
	h := sha256.New()
	if _, err := io.Copy(c, io.TeeReader(c, h)); err != nil {
		return
	}
	_, _ = io.WriteString(c, hex.EncodeToString(h.Sum(nil)))
	_ = c.CloseWrite()
}

// sink reads to the end, then writes how many bytes it read, in decimal, and closes: the node's
// end of the throughput benchmarks.
func sink(c *net.TCPConn) {
	n, err := io.Copy(io.Discard, c)
	if err != nil {
		return
	}
	_, _ = io.WriteString(c, strconv.FormatInt(n, 10))
	_ = c.CloseWrite()
}

// halfCloser is a connection with a half-close: a TunnelConn, or TCP.
type halfCloser interface {
	io.ReadWriter
	CloseWrite() error
}

// transferred is what a client saw of an echo transfer.
type transferred struct {
	sent, echoed string // SHA-256 (hex) of the bytes sent, and of those echoed
	trailer      string // what came after the echo: the node's hash of what it read
	err          error
}

// transfer sends n bytes of a seeded PRNG stream over c to an echo port and half-closes, reading
// the echo meanwhile, until the node's end closes.
func transfer(c halfCloser, n int64, seed uint64) transferred {
	var out transferred
	var werr error
	var wg sync.WaitGroup
	wg.Go(func() {
		h := sha256.New()
		src := io.LimitReader(rand.NewChaCha8([32]byte{byte(seed), byte(seed >> 8), byte(seed >> 16), byte(seed >> 24)}), n)
		if _, werr = io.CopyBuffer(io.MultiWriter(c, h), src, make([]byte, tunnel.MaxPayload)); werr == nil {
			werr = c.CloseWrite()
		}
		out.sent = hex.EncodeToString(h.Sum(nil))
	})
	h := sha256.New()
	_, err := io.CopyBuffer(h, io.LimitReader(c, n), make([]byte, tunnel.MaxPayload))
	out.echoed = hex.EncodeToString(h.Sum(nil))
	if err == nil {
		var b []byte
		b, err = io.ReadAll(io.LimitReader(c, 1024))
		out.trailer = string(b)
	}
	wg.Wait()
	out.err = errors.Join(err, werr)
	return out
}

// check fails the test unless the transfer arrived whole both ways, with the node's hash last.
func (x transferred) check(t testing.TB, what string) {
	t.Helper()
	if x.err != nil {
		t.Fatalf("%s: %v", what, x.err)
	}
	if x.echoed != x.sent || x.trailer != x.sent {
		t.Fatalf("%s: sent SHA-256 %s, the node read %q, echoed %s", what, x.sent, x.trailer, x.echoed)
	}
}

// proxy forwards TCP connections to an upstream and can reset them all at once.
type proxy struct {
	ln net.Listener
	mu sync.Mutex
	up string
	// conns are the open connections, both sides.
	conns map[*net.TCPConn]bool
}

func newProxy(t testing.TB) *proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &proxy{ln: ln, conns: map[*net.TCPConn]bool{}}
	var wg sync.WaitGroup
	t.Cleanup(func() { p.close(); p.cut(); wg.Wait() })
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			p.mu.Lock()
			up := p.up
			p.mu.Unlock()
			u, err := net.Dial("tcp", up)
			if err != nil {
				_ = c.Close()
				continue
			}
			down, upc := c.(*net.TCPConn), u.(*net.TCPConn)
			p.mu.Lock()
			p.conns[down], p.conns[upc] = true, true
			p.mu.Unlock()
			// Each way is copied until its end, which is passed on as a half-close; once both
			// ways ended, both connections are closed.
			var ways atomic.Int32
			ways.Store(2)
			pipe := func(dst, src *net.TCPConn) {
				_, _ = io.Copy(dst, src)
				_ = dst.CloseWrite()
				if ways.Add(-1) == 0 {
					p.mu.Lock()
					delete(p.conns, down)
					delete(p.conns, upc)
					p.mu.Unlock()
					_ = down.Close()
					_ = upc.Close()
				}
			}
			wg.Go(func() { pipe(upc, down) })
			wg.Go(func() { pipe(down, upc) })
		}
	})
	return p
}

// to sets the upstream, before the first connection.
func (p *proxy) to(addr string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.up = addr
}

func (p *proxy) addr() string { return p.ln.Addr().String() }

// close stops accepting connections.
func (p *proxy) close() { _ = p.ln.Close() }

// cut resets every connection (RST, not FIN) and returns how many there were.
func (p *proxy) cut() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := len(p.conns)
	for c := range p.conns {
		_ = c.SetLinger(0)
		_ = c.Close()
		delete(p.conns, c)
	}
	return n
}
