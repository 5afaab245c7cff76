package gateway_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"io"
	"math/big"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/better-compute/better-compute/gateway"
	"github.com/better-compute/better-compute/gateway/gatewaytest"
	"github.com/better-compute/better-compute/gen/db"
	daemonv1 "github.com/better-compute/better-compute/gen/go/bettercompute/daemon/v1"
	"github.com/better-compute/better-compute/gen/go/bettercompute/daemon/v1/daemonv1connect"
	"github.com/better-compute/better-compute/internal/daemon"
	"github.com/better-compute/better-compute/internal/dbtest"
	"github.com/better-compute/better-compute/internal/pki"
	"github.com/better-compute/better-compute/internal/poll"
)

func TestMain(m *testing.M) { dbtest.Main(m) }

var ctx = context.Background()

// env is a gatewaytest environment with the helpers these tests share.
type env struct {
	*gatewaytest.Env
	t      *testing.T
	pool   *pgxpool.Pool
	bundle *pki.Bundle
	tenant uuid.UUID
}

func newEnv(t *testing.T) *env {
	t.Helper()
	e := gatewaytest.New(t)
	return &env{Env: e, t: t, pool: e.Pool, bundle: e.Bundle, tenant: e.Tenant}
}

// runningGateway is a gateway serving on a loopback port.
type runningGateway struct {
	*gateway.Gateway
	addr string
	stop func()
}

func (e *env) startGateway(id string) *runningGateway {
	e.t.Helper()
	return e.startGatewayWith(id, time.Second)
}

// startGatewayWith starts a gateway whose dispatch loop runs every dispatch.
func (e *env) startGatewayWith(id string, dispatch time.Duration) *runningGateway {
	e.t.Helper()
	g := e.StartGateway(id, func(o *gateway.Options) { o.DispatchInterval = dispatch })
	return &runningGateway{Gateway: g.Gateway, addr: g.Addr, stop: g.Stop}
}

// token makes a join token with max uses and expiry.
func (e *env) token(maxUses int32, expires time.Time) string { return e.Token(maxUses, expires) }

func (e *env) countNodes() int {
	var n int
	if err := e.pool.QueryRow(ctx, "SELECT count(*) FROM nodes").Scan(&n); err != nil {
		e.t.Fatal(err)
	}
	return n
}

// startFake joins through addr and runs the daemon until the test ends.
func (e *env) startFake(addr, token string) *daemon.Fake {
	e.t.Helper()
	return e.startFakeVia(daemon.Dialer{Gateway: addr}, token)
}

// startFakeVia joins with the dialer d, runs the daemon until the test ends and waits for its
// session.
func (e *env) startFakeVia(d daemon.Dialer, token string) *daemon.Fake {
	e.t.Helper()
	f, err := daemon.JoinFake(ctx, e.bundle.RootPEM(), token, "host-"+uuid.NewString()[:8], daemon.FakeOptions{Dialer: d})
	if err != nil {
		e.t.Fatal(err)
	}
	e.keepRunning(f)
	poll.Until(e.t, 10*time.Second, "the daemon connects", func() bool { return f.Status().Connected })
	return f
}

// keepRunning runs a daemon that has joined until the test ends.
func (e *env) keepRunning(f *daemon.Fake) {
	e.t.Helper()
	fctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); _ = f.Run(fctx) }()
	e.t.Cleanup(func() { cancel(); <-done })
}

func (e *env) command(node string, typ, payload, key string) uuid.UUID {
	e.t.Helper()
	c, err := db.New(e.pool).CreateCommand(ctx, db.CreateCommandParams{
		ID: uuid.Must(uuid.NewV7()), TenantID: e.tenant, NodeID: uuid.MustParse(node), Type: typ,
		Payload: []byte(payload), IdempotencyKey: key, Deadline: time.Now().Add(time.Minute),
	})
	if err != nil {
		e.t.Fatal(err)
	}
	return c.ID
}

func (e *env) commandState(id uuid.UUID) (state string, result string) {
	var r []byte
	if err := e.pool.QueryRow(ctx, "SELECT state, COALESCE(result::text, '') FROM commands WHERE id = $1", id).Scan(&state, &r); err != nil {
		e.t.Fatal(err)
	}
	return state, string(r)
}

