package tunnels_test

import (
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/coder/websocket"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/better-compute/better-compute/client/tunnel"
	"github.com/better-compute/better-compute/gen/db"
	gatewayv1 "github.com/better-compute/better-compute/gen/go/bettercompute/gateway/v1"
	iamv1 "github.com/better-compute/better-compute/gen/go/bettercompute/iam/v1"
	nodesv1 "github.com/better-compute/better-compute/gen/go/bettercompute/nodes/v1"
	"github.com/better-compute/better-compute/gen/go/bettercompute/nodes/v1/nodesv1connect"
	tunnelsv1 "github.com/better-compute/better-compute/gen/go/bettercompute/tunnels/v1"
	"github.com/better-compute/better-compute/gen/go/bettercompute/tunnels/v1/tunnelsv1connect"
	"github.com/better-compute/better-compute/internal/auth"
	"github.com/better-compute/better-compute/internal/capacity/capacitytest"
	"github.com/better-compute/better-compute/internal/dbtest"
	"github.com/better-compute/better-compute/internal/pki"
	"github.com/better-compute/better-compute/internal/tunnelhop"
	"github.com/better-compute/better-compute/server"
	"github.com/better-compute/better-compute/server/servertest"
)

func TestMain(m *testing.M) { dbtest.Main(m) }

var ctx = context.Background()

// gatewayID is the fake gateway's id in the gateways table.
const gatewayID = "gw-fake"

// env is the API on a fresh database, with a fake gateway whose control API the API streams
// tunnels to, and a node of the root tenant with a session there whose spec allows ports 22 and
// 8888.
type env struct {
	*servertest.Env
	gw   *fakeGateway
	root uuid.UUID
	node uuid.UUID
}

// newEnv starts it; configure adjusts the tunnel options (the dialer is set already).
func newEnv(t *testing.T, configure func(*server.TunnelOptions)) *env {
	t.Helper()
	return newEnvWithReadTimeout(t, configure, 0)
}

// newEnvWithReadTimeout starts it with the HTTP server's read timeout (none when zero), which
// servertest leaves unset.
func newEnvWithReadTimeout(t *testing.T, configure func(*server.TunnelOptions), readTimeout time.Duration) *env {
	t.Helper()
	pool := dbtest.Pool(t)
	bundle, err := pki.Init(ctx, pool, servertest.Secret, "test.example")
	if err != nil {
		t.Fatal(err)
	}
	gw := newFakeGateway(t, bundle)
	dialer, err := tunnelhop.NewDialer(bundle)
	if err != nil {
		t.Fatal(err)
	}
	opts := func(o *server.Options) {
		o.Tunnels = server.TunnelOptions{Dialer: dialer}
		if configure != nil {
			configure(&o.Tunnels)
		}
	}
	var api *servertest.Env
	if readTimeout == 0 {
		api = servertest.Start(t, pool, opts)
	} else {
		api = startWithReadTimeout(t, pool, opts, readTimeout)
	}
	e := &env{Env: api, gw: gw, root: capacitytest.RootTenant(t, pool)}
	e.node = capacitytest.Nodes(t, pool, e.root, 1, capacitytest.NodeSpec{GPUs: 2, Model: "H100", CPUs: 16, MemoryBytes: 64 << 30})[0]
	res, err := e.nodes(e.AdminKey).UpdateSpec(ctx, &nodesv1.UpdateSpecRequest{
		Id: e.node.String(), Spec: &nodesv1.NodeSpec{TunnelPorts: []int32{8888, 22, 8888}},
	})
	if err != nil {
		t.Fatal(err)
	}
	if got := res.GetNode().GetSpec().GetTunnelPorts(); len(got) != 2 || got[0] != 22 || got[1] != 8888 {
		t.Fatalf("the spec's tunnel ports are %v, want [22 8888] (sorted, without duplicates)", got)
	}
	e.connect(t, e.node)
	return e
}

// startWithReadTimeout is servertest.Start with the server's ReadTimeout and ReadHeaderTimeout
// set, as a deployment's are.
func startWithReadTimeout(t *testing.T, pool *pgxpool.Pool, configure func(*server.Options), readTimeout time.Duration) *servertest.Env {
	t.Helper()
	opts := server.Options{Pool: pool, Secret: servertest.Secret}
	configure(&opts)
	api, err := server.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewUnstartedServer(api)
	ts.Config.ReadTimeout, ts.Config.ReadHeaderTimeout = readTimeout, readTimeout
	ts.Start()
	t.Cleanup(ts.Close)
	key, err := auth.MintAdminKey(ctx, pool, "admin")
	if err != nil {
		t.Fatal(err)
	}
	return &servertest.Env{URL: ts.URL + server.DefaultBasePath, Pool: pool, AdminKey: key.String(), Server: ts}
}

