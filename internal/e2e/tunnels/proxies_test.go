package tunnels_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"math/big"
	"net"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/google/uuid"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/better-compute/better-compute/gateway/gatewaytest"
	commandsv1 "github.com/better-compute/better-compute/gen/go/bettercompute/commands/v1"
	daemonv1 "github.com/better-compute/better-compute/gen/go/bettercompute/daemon/v1"
	"github.com/better-compute/better-compute/gen/go/bettercompute/daemon/v1/daemonv1connect"
	nodesv1 "github.com/better-compute/better-compute/gen/go/bettercompute/nodes/v1"
	"github.com/better-compute/better-compute/internal/daemon"
	"github.com/better-compute/better-compute/internal/fleet"
	"github.com/better-compute/better-compute/internal/poll"
	"github.com/better-compute/better-compute/internal/proxytest"
	"github.com/better-compute/better-compute/internal/wsnet"
)

// The tests of this file run the daemon protocol over WebSockets through real proxies
// (internal/proxytest): nginx terminating TLS in front of the gateway's plain WebSocket
// listener, as a load balancer on port 443 does, and tinyproxy as the daemon's HTTPS CONNECT
// proxy. Each node is a FakeDaemon whose every connection (join, session, tunnels' data plane)
// goes through the proxy.

// proxyTransfer is what the tunnels of these tests carry each way: enough for many WebSocket
// messages and HTTP/2 windows through the proxy, little enough for the race detector.
const proxyTransfer = 4 << 20

// TestNginxTerminatingTLS: behind nginx terminating TLS with a certificate of another CA than
// the deployment's (which the daemon trusts for the outer TLS only), a node joins, holds its
// session over the WebSocket (as nodes/get says), runs a command created through the API and
// carries a tunnel both ways.
func TestNginxTerminatingTLS(t *testing.T) {
	t.Parallel()
	e := newEnvWith(t, envOptions{gateway: gatewaytest.WebSocket(t, false), notifier: true})
	ng, ca := e.startNginx()
	p := listen(t, echo)
	n := e.startFake(fakeOptions{tunnelPorts: []int{p.port}, dialer: viaNginx(ng, ca)})
	e.exercise(n, p)
	if got := n.fake.Status().Transport; got != fleet.TransportWebSocket {
		t.Errorf("the daemon says it is over %q", got)
	}
}

// TestTinyproxyConnect: a daemon whose HTTPS proxy is tinyproxy reaches the gateway's
// WebSocket listener (outer TLS: the gateway's own certificate) through CONNECT, and joins,
// holds its session, runs a command and carries a tunnel as directly.
func TestTinyproxyConnect(t *testing.T) {
	t.Parallel()
	e := newEnvWith(t, envOptions{gateway: gatewaytest.WebSocket(t, true), notifier: true})
	tp := proxytest.StartTinyproxy(t)
	proxyURL, err := url.Parse(tp.URL())
	if err != nil {
		t.Fatal(err)
	}
	p := listen(t, echo)
	n := e.startFake(fakeOptions{tunnelPorts: []int{p.port}, dialer: func(d *daemon.Dialer) {
		d.Transport = daemon.TransportWebSocket
		d.WebSocketURL = e.gw.WebSocketURL
		d.Proxy = http.ProxyURL(proxyURL)
	}})
	e.exercise(n, p)
	ws, err := url.Parse(e.gw.WebSocketURL)
	if err != nil {
		t.Fatal(err)
	}
	if log := tp.Log(); !strings.Contains(log, "CONNECT "+ws.Host) {
		t.Errorf("tinyproxy's log shows no CONNECT to %s:\n%s", ws.Host, log)
	}
}