func TestJoinSessionAndCommand(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	gw := e.startGateway("gw1")
	f := e.startFake(gw.addr, e.token(1, time.Now().Add(time.Hour)))
	node := f.Status().NodeID

	var state, inventory string
	if err := e.pool.QueryRow(ctx, "SELECT state, inventory->>'cpuModel' FROM nodes WHERE id = $1", node).Scan(&state, &inventory); err != nil {
		t.Fatal(err)
	}
	if state != "ready" || inventory != "Fake CPU" {
		t.Errorf("node state %q, cpu %q", state, inventory)
	}
	id := e.command(node, "echo", `{"data":{"hello":"world"}}`, "k1")
	gw.Poke(uuid.MustParse(node))
	took := poll.Until(t, 5*time.Second, "the command succeeds", func() bool { s, _ := e.commandState(id); return s == "succeeded" })
	t.Logf("command round trip with a poke: %v", took)
	if _, result := e.commandState(id); result != `{"hello": "world"}` {
		t.Errorf("result %s", result)
	}
	// Without a poke the 1-second loop delivers it.
	id = e.command(node, "echo", `{}`, "k2")
	poll.Until(t, 5*time.Second, "the loop delivers the command", func() bool { s, _ := e.commandState(id); return s == "succeeded" })
	// A failing handler is recorded as failed with its error.
	id = e.command(node, "echo", `{"data":{"fail":"disk full"}}`, "k3")
	gw.Poke(uuid.MustParse(node))
	poll.Until(t, 5*time.Second, "the command fails", func() bool { s, _ := e.commandState(id); return s == "failed" })
	var msg string
	if err := e.pool.QueryRow(ctx, "SELECT error FROM commands WHERE id = $1", id).Scan(&msg); err != nil || msg != "disk full" {
		t.Errorf("error %q, %v", msg, err)
	}
	// The gateway vouches for the node it holds: the node counts as heard from as recently as
	// the gateway's own heartbeat.
	var seen time.Time
	var by *string
	if err := e.pool.QueryRow(ctx, "SELECT last_seen_at, gateway_id FROM node_seen WHERE node_id = $1", node).Scan(&seen, &by); err != nil {
		t.Fatal(err)
	}
	if by == nil || *by != "gw1" || time.Since(seen) > 15*time.Second {
		t.Errorf("node seen %v ago, vouched for by %v; want gw1's vouch", time.Since(seen), by)
	}
}

func TestRefusedJoinsCreateNothing(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	gw := e.startGateway("gw1")
	d := daemon.Dialer{Gateway: gw.addr}
	single := e.token(1, time.Now().Add(time.Hour))
	if _, err := d.Join(ctx, e.bundle.RootPEM(), single, "first"); err != nil {
		t.Fatal(err)
	}
	before := e.countNodes()
	for name, tok := range map[string]string{
		"reused single-use token": single,
		"expired token":           e.token(5, time.Now().Add(-time.Minute)),
		"malformed token":         "bcj_nope",
	} {
		_, err := d.Join(ctx, e.bundle.RootPEM(), tok, "x")
		if connect.CodeOf(err) != connect.CodeUnauthenticated {
			t.Errorf("%s: %v, want unauthenticated", name, err)
		}
	}
	// A CSR that names another node's SPIFFE ID.
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	other, _ := url.Parse("spiffe://test.local/node/" + uuid.NewString())
	csr, _ := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{URIs: []*url.URL{other}}, key)
	_, err := joinRaw(gw.addr, e.bundle.RootPEM(), &daemonv1.JoinRequest{Token: e.token(1, time.Now().Add(time.Hour)), Csr: csr})
	if connect.CodeOf(err) != connect.CodeInvalidArgument {
		t.Errorf("CSR for another identity: %v, want invalid_argument", err)
	}
	if n := e.countNodes(); n != before {
		t.Errorf("refused joins created %d nodes", n-before)
	}
	// A plain-TCP (h2c) client gets no answer from the TLS port.
	tr := &http.Transport{Protocols: new(http.Protocols)}
	tr.Protocols.SetUnencryptedHTTP2(true)
	res, err := (&http.Client{Transport: tr, Timeout: 5 * time.Second}).Post("http://"+gw.addr+"/bettercompute.daemon.v1.DaemonService/Join", "application/grpc", nil)
	if err == nil {
		res.Body.Close()
		t.Errorf("plain TCP client got %d", res.StatusCode)
	}
	// Without a certificate only Join answers.
	if _, err := anonymous(gw.addr, e.bundle.RootPEM()).Renew(ctx, &daemonv1.RenewRequest{}); connect.CodeOf(err) != connect.CodeUnauthenticated {
		t.Errorf("Renew without a certificate: %v, want unauthenticated", err)
	}
	// A client certificate from another CA does not even complete the handshake.
	if err := dialWithForeignCert(gw.addr, e.bundle.RootPEM()); err == nil {
		t.Error("a certificate from another CA was accepted")
	}
}

