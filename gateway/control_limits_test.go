package gateway_test

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/google/uuid"
	"google.golang.org/genproto/googleapis/rpc/errdetails"

	"github.com/better-compute/better-compute/gateway"
	"github.com/better-compute/better-compute/gateway/gatewaytest"
	gatewayv1 "github.com/better-compute/better-compute/gen/go/bettercompute/gateway/v1"
	"github.com/better-compute/better-compute/gen/go/bettercompute/gateway/v1/gatewayv1connect"
	"github.com/better-compute/better-compute/internal/poll"
	"github.com/better-compute/better-compute/internal/tunnelhop"
)

// asPeer is an in-memory transport to a control handler, as if over mutual TLS with the verified
// chain {leaf} (none when leaf is nil): the handler's own checks, without a listener.
type asPeer struct {
	h    http.Handler
	leaf *x509.Certificate
}

func (p asPeer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.TLS = &tls.ConnectionState{}
	if p.leaf != nil {
		r.TLS.VerifiedChains = [][]*x509.Certificate{{p.leaf}}
	}
	if r.Body == nil {
		r.Body = http.NoBody
	}
	rec := httptest.NewRecorder()
	p.h.ServeHTTP(rec, r)
	return rec.Result(), nil
}

// leafOf parses the first certificate of a PEM chain.
func leafOf(t *testing.T, certPEM []byte) *x509.Certificate {
	t.Helper()
	block, _ := pem.Decode(certPEM)
	if block == nil {
		t.Fatal("no PEM certificate")
	}
	leaf, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	return leaf
}