// TestNginxRefusesAnotherCA: the outer TLS proves nothing; the TLS inside the WebSocket does.
// A daemon that trusts nginx but whose deployment root is another's neither joins nor holds a
// session, and a node certificate of another CA gets no identity: its handshake is refused,
// and a call without a certificate is Unauthenticated.
func TestNginxRefusesAnotherCA(t *testing.T) {
	t.Parallel()
	e := newEnvWith(t, envOptions{gateway: gatewaytest.WebSocket(t, false)})
	ng, ca := e.startNginx()
	other := newTestCA(t, "another deployment's root")
	d := daemon.Dialer{Gateway: e.gw.Addr}
	viaNginx(ng, ca)(&d)

	t.Run("join", func(t *testing.T) {
		t.Parallel()
		_, err := d.Join(ctx, other.certPEM, e.Token(1, time.Now().Add(time.Hour)), "host-other-root")
		if err == nil || !strings.Contains(err.Error(), "certificate") {
			t.Fatalf("join with another deployment's root: %v, want a certificate error", err)
		}
		var unknown x509.UnknownAuthorityError
		if !errors.As(err, &unknown) {
			t.Errorf("join with another deployment's root: %v, want x509.UnknownAuthorityError", err)
		}
		t.Logf("refused: %v", err)
	})

	t.Run("session", func(t *testing.T) {
		t.Parallel()
		// A node that joined, then runs with another deployment's root.
		id, err := d.Join(ctx, e.Bundle.RootPEM(), e.Token(1, time.Now().Add(time.Hour)), "host-swapped-root")
		if err != nil {
			t.Fatal(err)
		}
		swapped := *id
		swapped.RootPEM = other.certPEM
		f, err := daemon.NewFake(&swapped, daemon.FakeOptions{Dialer: d})
		if err != nil {
			t.Fatal(err)
		}
		run(t, f)
		poll.Until(t, 20*time.Second, "the session fails on the gateway's certificate", func() bool {
			err := f.Status().LastError
			return err != nil && strings.Contains(err.Error(), "certificate")
		})
		if s := f.Status(); s.Sessions != 0 || s.Connected {
			t.Errorf("the daemon with another root opened %d sessions (connected %v)", s.Sessions, s.Connected)
		}
		t.Logf("refused: %v", f.Status().LastError)
	})

	t.Run("foreign node certificate", func(t *testing.T) {
		t.Parallel()
		cert := other.issueNode(t, gatewaytest.TrustDomain)
		conn := e.dialInner(ng, ca, &tls.Config{GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return &cert, nil }})
		defer conn.Close()
		// TLS 1.3 reports a refused client certificate on the first read.
		if err := conn.SetReadDeadline(time.Now().Add(10 * time.Second)); err != nil {
			t.Fatal(err)
		}
		_, err := conn.Read(make([]byte, 1))
		if err == nil || !strings.Contains(err.Error(), "certificate") {
			t.Fatalf("a node certificate of another CA over the WebSocket: %v, want the handshake refused", err)
		}
		t.Logf("refused: %v", err)
	})

	t.Run("no certificate", func(t *testing.T) {
		t.Parallel()
		tr := &http.Transport{Protocols: new(http.Protocols), DialTLSContext: func(_ context.Context, _, _ string) (net.Conn, error) {
			return e.dialInner(ng, ca, &tls.Config{}), nil
		}}
		tr.Protocols.SetHTTP2(true)
		t.Cleanup(tr.CloseIdleConnections)
		c := daemonv1connect.NewDaemonServiceClient(&http.Client{Transport: tr}, "https://"+e.gw.Addr, connect.WithGRPC())
		stream, err := c.Session(ctx)
		if err != nil {
			t.Fatal(err)
		}
		_ = stream.Send(&daemonv1.SessionRequest{})
		_, err = stream.Receive()
		_ = stream.CloseRequest()
		_ = stream.CloseResponse()
		if connect.CodeOf(err) != connect.CodeUnauthenticated {
			t.Errorf("a session without a node certificate over the WebSocket: %v, want unauthenticated", err)
		}
	})
}

// TestNginxRevokedNodeSessionEnds: nodes/revoke ends a session held through nginx within 2s
// (the API's notifier), and the node's reconnect is refused PermissionDenied.
func TestNginxRevokedNodeSessionEnds(t *testing.T) {
	t.Parallel()
	e := newEnvWith(t, envOptions{gateway: gatewaytest.WebSocket(t, false), notifier: true})
	ng, ca := e.startNginx()
	n := e.startFake(fakeOptions{dialer: viaNginx(ng, ca)})
	e.wantWebSocket(n)
	sessions := n.fake.Status().Sessions
	if _, err := e.admin.Nodes.Revoke(ctx, &nodesv1.RevokeRequest{Id: n.id}); err != nil {
		t.Fatal(err)
	}
	took := poll.Until(t, 2*time.Second, "the revoked node's session ends", func() bool { return !n.fake.Status().Connected })
	t.Logf("nodes/revoke ended the session through nginx after %v", took)
	poll.Until(t, 10*time.Second, "a reconnect is refused", func() bool {
		return connect.CodeOf(n.fake.Status().LastError) == connect.CodePermissionDenied
	})
	if s := n.fake.Status().Sessions; s != sessions {
		t.Errorf("the revoked node opened %d more sessions", s-sessions)
	}
}