func joinRaw(addr string, rootPEM []byte, req *daemonv1.JoinRequest) (*daemonv1.JoinResponse, error) {
	return anonymous(addr, rootPEM).Join(ctx, req)
}

// anonymous is a DaemonService client without a client certificate.
func anonymous(addr string, rootPEM []byte) daemonv1connect.DaemonServiceClient {
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(rootPEM)
	tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots}, Protocols: new(http.Protocols)}
	tr.Protocols.SetHTTP2(true)
	return connectClient(&http.Client{Transport: tr}, addr)
}

// dialWithForeignCert makes a session call with a node certificate from a CA the gateway does
// not trust.
func dialWithForeignCert(addr string, rootPEM []byte) error {
	caKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "evil CA"}, IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign, NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour)}
	caDER, _ := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	ca, _ := x509.ParseCertificate(caDER)
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	id, _ := url.Parse("spiffe://test.local/node/" + uuid.NewString())
	leafDER, _ := x509.CreateCertificate(rand.Reader, &x509.Certificate{SerialNumber: big.NewInt(2), URIs: []*url.URL{id},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}, NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour)}, ca, &key.PublicKey, caKey)
	keyDER, _ := x509.MarshalECPrivateKey(key)
	cert, err := tls.X509KeyPair(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: leafDER}), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}))
	if err != nil {
		return err
	}
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(rootPEM)
	// Present the certificate even though the gateway does not ask for its CA (a well-behaved
	// client would send none and be anonymous, which Session refuses).
	conn, err := tls.Dial("tcp", addr, &tls.Config{RootCAs: roots, NextProtos: []string{"h2"},
		GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return &cert, nil }})
	if err != nil {
		return err
	}
	defer conn.Close()
	// TLS 1.3 reports a refused client certificate on the first read.
	_ = conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	_, err = conn.Read(make([]byte, 1))
	return err
}

func TestRevocationEndsSessionAndRefusesReconnect(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	gw := e.startGateway("gw1")
	f := e.startFake(gw.addr, e.token(1, time.Now().Add(time.Hour)))
	sessions := f.Status().Sessions
	if _, err := e.pool.Exec(ctx, "UPDATE nodes SET revoked_at = now() WHERE id = $1", f.Status().NodeID); err != nil {
		t.Fatal(err)
	}
	took := poll.Until(t, 3*time.Second, "the session ends", func() bool { return !f.Status().Connected })
	t.Logf("revocation ended the session after %v (no notifier: the gateway's 1s watch)", took)
	poll.Until(t, 10*time.Second, "a reconnect is refused", func() bool {
		return connect.CodeOf(f.Status().LastError) == connect.CodePermissionDenied
	})
	if s := f.Status().Sessions; s != sessions {
		t.Errorf("the revoked node opened %d more sessions", s-sessions)
	}
}

func TestGatewayDiesMidCommand(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	gw1 := e.startGateway("gw1")
	gw2 := e.startGateway("gw2")
	lb := newBalancer(t, gw1.addr)
	f := e.startFake(lb.addr, e.token(1, time.Now().Add(time.Hour)))
	node := f.Status().NodeID
	id := e.command(node, "echo", `{"data":{"sleepSeconds":1}}`, "long")
	gw1.Poke(uuid.MustParse(node))
	poll.Until(t, 5*time.Second, "the command is acked", func() bool { s, _ := e.commandState(id); return s == "acked" })
	// The balancer now sends new connections to gw2, and gw1 dies mid-command.
	lb.target.Store(gw2.addr)
	gw1.stop()
	poll.Until(t, 15*time.Second, "the command completes through gw2", func() bool { s, _ := e.commandState(id); return s == "succeeded" })
	if n := f.Runs["echo"].Load(); n != 1 {
		t.Errorf("the command ran %d times", n)
	}
	var events int
	if err := e.pool.QueryRow(ctx, "SELECT count(*) FROM outbox WHERE subject = $1 AND type = 'command.succeeded'", "command/"+id.String()).Scan(&events); err != nil || events != 1 {
		t.Errorf("the result was recorded %d times (%v)", events, err)
	}
	if gw2.Sessions() != 1 {
		t.Errorf("gw2 holds %d sessions", gw2.Sessions())
	}
}

