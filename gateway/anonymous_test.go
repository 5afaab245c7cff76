package gateway_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/binary"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/better-compute/better-compute/gateway"
	"github.com/better-compute/better-compute/gateway/gatewaytest"
	daemonv1 "github.com/better-compute/better-compute/gen/go/bettercompute/daemon/v1"
	"github.com/better-compute/better-compute/gen/go/bettercompute/daemon/v1/daemonv1connect"
	"github.com/better-compute/better-compute/internal/auth"
	"github.com/better-compute/better-compute/internal/daemon"
	"github.com/better-compute/better-compute/internal/poll"
	"github.com/better-compute/better-compute/internal/wsnet"
)

// endlessBody is a request body that sends n bytes and then never ends (until stop closes or
// the client closes it, which the HTTP/2 client waits for once the answer has come).
type endlessBody struct {
	left      int
	stop      <-chan struct{}
	closeOnce sync.Once
	closed    chan struct{}
}

func newEndlessBody(n int, stop <-chan struct{}) *endlessBody {
	return &endlessBody{left: n, stop: stop, closed: make(chan struct{})}
}

func (b *endlessBody) Close() error {
	b.closeOnce.Do(func() { close(b.closed) })
	return nil
}

func (b *endlessBody) Read(p []byte) (int, error) {
	if b.left == 0 {
		select {
		case <-b.stop:
		case <-b.closed:
		}
		return 0, io.ErrUnexpectedEOF
	}
	n := min(len(p), b.left)
	clear(p[:n])
	b.left -= n
	return n, nil
}

// floodClient is an HTTP/2 client of its own connection to addr, without a client certificate,
// dialling from the loopback address from.
func floodClient(addr, from string, rootPEM []byte) *http.Client {
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(rootPEM)
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}}
	tr := &http.Transport{
		TLSClientConfig: &tls.Config{RootCAs: roots}, Protocols: new(http.Protocols), DialContext: d.DialContext,
		// One connection: streams past the server's limit wait on it rather than opening more.
		MaxConnsPerHost: 1,
		HTTP2:           &http.HTTP2Config{StrictMaxConcurrentRequests: true},
	}
	tr.Protocols.SetHTTP2(true)
	return &http.Client{Transport: tr}
}

// flood sends streams Joins on c, each sending bodyBytes and never ending, until ctx ends.
func flood(ctx context.Context, c *http.Client, addr string, streams, bodyBytes int) {
	for range streams {
		go func() {
			req, err := http.NewRequestWithContext(ctx, http.MethodPost, "https://"+addr+daemonv1connect.DaemonServiceJoinProcedure,
				newEndlessBody(bodyBytes, ctx.Done()))
			if err != nil {
				return
			}
			req.Header.Set("Content-Type", "application/proto")
			if res, err := c.Do(req); err == nil {
				_, _ = io.Copy(io.Discard, res.Body)
				_ = res.Body.Close()
			}
		}()
	}
}

// serverSettings opens a connection without a certificate and reads the server's HTTP/2
// SETTINGS and the connection window it grants at once (65,535 plus its first WINDOW_UPDATE).
func serverSettings(t *testing.T, addr string, rootPEM []byte) (settings map[uint16]uint32, connWindow uint32) {
	t.Helper()
	raw, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	return serverSettingsOver(t, raw, rootPEM)
}