// connect gives node a session on the fake gateway (and renews the gateway's heartbeat).
func (e *env) connect(t *testing.T, node uuid.UUID) {
	t.Helper()
	q := db.New(e.Pool)
	if err := q.UpsertGateway(ctx, db.UpsertGatewayParams{ID: gatewayID, Region: "test", ControlUrl: e.gw.url}); err != nil {
		t.Fatal(err)
	}
	if err := q.ClaimSession(ctx, db.ClaimSessionParams{NodeID: node, GatewayID: gatewayID, SessionID: "s-" + node.String(), Transport: "h2"}); err != nil {
		t.Fatal(err)
	}
}

func (e *env) tunnels(key string) tunnelsv1connect.TunnelsServiceClient {
	return tunnelsv1connect.NewTunnelsServiceClient(e.HTTPClient(key), e.URL)
}

func (e *env) nodes(key string) nodesv1connect.NodesServiceClient {
	return nodesv1connect.NewNodesServiceClient(e.HTTPClient(key), e.URL)
}

// tenant creates a tenant below the root and returns its id and owner key.
func (e *env) tenant(t *testing.T, name string) (uuid.UUID, string) {
	t.Helper()
	res, err := e.IAM(e.AdminKey).CreateTenant(ctx, &iamv1.CreateTenantRequest{Name: name})
	if err != nil {
		t.Fatal(err)
	}
	return uuid.MustParse(res.GetTenant().GetId()), res.GetOwnerApiKey()
}

// create creates a ticket for port on node with key.
func (e *env) create(t *testing.T, key string, node uuid.UUID, port int32) *tunnelsv1.CreateResponse {
	t.Helper()
	res, err := e.tunnels(key).Create(ctx, &tunnelsv1.CreateRequest{NodeId: node.String(), Port: port})
	if err != nil {
		t.Fatalf("create a tunnel to %s:%d: %v", node, port, err)
	}
	return res
}

// dial opens a ticket's URL with key (none when empty), offering subprotocols (the tunnel's
// when none are given). It returns the stream, or the refusal's HTTP status (0 without one).
func dial(t *testing.T, url, key string, subprotocols ...string) (*tunnel.WebSocketStream, int, error) {
	t.Helper()
	if subprotocols == nil {
		subprotocols = []string{tunnel.Subprotocol}
	}
	h := http.Header{}
	if key != "" {
		h.Set("Authorization", "Bearer "+key)
	}
	dctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	conn, res, err := websocket.Dial(dctx, url, &websocket.DialOptions{HTTPHeader: h, Subprotocols: subprotocols})
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
	// A tunnel that does not end as a test expects fails it, rather than hanging it.
	sctx, scancel := context.WithTimeout(ctx, 30*time.Second)
	t.Cleanup(scancel)
	return tunnel.NewWebSocketStream(sctx, conn), status, nil
}

// open opens a ticket's URL with key and fails the test unless it opens.
func open(t *testing.T, url, key string) *tunnel.WebSocketStream {
	t.Helper()
	s, status, err := dial(t, url, key)
	if err != nil {
		t.Fatalf("open %s: %v (HTTP %d)", url, err, status)
	}
	return s
}

// wantRefused opens a ticket's URL and wants the upgrade refused with status.
func wantRefused(t *testing.T, what, url, key string, status int, subprotocols ...string) {
	t.Helper()
	s, got, err := dial(t, url, key, subprotocols...)
	if err == nil {
		_ = s.Close()
		t.Fatalf("%s: the upgrade succeeded, want HTTP %d", what, status)
	}
	if got != status {
		t.Fatalf("%s: HTTP %d (%v), want %d", what, got, err, status)
	}
}

// ending is how a client saw a tunnel end: the bytes it received, whether the node's side
// half-closed, and the close code (tunnel.CodeNormal for a clean end).
type ending struct {
	data       []byte
	closeWrite bool
	code       tunnel.Code
	reason     string
}

// readToEnd reads s until the tunnel ends: an Abort frame's code, then the WebSocket's close
// (as a client should, so the close handshake completes), or the close alone (tunnel.CodeNormal
// for a clean end).
func readToEnd(t *testing.T, s *tunnel.WebSocketStream) ending {
	t.Helper()
	var e ending
	for {
		f, err := s.ReadFrame()
		var ae *tunnel.AbortError
		switch {
		case errors.Is(err, io.EOF) && e.code == 0:
			e.code = tunnel.CodeNormal
			return e
		case errors.As(err, &ae) && e.code == 0:
			e.code, e.reason = ae.Code, ae.Reason
			return e
		case errors.As(err, &ae) && ae.Code != e.code:
			t.Fatalf("an abort with %d, then a close with %d", e.code, ae.Code)
		case err != nil && e.code != 0:
			return e
		case err != nil:
			t.Fatalf("read the tunnel: %v", err)
		}
		switch f.Type {
		case tunnel.Data:
			e.data = append(e.data, f.Payload...)
		case tunnel.CloseWrite:
			e.closeWrite = true
		case tunnel.Abort:
			e.code, e.reason = tunnel.ParseAbort(f.Payload)
		}
	}
}