// TestNginxRestartReconnects: restarting nginx ends the session it carried; the daemon
// reconnects through the new nginx on its own.
func TestNginxRestartReconnects(t *testing.T) {
	t.Parallel()
	e := newEnvWith(t, envOptions{gateway: gatewaytest.WebSocket(t, false)})
	ng, ca := e.startNginx()
	n := e.startFake(fakeOptions{dialer: viaNginx(ng, ca)})
	sessions := n.fake.Status().Sessions
	start := time.Now()
	ng.Restart()
	poll.Until(t, 20*time.Second, "the daemon reconnects through the restarted nginx", func() bool {
		s := n.fake.Status()
		return s.Sessions > sessions && s.Connected
	}, poll.Report(ng.Log))
	t.Logf("reconnected %v after the restart began (%d sessions)", time.Since(start), n.fake.Status().Sessions-sessions)
	e.wantWebSocket(n)
}

// TestTinyproxyAutoFallback: a daemon on TransportAuto whose direct endpoint answers as an HTTP
// proxy does (tinyproxy, plain HTTP after its timeout) joins and holds its session over the
// WebSocket, and remembers the fallback.
func TestTinyproxyAutoFallback(t *testing.T) {
	t.Parallel()
	e := newEnvWith(t, envOptions{gateway: gatewaytest.WebSocket(t, false)})
	tp := proxytest.StartTinyproxyWith(t, proxytest.TinyproxyOptions{Timeout: time.Second})
	choice := &daemon.Choice{}
	start := time.Now()
	n := e.startFake(fakeOptions{dialer: func(d *daemon.Dialer) {
		d.Gateway = tp.Addr()
		d.Transport = daemon.TransportAuto
		d.WebSocketURL = e.gw.WebSocketURL
		d.Proxy = noProxy
		d.Choice = choice
	}})
	t.Logf("joined and connected after %v", time.Since(start))
	e.wantWebSocket(n)
	if got := n.fake.Status().Transport; got != fleet.TransportWebSocket {
		t.Errorf("the daemon says it is over %q", got)
	}
	if got, since := choice.Current(); got != fleet.TransportWebSocket || since.IsZero() {
		t.Errorf("the choice is %q since %v after the fallback", got, since)
	}
}

// startNginx starts nginx terminating TLS, with a certificate of a CA made for the test, in
// front of the env gateway's plain WebSocket listener.
func (e *env) startNginx() (*proxytest.Nginx, *testCA) {
	e.t.Helper()
	u, err := url.Parse(e.gw.WebSocketURL)
	if err != nil || u.Scheme != "ws" {
		e.t.Fatalf("the gateway's WebSocket listener is %q (%v), want plain ws://", e.gw.WebSocketURL, err)
	}
	ca := newTestCA(e.t, "load balancer CA")
	certPEM, keyPEM := ca.issueServer(e.t)
	return proxytest.StartNginx(e.t, proxytest.NginxOptions{Upstream: u.Host, Path: wsnet.DefaultPath, CertPEM: certPEM, KeyPEM: keyPEM}), ca
}

// viaNginx has a daemon reach its gateway through ng only, trusting ca for the outer TLS.
func viaNginx(ng *proxytest.Nginx, ca *testCA) func(*daemon.Dialer) {
	return func(d *daemon.Dialer) {
		d.Transport = daemon.TransportWebSocket
		d.WebSocketURL = ng.URL(wsnet.DefaultPath)
		d.WebSocketRootCAs = ca.pool()
		d.Proxy = noProxy
	}
}

// noProxy keeps a test's WebSockets off any proxy the environment names.
func noProxy(*http.Request) (*url.URL, error) { return nil, nil }

// exercise checks what a node can do through a proxy: nodes/get says its session is over the
// WebSocket, an echo command created through the API succeeds with its data, and a tunnel to
// the echo port p carries proxyTransfer bytes both ways.
func (e *env) exercise(n *node, p *port) {
	e.t.Helper()
	e.wantWebSocket(n)

	data, err := structpb.NewStruct(map[string]any{"through": "a proxy"})
	if err != nil {
		e.t.Fatal(err)
	}
	created, err := e.admin.Commands.Create(ctx, &commandsv1.CreateRequest{NodeId: n.id, Payload: &commandsv1.CreateRequest_Echo{Echo: &daemonv1.EchoPayload{Data: data}}})
	if err != nil {
		e.t.Fatal(err)
	}
	id := created.GetCommands()[0].GetId()
	var got *commandsv1.Command
	took := poll.Until(e.t, 10*time.Second, "the echo command succeeds", func() bool {
		res, err := e.admin.Commands.Get(ctx, &commandsv1.GetRequest{Id: id})
		got = res.GetCommand()
		return err == nil && got.GetState() == commandsv1.CommandState_COMMAND_STATE_SUCCEEDED
	}, poll.Every(20*time.Millisecond))
	e.t.Logf("the echo command succeeded after %v", took)
	if v := got.GetResult().GetFields()["through"].GetStringValue(); v != "a proxy" {
		e.t.Errorf("the echo command's result is %v", got.GetResult())
	}

	e.allow(n, p.port)
	conn := e.open(e.admin, n, p.port)
	start := time.Now()
	transfer(conn, proxyTransfer, 7).check(e.t, "the transfer through the proxy")
	e.t.Logf("%d MiB each way through the tunnel in %v", proxyTransfer>>20, time.Since(start).Round(time.Millisecond))
	if err := conn.Close(); err != nil {
		e.t.Errorf("close after both sides closed: %v", err)
	}
}