// serverSettingsOver is serverSettings over raw (a TCP connection or a WebSocket).
func serverSettingsOver(t *testing.T, raw net.Conn, rootPEM []byte) (settings map[uint16]uint32, connWindow uint32) {
	t.Helper()
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(rootPEM)
	c := tls.Client(raw, &tls.Config{RootCAs: roots, NextProtos: []string{"h2"}, ServerName: "127.0.0.1"})
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	preface := append([]byte("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"), 0, 0, 0, 4, 0, 0, 0, 0, 0) // and an empty SETTINGS
	if _, err := c.Write(preface); err != nil {
		t.Fatal(err)
	}
	settings, connWindow = map[uint16]uint32{}, 65_535
	// The server sends its SETTINGS, then its connection WINDOW_UPDATE, then the ack of ours.
	for range 4 {
		var h [9]byte
		if _, err := io.ReadFull(c, h[:]); err != nil {
			t.Fatal(err)
		}
		length := int(h[0])<<16 | int(h[1])<<8 | int(h[2])
		typ, flags, stream := h[3], h[4], binary.BigEndian.Uint32(h[5:])&0x7fffffff
		payload := make([]byte, length)
		if _, err := io.ReadFull(c, payload); err != nil {
			t.Fatal(err)
		}
		switch {
		case typ == 4 && flags&1 == 0: // SETTINGS
			for i := 0; i+6 <= len(payload); i += 6 {
				settings[binary.BigEndian.Uint16(payload[i:])] = binary.BigEndian.Uint32(payload[i+2:])
			}
		case typ == 8 && stream == 0: // WINDOW_UPDATE of the connection
			connWindow += binary.BigEndian.Uint32(payload) & 0x7fffffff
		case typ == 4: // the ack of ours: everything the server sends first has come
			return settings, connWindow
		}
	}
	return settings, connWindow
}

// heapInUse is the live heap after a collection.
func heapInUse() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// TestAnonymousFloodIsBounded is the attack of issue 31's finding 3: many connections without
// a certificate, each with many Join streams that send most of a message and never end. The
// connections past the caps are closed, the streams past the in-flight caps refused, each
// connection gets small windows and few streams, the heap stays small, and a connected node
// still completes a command meanwhile. Not parallel: it measures the process's heap.
//
//nolint:paralleltest // measures the heap of the whole test process
func TestAnonymousFloodIsBounded(t *testing.T) {
	e := newEnv(t)
	const conns, perAddress, inFlight = 20, 12, 10
	g := e.StartGateway("gw1", func(o *gateway.Options) {
		o.Limits.AnonymousConns, o.Limits.AnonymousConnsPerAddress = conns, perAddress
		o.Limits.JoinsInFlight, o.Limits.JoinsInFlightPerAddress = inFlight, 1000
		o.Limits.JoinReadTimeout = time.Minute // the streams hang for the whole test
	})
	f := e.startFake(g.Addr, e.token(1, time.Now().Add(time.Hour)))
	node := f.Status().NodeID

	settings, connWindow := serverSettings(t, g.Addr, e.bundle.RootPEM())
	// SETTINGS_MAX_CONCURRENT_STREAMS (3) and SETTINGS_INITIAL_WINDOW_SIZE (4).
	if settings[3] != 4 || settings[4] != 64<<10 || connWindow > 64<<10 {
		t.Errorf("an anonymous connection gets %d streams, a %d-byte stream window and a %d-byte connection window; want 4, 65536 and at most 65536",
			settings[3], settings[4], connWindow)
	}
	poll.Until(t, 5*time.Second, "the settings probe's connection is closed", func() bool { return g.AnonymousConns() == 0 })

	before := heapInUse()
	fctx, stop := context.WithCancel(ctx)
	defer stop()
	// 16 connections from each of two loopback addresses: 4 of each are past the per-address
	// cap, and 24 left are past the total of 20 by 4.
	const perClient, streams, body = 16, 8, 65_000
	var clients []*http.Client
	for i, from := range []string{"127.0.0.1", "127.0.0.2"} {
		for range perClient {
			c := floodClient(g.Addr, from, e.bundle.RootPEM())
			clients = append(clients, c)
			flood(fctx, c, g.Addr, streams, body)
		}
		if i == 0 {
			// The first address alone stays under the total: only its own cap can refuse it. A
			// loaded machine that dialled both at once could fill the total first.
			poll.Until(t, 20*time.Second, "the per-address cap refuses the first address's connections past it", func() bool {
				return g.AnonymousRefusals("address_connections") > 0 && g.AnonymousConns() == perAddress
			})
		}
	}
	poll.Until(t, 20*time.Second, "the caps refuse the connections past them", func() bool {
		// At least: a client whose connection is closed dials again for its waiting streams.
		return g.AnonymousRefusals("address_connections")+g.AnonymousRefusals("connections") >= 2*perClient-conns &&
			g.AnonymousConns() == conns
	})
	if g.AnonymousRefusals("address_connections") == 0 {
		t.Error("no connection was refused by the per-address cap")
	}
	poll.Until(t, 20*time.Second, "the in-flight cap refuses streams", func() bool { return g.AnonymousRefusals("joins") > 0 })

	// A connected node's command round trip still works.
	id := e.command(node, "echo", `{"data":{"during":"flood"}}`, "flood")
	g.Poke(uuid.MustParse(node))
	poll.Until(t, 10*time.Second, "the node's command succeeds during the flood", func() bool { s, _ := e.commandState(id); return s == "succeeded" })

	// Each held stream keeps at most a message in the handler, each connection at most its
	// window. The heap is the whole test process's, the flood's clients (and their HTTP/2
	// request buffers) included, so the bound is loose; internal/bench measures the gateway's
	// own (docs/benchmarks.md).
	grew := int64(heapInUse()) - int64(before)
	t.Logf("heap grew %d KiB under %d anonymous connections, %d refused, %d streams refused",
		grew>>10, g.AnonymousConns(), g.AnonymousRefusals("connections")+g.AnonymousRefusals("address_connections"), g.AnonymousRefusals("joins"))
	if grew > 64<<20 {
		t.Errorf("the heap grew by %d MiB under the flood, want under 64 MiB", grew>>20)
	}
	stop()
	poll.Until(t, 20*time.Second, "the flood's connections are closed and give back their slots", func() bool {
		for _, c := range clients {
			c.CloseIdleConnections()
		}
		return g.AnonymousConns() == 0
	})
}