// wantCode checks a refused call's Connect code and, when field is set, that it names it.
func wantCode(t *testing.T, what string, err error, code connect.Code, field string) {
	t.Helper()
	var cerr *connect.Error
	if !errors.As(err, &cerr) || cerr.Code() != code {
		t.Fatalf("%s: %v, want %v", what, err, code)
	}
	if field != "" && !hasPrefix(cerr.Message(), field+": ") {
		t.Fatalf("%s: %q does not name %s", what, cerr.Message(), field)
	}
}

func hasPrefix(s, p string) bool { return len(s) >= len(p) && s[:len(p)] == p }

// row reads a tunnel's row.
func (e *env) row(t *testing.T, id string) db.Tunnel {
	t.Helper()
	var tn db.Tunnel
	err := e.Pool.QueryRow(ctx, `SELECT opened_at, closed_at, close_code, close_reason, bytes_to_node, bytes_from_node, api_instance, gateway_id
		FROM tunnels WHERE id = $1`, id).Scan(&tn.OpenedAt, &tn.ClosedAt, &tn.CloseCode, &tn.CloseReason,
		&tn.BytesToNode, &tn.BytesFromNode, &tn.ApiInstance, &tn.GatewayID)
	if err != nil {
		t.Fatal(err)
	}
	return tn
}

// fakeGateway is a gateway's control API for tunnels, over HTTP/2 with mutual TLS from the
// internal CA: it answers status when set, else 200 and echoes the frames it gets; on the API's
// CloseWrite it sends "bye" and closes its side too. It records the requests, the tunnels they
// open and the codes of the Abort frames it gets.
type fakeGateway struct {
	url      string
	status   atomic.Int32
	requests atomic.Int32
	opens    chan *gatewayv1.OpenTunnelRequest
	aborts   chan tunnel.Code
}

func newFakeGateway(t *testing.T, bundle *pki.Bundle) *fakeGateway {
	t.Helper()
	certPEM, keyPEM, err := bundle.IssueInternal("gateway-fake", nil, []net.IP{net.ParseIP("127.0.0.1")})
	if err != nil {
		t.Fatal(err)
	}
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	g := &fakeGateway{opens: make(chan *gatewayv1.OpenTunnelRequest, 64), aborts: make(chan tunnel.Code, 64)}
	ts := httptest.NewUnstartedServer(g)
	ts.EnableHTTP2 = true
	ts.TLS = &tls.Config{
		MinVersion: tls.VersionTLS13, Certificates: []tls.Certificate{cert},
		ClientAuth: tls.RequireAndVerifyClientCert, ClientCAs: bundle.InternalCAPool(),
	}
	ts.StartTLS()
	t.Cleanup(func() {
		ts.CloseClientConnections()
		ts.Close()
	})
	g.url = ts.URL
	return g
}

// opening waits for the OpenTunnelRequest of the next tunnel stream.
func (g *fakeGateway) opening(t *testing.T) *gatewayv1.OpenTunnelRequest {
	t.Helper()
	select {
	case o := <-g.opens:
		return o
	case <-time.After(30 * time.Second):
		t.Fatal("no tunnel stream reached the gateway")
		return nil
	}
}

// abort waits for the code of the next Abort frame the gateway gets.
func (g *fakeGateway) abort(t *testing.T) tunnel.Code {
	t.Helper()
	select {
	case c := <-g.aborts:
		return c
	case <-time.After(30 * time.Second):
		t.Fatal("no abort reached the gateway")
		return 0
	}
}

func (g *fakeGateway) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	g.requests.Add(1)
	if r.Method != http.MethodPost || r.URL.Path != tunnelhop.ControlPath || r.ProtoMajor != 2 || len(r.TLS.PeerCertificates) == 0 {
		http.Error(w, "not a tunnel stream", http.StatusBadRequest)
		return
	}
	open, err := tunnelhop.DecodeOpen(r.Header.Get(tunnelhop.HeaderOpen))
	if err != nil {
		http.Error(w, tunnelhop.HeaderOpen+" header: "+err.Error(), http.StatusBadRequest)
		return
	}
	g.opens <- open
	if st := g.status.Load(); st != 0 {
		http.Error(w, "node offline", int(st))
		return
	}
	rc := http.NewResponseController(w)
	w.Header().Set("Content-Type", "application/octet-stream")
	w.WriteHeader(http.StatusOK)
	_ = rc.Flush()
	s := tunnel.NewByteStream(r.Body, w, rc.Flush, nil, r.Body.Close)
	for {
		f, err := s.ReadFrame()
		if err != nil {
			return
		}
		switch f.Type {
		case tunnel.Data:
			if s.WriteFrame(f) != nil {
				return
			}
		case tunnel.CloseWrite:
			// The API's side is done; the node's goes on, then closes.
			_ = s.WriteFrame(tunnel.Frame{Type: tunnel.Data, Payload: []byte("bye")})
			_ = s.WriteFrame(tunnel.Frame{Type: tunnel.CloseWrite})
			return
		case tunnel.Abort:
			code, _ := tunnel.ParseAbort(f.Payload)
			g.aborts <- code
			return
		}
	}
}