// wantWebSocket waits until nodes/get says n's session is over the WebSocket.
func (e *env) wantWebSocket(n *node) {
	e.t.Helper()
	var last *nodesv1.Node
	poll.Until(e.t, 10*time.Second, "nodes/get says the session is over the WebSocket", func() bool {
		res, err := e.admin.Nodes.Get(ctx, &nodesv1.GetRequest{Id: n.id})
		last = res.GetNode()
		return err == nil && last.GetConnected() && last.GetTransport() == string(fleet.TransportWebSocket)
	}, poll.Every(20*time.Millisecond), poll.Report(func() string { return "nodes/get: " + last.String() }))
}

// dialInner opens a WebSocket to the gateway through ng and runs the daemons' TLS inside it
// with cfg (the deployment's root, h2 and the gateway's address added), as a daemon would.
func (e *env) dialInner(ng *proxytest.Nginx, ca *testCA, cfg *tls.Config) net.Conn {
	e.t.Helper()
	dctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	raw, err := wsnet.Dial(dctx, ng.URL(wsnet.DefaultPath), wsnet.DialOptions{Proxy: noProxy, TLS: &tls.Config{MinVersion: tls.VersionTLS12, RootCAs: ca.pool()}})
	if err != nil {
		e.t.Fatalf("the WebSocket through nginx: %v\n%s", err, ng.Log())
	}
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(e.Bundle.RootPEM())
	cfg = cfg.Clone()
	cfg.MinVersion, cfg.RootCAs, cfg.ServerName, cfg.NextProtos = tls.VersionTLS13, roots, "127.0.0.1", []string{"h2"}
	c := tls.Client(raw, cfg)
	if err := c.HandshakeContext(dctx); err != nil {
		_ = raw.Close()
		e.t.Fatalf("the TLS inside the WebSocket: %v", err)
	}
	return c
}

// run runs f until the test ends.
func run(t testing.TB, f *daemon.Fake) {
	t.Helper()
	fctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); _ = f.Run(fctx) }()
	t.Cleanup(func() { cancel(); <-done })
}

// testCA is a certificate authority made for one test: a load balancer's, or another
// deployment's.
type testCA struct {
	cert    *x509.Certificate
	key     *ecdsa.PrivateKey
	certPEM []byte
}

func newTestCA(t testing.TB, name string) *testCA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: name}, IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign, NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return &testCA{cert: cert, key: key, certPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}
}

func (ca *testCA) pool() *x509.CertPool {
	p := x509.NewCertPool()
	p.AddCert(ca.cert)
	return p
}

// issue signs a leaf from tmpl and returns it and its key, in PEM.
func (ca *testCA) issue(t testing.TB, tmpl *x509.Certificate) (certPEM, keyPEM []byte) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl.SerialNumber = big.NewInt(time.Now().UnixNano())
	tmpl.NotBefore, tmpl.NotAfter = time.Now().Add(-time.Hour), time.Now().Add(time.Hour)
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER})
}

// issueServer is a server certificate for 127.0.0.1.
func (ca *testCA) issueServer(t testing.TB) (certPEM, keyPEM []byte) {
	t.Helper()
	return ca.issue(t, &x509.Certificate{
		Subject: pkix.Name{CommonName: "127.0.0.1"}, IPAddresses: []net.IP{net.ParseIP("127.0.0.1")},
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	})
}

// issueNode is a node certificate of trustDomain, as the deployment's node CA would make one,
// but signed by ca.
func (ca *testCA) issueNode(t testing.TB, trustDomain string) tls.Certificate {
	t.Helper()
	id, err := url.Parse("spiffe://" + trustDomain + "/node/" + uuid.NewString())
	if err != nil {
		t.Fatal(err)
	}
	certPEM, keyPEM := ca.issue(t, &x509.Certificate{
		URIs: []*url.URL{id}, KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	})
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	return cert
}