// TestUnfinishedJoinIsCutOff: a Join whose message never ends is cut off after
// limits.gatewayJoinReadTimeout, and counted.
func TestUnfinishedJoinIsCutOff(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	g := e.StartGateway("gw1", func(o *gateway.Options) {
		o.Limits.JoinReadTimeout = 300 * time.Millisecond
	})
	c := floodClient(g.Addr, "127.0.0.1", e.bundle.RootPEM())
	defer c.CloseIdleConnections()
	rctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(rctx, http.MethodPost, "https://"+g.Addr+daemonv1connect.DaemonServiceJoinProcedure,
		newEndlessBody(1000, rctx.Done()))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/proto")
	start := time.Now()
	res, err := c.Do(req)
	if err == nil {
		_, err = io.Copy(io.Discard, res.Body)
		_ = res.Body.Close()
	}
	if errors.Is(rctx.Err(), context.DeadlineExceeded) {
		t.Fatalf("the unfinished Join was held for %s", time.Since(start))
	}
	t.Logf("cut off after %s: status %v, %v", time.Since(start), res != nil && res.StatusCode != 0, err)
	poll.Until(t, 5*time.Second, "the cut-off is counted", func() bool { return g.AnonymousRefusals("read_timeout") == 1 })
}

// lineCounter counts the lines written to it that contain a string.
type lineCounter struct {
	mu   sync.Mutex
	of   []byte
	seen int
}

func (l *lineCounter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for line := range bytes.Lines(p) {
		if bytes.Contains(line, l.of) {
			l.seen++
		}
	}
	return len(p), nil
}

func (l *lineCounter) count() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.seen
}

// queryCounter counts the queries that read join tokens.
type queryCounter struct {
	mu sync.Mutex
	n  int
}

func (q *queryCounter) TraceQueryStart(ctx context.Context, _ *pgx.Conn, data pgx.TraceQueryStartData) context.Context {
	if strings.Contains(data.SQL, "FROM join_tokens") {
		q.mu.Lock()
		q.n++
		q.mu.Unlock()
	}
	return ctx
}