// controlHandler is a gateway's control handler (not serving daemons) and the certificate of
// the internal identity "api".
func controlHandler(t *testing.T) (*env, http.Handler, *x509.Certificate) {
	t.Helper()
	e := newEnv(t)
	certPEM, _, err := e.bundle.IssueInternal("api", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	h := gateway.New(gateway.Options{Pool: e.pool, Authority: e.bundle, ID: "gw-control"}).ControlHandler(gatewaytest.TrustDomain)
	return e, h, leafOf(t, certPEM)
}

// nodeIDs is n random node ids in their text form.
func nodeIDs(n int) []string {
	ids := make([]string, n)
	for i := range ids {
		ids[i] = uuid.NewString()
	}
	return ids
}

// TestControlLimits: the control API's Connect service reads at most a megabyte of message
// (ResourceExhausted past it, in either codec), refuses what does not decode (InvalidArgument),
// and checks its node ids: at most 20,000, each a UUID, a bad one named by its field path.
func TestControlLimits(t *testing.T) {
	t.Parallel()
	_, h, leaf := controlHandler(t)
	hc := &http.Client{Transport: asPeer{h: h, leaf: leaf}}
	const base = "https://gateway.invalid"
	for _, codec := range []struct {
		name string
		opts []connect.ClientOption
	}{{"proto", nil}, {"json", []connect.ClientOption{connect.WithProtoJSON()}}} {
		c := gatewayv1connect.NewGatewayControlServiceClient(hc, base, codec.opts...)
		if _, err := c.Poke(ctx, &gatewayv1.PokeRequest{}); err != nil {
			t.Errorf("%s: an empty poke: %v", codec.name, err)
		}
		if _, err := c.Poke(ctx, &gatewayv1.PokeRequest{NodeIds: nodeIDs(20_000)}); err != nil {
			t.Errorf("%s: a poke of 20,000 nodes: %v", codec.name, err)
		}
		// 40,000 ids are some 1.5 MB in either codec.
		if _, err := c.Poke(ctx, &gatewayv1.PokeRequest{NodeIds: nodeIDs(40_000)}); connect.CodeOf(err) != connect.CodeResourceExhausted {
			t.Errorf("%s: a poke of 1.5 MB: %v, want resource_exhausted", codec.name, err)
		}
		if _, err := c.Revoke(ctx, &gatewayv1.RevokeRequest{NodeIds: nodeIDs(20_001)}); connect.CodeOf(err) != connect.CodeInvalidArgument || !strings.Contains(err.Error(), "node_ids: at most 20000") {
			t.Errorf("%s: a revoke of 20,001 nodes: %v, want invalid_argument naming node_ids", codec.name, err)
		}
		ids := []string{uuid.NewString(), "node-1"}
		_, err := c.Revoke(ctx, &gatewayv1.RevokeRequest{NodeIds: ids})
		if connect.CodeOf(err) != connect.CodeInvalidArgument || !strings.Contains(err.Error(), `node_ids[1]: must be a UUID, got "node-1"`) {
			t.Errorf("%s: a bad node id: %v, want invalid_argument naming node_ids[1]", codec.name, err)
		}
		if f := violation(t, err); f != "node_ids[1]" {
			t.Errorf("%s: a bad node id: field violation %q, want node_ids[1]", codec.name, f)
		}
	}
	// Bodies that are not messages, and one that says it is too long before it is read.
	for _, tc := range []struct {
		name, contentType string
		body              []byte
		want              connect.Code
	}{
		{"bad JSON", "application/json", []byte(`{"nodeIds": [`), connect.CodeInvalidArgument},
		{"JSON of another shape", "application/json", []byte(`{"nodeIds": "all"}`), connect.CodeInvalidArgument},
		{"bad protobuf", "application/proto", []byte{0xff, 0xff, 0xff}, connect.CodeInvalidArgument},
		{"two megabytes", "application/json", []byte(`{"nodeIds": ["` + strings.Repeat("0", 2<<20) + `"]}`), connect.CodeResourceExhausted},
	} {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+gatewayv1connect.GatewayControlServicePokeProcedure, bytes.NewReader(tc.body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", tc.contentType)
		res, err := hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(res.Body)
		res.Body.Close()
		if want := `"code":"` + tc.want.String() + `"`; !strings.Contains(string(body), want) {
			t.Errorf("%s: %d %s, want %s", tc.name, res.StatusCode, body, want)
		}
	}
}

// violation is the field of the one field violation err carries.
func violation(t *testing.T, err error) string {
	t.Helper()
	var cerr *connect.Error
	if !errors.As(err, &cerr) {
		return ""
	}
	for _, d := range cerr.Details() {
		v, derr := d.Value()
		if br, ok := v.(*errdetails.BadRequest); derr == nil && ok && len(br.GetFieldViolations()) == 1 {
			return br.GetFieldViolations()[0].GetField()
		}
	}
	return ""
}

// TestControlRefusesOtherIdentities: every route of the control API, the Connect service's and
// the tunnels', answers internal identities of the gateway's trust domain only: another
// identity from the same PKI (a gateway's), or an internal one of another trust domain, is
// refused (PermissionDenied, 403), and a request without a verified certificate is
// unauthenticated (401); nothing reaches the gateway.
func TestControlRefusesOtherIdentities(t *testing.T) {
	t.Parallel()
	e, _, apiLeaf := controlHandler(t)
	gwPEM, _, err := e.bundle.IssueGateway("test", "gw-other", nil, []net.IP{net.ParseIP("127.0.0.1")})
	if err != nil {
		t.Fatal(err)
	}
	gwLeaf := leafOf(t, gwPEM)
	g := gateway.New(gateway.Options{Pool: e.pool, Authority: e.bundle, ID: "gw-control"})
	for _, tc := range []struct {
		name   string
		h      http.Handler
		leaf   *x509.Certificate
		code   connect.Code
		status int
	}{
		{"a gateway's certificate", g.ControlHandler(gatewaytest.TrustDomain), gwLeaf, connect.CodePermissionDenied, http.StatusForbidden},
		{"an internal identity of another trust domain", g.ControlHandler("other.example"), apiLeaf, connect.CodePermissionDenied, http.StatusForbidden},
		{"no certificate", g.ControlHandler(gatewaytest.TrustDomain), nil, connect.CodeUnauthenticated, http.StatusUnauthorized},
	} {
		hc := &http.Client{Transport: asPeer{h: tc.h, leaf: tc.leaf}}
		for _, codec := range []struct {
			name string
			opts []connect.ClientOption
		}{{"connect", nil}, {"grpc", []connect.ClientOption{connect.WithGRPC()}}} {
			c := gatewayv1connect.NewGatewayControlServiceClient(hc, "https://gateway.invalid", codec.opts...)
			if _, err := c.Poke(ctx, &gatewayv1.PokeRequest{NodeIds: nodeIDs(1)}); connect.CodeOf(err) != tc.code {
				t.Errorf("%s, %s: poke: %v, want %v", tc.name, codec.name, err, tc.code)
			}
			if _, err := c.Revoke(ctx, &gatewayv1.RevokeRequest{NodeIds: nodeIDs(1)}); connect.CodeOf(err) != tc.code {
				t.Errorf("%s, %s: revoke: %v, want %v", tc.name, codec.name, err, tc.code)
			}
		}
		// The HTTP status of a Connect unary refusal, and of the tunnel route's (in text).
		for _, route := range []struct {
			path   string
			header http.Header
		}{
			{gatewayv1connect.GatewayControlServicePokeProcedure, http.Header{"Content-Type": {"application/proto"}}},
			{tunnelhop.ControlPath, openHeader(t, &gatewayv1.OpenTunnelRequest{TunnelId: uuid.NewString(), NodeId: uuid.NewString(), Port: 22})},
		} {
			req, err := http.NewRequestWithContext(ctx, http.MethodPost, "https://gateway.invalid"+route.path, http.NoBody)
			if err != nil {
				t.Fatal(err)
			}
			req.Header = route.header
			res, err := hc.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(res.Body)
			res.Body.Close()
			if res.StatusCode != tc.status {
				t.Errorf("%s: %s: %d %s, want %d", tc.name, route.path, res.StatusCode, body, tc.status)
			}
		}
		// Unknown routes too: nothing of the mux answers before the identity is checked.
		res, err := hc.Get("https://gateway.invalid/nothing-here")
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if res.StatusCode != tc.status {
			t.Errorf("%s: an unknown route: %d, want %d", tc.name, res.StatusCode, tc.status)
		}
	}
}

// TestNotifierThroughControlAPI: the Notifier reaches a gateway's control API over mutual TLS
// with its generated client: its poke dispatches a command that the gateway's own loop would
// not send for an hour, and its revocation ends the node's session there (the daemon, not
// revoked in the database, opens a new one).
func TestNotifierThroughControlAPI(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	gw := e.StartGateway("gw-notified", func(o *gateway.Options) { o.DispatchInterval = time.Hour })
	f := e.startFake(gw.Addr, e.token(1, time.Now().Add(time.Hour)))
	node := f.Status().NodeID
	n, err := gateway.NewNotifier(e.pool, e.bundle, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(n.Wait)
	// The session is recorded as the gateway's before the notifier can find it there.
	poll.Until(t, 10*time.Second, "the session is recorded", func() bool {
		var on string
		_ = e.pool.QueryRow(ctx, "SELECT gateway_id FROM node_sessions WHERE node_id = $1", node).Scan(&on)
		return on == "gw-notified"
	})
	id := e.command(node, "echo", `{"data":{"via":"poke"}}`, "notified")
	n.CommandsCreated(ctx, []uuid.UUID{uuid.MustParse(node)})
	poll.Until(t, 10*time.Second, "the poked command succeeds", func() bool { s, _ := e.commandState(id); return s == "succeeded" })

	before := f.Status().Sessions
	n.NodesRevoked(ctx, []uuid.UUID{uuid.MustParse(node)})
	poll.Until(t, 15*time.Second, "the revoked session ends and the daemon opens another", func() bool { return f.Status().Sessions > before })
}