// balancer is an L4 pass-through to one target at a time, like the load balancer in front of
// gateways.
type balancer struct {
	addr   string
	target atomic.Value
}

func newBalancer(t *testing.T, target string) *balancer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	b := &balancer{addr: ln.Addr().String()}
	b.target.Store(target)
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				up, err := net.Dial("tcp", b.target.Load().(string))
				if err != nil {
					return
				}
				defer up.Close()
				go io.Copy(up, c) //nolint:errcheck
				io.Copy(c, up)    //nolint:errcheck
			}()
		}
	}()
	return b
}

func connectClient(c *http.Client, addr string) daemonv1connect.DaemonServiceClient {
	return daemonv1connect.NewDaemonServiceClient(c, "https://"+addr, connect.WithGRPC())
}

// TestFailedGPUProbeKeepsTheGPUs: a report whose GPU probe failed (the driver did not answer)
// names no GPUs; the stored inventory keeps the GPUs and driver the node reported before —
// missing from this report, not gone — with the probe's error, through a hello as through a
// collectInventory result; the next good report replaces them as usual.
func TestFailedGPUProbeKeepsTheGPUs(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	gw := e.startGateway("gw-probe")
	node := uuid.MustParse(e.startFake(gw.addr, e.token(1, time.Now().Add(time.Hour))).Status().NodeID)
	q := db.New(e.pool)
	gpus := []*daemonv1.Gpu{{Index: 0, Uuid: "GPU-a"}, {Index: 1, Uuid: "GPU-b"}}
	driver := &daemonv1.GpuDriver{DriverVersion: "550.54.15", CudaVersion: "12.4"}
	stored := func() *daemonv1.Inventory {
		t.Helper()
		var b []byte
		if err := e.pool.QueryRow(ctx, "SELECT inventory FROM nodes WHERE id = $1", node).Scan(&b); err != nil {
			t.Fatal(err)
		}
		inv := &daemonv1.Inventory{}
		if err := protojson.Unmarshal(b, inv); err != nil {
			t.Fatal(err)
		}
		return inv
	}
	marshal := func(inv *daemonv1.Inventory) []byte {
		t.Helper()
		b, err := protojson.Marshal(inv)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	good := marshal(&daemonv1.Inventory{Hostname: "h", Cpus: 4, Gpus: gpus, GpuDriver: driver})
	failed := marshal(&daemonv1.Inventory{Hostname: "h", Cpus: 8, GpuProbeError: "nvidia-smi -q -x: no answer in 10s (a wedged driver?)"})
	record := map[string]func(inv []byte) error{
		"hello": func(inv []byte) error {
			_, err := q.RecordNodeHello(ctx, db.RecordNodeHelloParams{ID: node, DaemonVersion: "test", Inventory: inv})
			return err
		},
		"collectInventory": func(inv []byte) error {
			_, err := q.RecordNodeInventory(ctx, db.RecordNodeInventoryParams{ID: node, Inventory: inv})
			return err
		},
	}
	for _, how := range []string{"hello", "collectInventory"} {
		if err := record[how](good); err != nil {
			t.Fatal(err)
		}
		if err := record[how](failed); err != nil {
			t.Fatal(err)
		}
		inv := stored()
		if len(inv.GetGpus()) != 2 || inv.GetGpus()[1].GetUuid() != "GPU-b" || inv.GetGpuDriver().GetDriverVersion() != "550.54.15" ||
			inv.GetCpus() != 8 || !strings.Contains(inv.GetGpuProbeError(), "wedged") {
			t.Errorf("%s: after a failed probe the stored inventory is %v; want the GPUs and driver kept, the rest and the error new", how, inv)
		}
		if err := record[how](marshal(&daemonv1.Inventory{Hostname: "h", Cpus: 8})); err != nil {
			t.Fatal(err)
		}
		if inv := stored(); len(inv.GetGpus()) != 0 || inv.GetGpuDriver() != nil || inv.GetGpuProbeError() != "" {
			t.Errorf("%s: a good report without GPUs stored %v; want them gone", how, inv)
		}
	}
}