func (q *queryCounter) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

func (q *queryCounter) count() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.n
}

// TestBadTokenFloodIsRateLimited is finding 4's flood of Joins with bad tokens from one address:
// past the burst they are refused with resource_exhausted before any database lookup, and the
// refusals are logged at most 10 times a minute.
func TestBadTokenFloodIsRateLimited(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	cfg := e.pool.Config()
	queries := &queryCounter{}
	cfg.ConnConfig.Tracer = queries
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	lines := &lineCounter{of: []byte("anonymous daemon traffic refused")}
	const burst, joins = 5, 60
	g := e.StartGateway("gw1", func(o *gateway.Options) {
		o.Pool = pool
		o.Logger = slog.New(slog.NewTextHandler(lines, nil))
		o.Limits.JoinRate, o.Limits.JoinBurst = 0.001, burst
	})
	key, err := daemon.NewKey()
	if err != nil {
		t.Fatal(err)
	}
	csr, err := daemon.NewCSR(key, "flood")
	if err != nil {
		t.Fatal(err)
	}
	client := anonymous(g.Addr, e.bundle.RootPEM())
	codes := map[connect.Code]int{}
	for range joins {
		_, err := client.Join(ctx, &daemonv1.JoinRequest{Token: auth.NewJoinToken().String(), Csr: csr, Hostname: "flood"})
		codes[connect.CodeOf(err)]++
	}
	if codes[connect.CodeUnauthenticated] != burst || codes[connect.CodeResourceExhausted] != joins-burst {
		t.Errorf("codes %v, want %d unauthenticated then %d resource_exhausted", codes, burst, joins-burst)
	}
	if n := queries.count(); n != burst {
		t.Errorf("%d join token lookups, want %d (the burst)", n, burst)
	}
	if n := g.AnonymousRefusals("join_rate"); n != joins-burst {
		t.Errorf("%d joins counted as refused by the rate, want %d", n, joins-burst)
	}
	if n := lines.count(); n == 0 || n > 10 {
		t.Errorf("%d refusal log lines, want 1 to 10", n)
	}
}

// TestAnonymousWebSocketsAreBoundedAlike: connections without a certificate that come over the
// WebSocket listener (issue 31: 20 of them took the gateway to 624 MiB) get the same small
// windows and few streams, and count against the same caps.
func TestAnonymousWebSocketsAreBoundedAlike(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	g := e.StartGateway("gw1", func(o *gateway.Options) {
		gatewaytest.WebSocket(t, false)(o)
		o.Limits.AnonymousConns = 2
	})
	dial := func() net.Conn {
		t.Helper()
		c, err := wsnet.Dial(ctx, g.WebSocketURL, wsnet.DialOptions{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Close() })
		return c
	}
	settings, connWindow := serverSettingsOver(t, dial(), e.bundle.RootPEM())
	if settings[3] != 4 || settings[4] != 64<<10 || connWindow > 64<<10 {
		t.Errorf("an anonymous WebSocket gets %d streams, a %d-byte stream window and a %d-byte connection window; want 4, 65536 and at most 65536",
			settings[3], settings[4], connWindow)
	}
	// Two more held open, a third past the total.
	for range 3 {
		c := tls.Client(dial(), &tls.Config{RootCAs: rootsOf(e.bundle.RootPEM()), NextProtos: []string{"h2"}, ServerName: "127.0.0.1"})
		t.Cleanup(func() { _ = c.Close() })
		if err := c.HandshakeContext(ctx); err != nil {
			t.Fatal(err)
		}
	}
	poll.Until(t, 10*time.Second, "the WebSocket past the total is refused", func() bool {
		return g.AnonymousConns() == 2 && g.AnonymousRefusals("connections") >= 1
	})
}

func rootsOf(pem []byte) *x509.CertPool {
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(pem)
	return roots
}
