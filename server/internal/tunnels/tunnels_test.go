package tunnels_test

import (
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/google/uuid"
	"google.golang.org/protobuf/types/known/fieldmaskpb"

	"github.com/better-compute/better-compute/client/tunnel"
	auditv1 "github.com/better-compute/better-compute/gen/go/bettercompute/audit/v1"
	leasesv1 "github.com/better-compute/better-compute/gen/go/bettercompute/leases/v1"
	"github.com/better-compute/better-compute/gen/go/bettercompute/leases/v1/leasesv1connect"
	nodesv1 "github.com/better-compute/better-compute/gen/go/bettercompute/nodes/v1"
	poolsv1 "github.com/better-compute/better-compute/gen/go/bettercompute/pools/v1"
	"github.com/better-compute/better-compute/gen/go/bettercompute/pools/v1/poolsv1connect"
	tunnelsv1 "github.com/better-compute/better-compute/gen/go/bettercompute/tunnels/v1"
	"github.com/better-compute/better-compute/internal/capacity/capacitytest"
	"github.com/better-compute/better-compute/internal/poll"
	"github.com/better-compute/better-compute/internal/tunnelhop"
	"github.com/better-compute/better-compute/server"
	"github.com/better-compute/better-compute/server/internal/tunnels"
)

// grantee is a tenant holding a placed lease on the root tenant's node, in a pool whose tunnel
// ports are 8080 and 9000.
type grantee struct {
	id    uuid.UUID
	key   string
	lease uuid.UUID
}

func (e *env) grantee(t *testing.T, name string) grantee {
	t.Helper()
	pools := poolsv1connect.NewPoolsServiceClient(e.HTTPClient(e.AdminKey), e.URL)
	created, err := pools.Create(ctx, &poolsv1.CreateRequest{Name: "gpus-" + name, NodeIds: []string{e.node.String()}})
	if err != nil {
		t.Fatal(err)
	}
	updated, err := pools.Update(ctx, &poolsv1.UpdateRequest{
		Id: created.GetPool().GetId(), TunnelPorts: []int32{9000, 8080, 9000},
		UpdateMask: &fieldmaskpb.FieldMask{Paths: []string{"tunnel_ports"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	if got := updated.GetPool().GetTunnelPorts(); len(got) != 2 || got[0] != 8080 || got[1] != 9000 {
		t.Fatalf("the pool's tunnel ports are %v, want [8080 9000]", got)
	}
	g := grantee{}
	g.id, g.key = e.tenant(t, name)
	g.lease = capacitytest.Leases(t, e.Pool, g.id, uuid.MustParse(created.GetPool().GetId()), 1, capacitytest.LeaseSpec{GPUs: 1, Model: "H100"})[0]
	capacitytest.PlaceOn(t, e.Pool, g.lease, e.node)
	return g
}

// TestCreateAuthorization: the node's tenant may open tunnels to the ports of its spec, a tenant
// with a placed lease on the node to the ports of the lease's pool; any other node is not found,
// with the answer of an unknown one, and any other port is refused naming the port.
func TestCreateAuthorization(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	admin := e.tunnels(e.AdminKey)

	before := time.Now()
	res := e.create(t, e.AdminKey, e.node, 22)
	if len(res.GetTicket()) != 43 || !strings.HasPrefix(res.GetUrl(), "ws://") ||
		!strings.HasSuffix(res.GetUrl(), "/api/tunnels/"+res.GetTicket()) {
		t.Fatalf("ticket %q, url %q", res.GetTicket(), res.GetUrl())
	}
	if exp := res.GetExpireTime().AsTime(); exp.Before(before.Add(tunnelhop.TicketTTL-5*time.Second)) || exp.After(before.Add(tunnelhop.TicketTTL+5*time.Second)) {
		t.Fatalf("expires at %v, want about %v from %v", exp, tunnelhop.TicketTTL, before)
	}
	tn := res.GetTunnel()
	if tn.GetNodeId() != e.node.String() || tn.GetPort() != 22 || tn.GetLeaseId() != "" || tn.GetOpenTime() != nil || tn.GetPrincipalId() == "" {
		t.Fatalf("tunnel %v", tn)
	}
	var stored []byte
	if err := e.Pool.QueryRow(ctx, `SELECT ticket_hash FROM tunnels WHERE id = $1`, tn.GetId()).Scan(&stored); err != nil {
		t.Fatal(err)
	}
	if string(stored) != string(tunnelhop.HashTicket(res.GetTicket())) {
		t.Fatal("the ticket is not stored as its hash")
	}
	audit, err := e.Audit(e.AdminKey).List(ctx, &auditv1.ListRequest{Method: "tunnels/create"})
	if err != nil || len(audit.GetEvents()) != 1 || audit.GetEvents()[0].GetTarget() != "tunnel/"+tn.GetId() {
		t.Fatalf("audit of tunnels/create: %v (%v)", audit.GetEvents(), err)
	}

	_, err = admin.Create(ctx, &tunnelsv1.CreateRequest{NodeId: e.node.String(), Port: 8080})
	wantCode(t, "a port the spec does not list", err, connect.CodeFailedPrecondition, "port")
	_, err = admin.Create(ctx, &tunnelsv1.CreateRequest{NodeId: e.node.String(), Port: 0})
	wantCode(t, "port 0", err, connect.CodeInvalidArgument, "port")
	_, err = admin.Create(ctx, &tunnelsv1.CreateRequest{NodeId: e.node.String(), Port: 65536})
	wantCode(t, "port 65536", err, connect.CodeInvalidArgument, "port")
	_, err = admin.Create(ctx, &tunnelsv1.CreateRequest{NodeId: "nope", Port: 22})
	wantCode(t, "a malformed node id", err, connect.CodeInvalidArgument, "node_id")

	// Another tenant sees nothing of the node until it holds a lease on it.
	acme, acmeKey := e.tenant(t, "acme")
	unknown := uuid.New()
	_, errUnknown := e.tunnels(acmeKey).Create(ctx, &tunnelsv1.CreateRequest{NodeId: unknown.String(), Port: 22})
	_, errOther := e.tunnels(acmeKey).Create(ctx, &tunnelsv1.CreateRequest{NodeId: e.node.String(), Port: 22})
	wantCode(t, "an unknown node", errUnknown, connect.CodeNotFound, "")
	wantCode(t, "another tenant's node", errOther, connect.CodeNotFound, "")
	if strings.ReplaceAll(errOther.Error(), e.node.String(), "ID") != strings.ReplaceAll(errUnknown.Error(), unknown.String(), "ID") {
		t.Fatalf("another tenant's node: %v, want the answer for an unknown node: %v", errOther, errUnknown)
	}
	acmeNode := capacitytest.Nodes(t, e.Pool, acme, 1, capacitytest.NodeSpec{})[0]
	_, err = admin.Create(ctx, &tunnelsv1.CreateRequest{NodeId: acmeNode.String(), Port: 22})
	wantCode(t, "a node of a tenant below", err, connect.CodeNotFound, "")

	// A grantee with a placed lease on the node: the pool's ports, not the spec's.
	g := e.grantee(t, "globex")
	res = e.create(t, g.key, e.node, 8080)
	if res.GetTunnel().GetLeaseId() != g.lease.String() || res.GetTunnel().GetTenantId() != g.id.String() {
		t.Fatalf("the grantee's tunnel %v, want lease %s", res.GetTunnel(), g.lease)
	}
	_, err = e.tunnels(g.key).Create(ctx, &tunnelsv1.CreateRequest{NodeId: e.node.String(), Port: 22})
	wantCode(t, "the grantee, a port of the spec but not of the pool", err, connect.CodeFailedPrecondition, "port")
	_, err = admin.Create(ctx, &tunnelsv1.CreateRequest{NodeId: e.node.String(), Port: 9000})
	wantCode(t, "the owner, a port of the pool but not of the spec", err, connect.CodeFailedPrecondition, "port")
	// At risk still allows it; pending does not.
	if _, err := e.Pool.Exec(ctx, `UPDATE pool_leases SET state = 'at_risk' WHERE id = $1`, g.lease); err != nil {
		t.Fatal(err)
	}
	e.create(t, g.key, e.node, 9000)
	if _, err := e.Pool.Exec(ctx, `UPDATE pool_leases SET state = 'pending', placed_at = NULL, ends_at = NULL WHERE id = $1`, g.lease); err != nil {
		t.Fatal(err)
	}
	_, err = e.tunnels(g.key).Create(ctx, &tunnelsv1.CreateRequest{NodeId: e.node.String(), Port: 8080})
	wantCode(t, "the grantee with a pending lease", err, connect.CodeNotFound, "")

	// A revoked node takes no tunnels.
	if _, err := e.nodes(e.AdminKey).Revoke(ctx, &nodesv1.RevokeRequest{Id: e.node.String()}); err != nil {
		t.Fatal(err)
	}
	_, err = admin.Create(ctx, &tunnelsv1.CreateRequest{NodeId: e.node.String(), Port: 22})
	wantCode(t, "a revoked node", err, connect.CodeFailedPrecondition, "")
}

// TestTunnelPortsValidation: the tunnel ports of node specs and pools are bounded and checked,
// each error naming the field.
func TestTunnelPortsValidation(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	many := make([]int32, 65)
	for i := range many {
		many[i] = int32(1000 + i)
	}
	_, err := e.nodes(e.AdminKey).UpdateSpec(ctx, &nodesv1.UpdateSpecRequest{Id: e.node.String(), Spec: &nodesv1.NodeSpec{TunnelPorts: []int32{22, 70000}}})
	wantCode(t, "spec port 70000", err, connect.CodeInvalidArgument, "spec.tunnel_ports[1]")
	_, err = e.nodes(e.AdminKey).UpdateSpec(ctx, &nodesv1.UpdateSpecRequest{Id: e.node.String(), Spec: &nodesv1.NodeSpec{TunnelPorts: many}})
	wantCode(t, "65 spec ports", err, connect.CodeInvalidArgument, "spec.tunnel_ports")
	pools := poolsv1connect.NewPoolsServiceClient(e.HTTPClient(e.AdminKey), e.URL)
	_, err = pools.Create(ctx, &poolsv1.CreateRequest{Name: "p", TunnelPorts: []int32{0}})
	wantCode(t, "pool port 0", err, connect.CodeInvalidArgument, "tunnel_ports[0]")
	_, err = pools.Create(ctx, &poolsv1.CreateRequest{Name: "p", TunnelPorts: many})
	wantCode(t, "65 pool ports", err, connect.CodeInvalidArgument, "tunnel_ports")
	p, err := pools.Create(ctx, &poolsv1.CreateRequest{Name: "p", TunnelPorts: []int32{443, 22, 443}})
	if err != nil || len(p.GetPool().GetTunnelPorts()) != 2 || p.GetPool().GetTunnelPorts()[0] != 22 {
		t.Fatalf("create a pool with ports: %v (%v)", p.GetPool().GetTunnelPorts(), err)
	}
	_, err = pools.Update(ctx, &poolsv1.UpdateRequest{Id: p.GetPool().GetId(), TunnelPorts: []int32{-1},
		UpdateMask: &fieldmaskpb.FieldMask{Paths: []string{"tunnel_ports"}}})
	wantCode(t, "pool port -1", err, connect.CodeInvalidArgument, "tunnel_ports[0]")
	u, err := pools.Update(ctx, &poolsv1.UpdateRequest{Id: p.GetPool().GetId(), UpdateMask: &fieldmaskpb.FieldMask{Paths: []string{"tunnel_ports"}}})
	if err != nil || len(u.GetPool().GetTunnelPorts()) != 0 {
		t.Fatalf("clear a pool's ports: %v (%v)", u.GetPool().GetTunnelPorts(), err)
	}
}

// TestRefusalsBeforeTheUpgrade: every refusal has its status and opens nothing; a ticket refused
// for a state that may change (caps, session, allowance) stays unspent.
func TestRefusalsBeforeTheUpgrade(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	res := e.create(t, e.AdminKey, e.node, 22)
	url := res.GetUrl()

	wantRefused(t, "no API key", url, "", http.StatusUnauthorized)
	wantRefused(t, "a bad API key", url, "bck_nope", http.StatusUnauthorized)
	wantRefused(t, "without the subprotocol", url, e.AdminKey, http.StatusUpgradeRequired, "other")
	plain, err := e.HTTPClient(e.AdminKey).Get(strings.Replace(url, "ws://", "http://", 1))
	if err != nil {
		t.Fatal(err)
	}
	_ = plain.Body.Close()
	if plain.StatusCode != http.StatusUpgradeRequired {
		t.Fatalf("a plain GET: HTTP %d, want 426", plain.StatusCode)
	}
	wantRefused(t, "an unknown ticket", url[:strings.LastIndex(url, "/")+1]+strings.Repeat("x", 43), e.AdminKey, http.StatusNotFound)
	_, acmeKey := e.tenant(t, "acme")
	wantRefused(t, "another tenant's key", url, acmeKey, http.StatusForbidden)

	// The node lost its port: the ticket stays unspent.
	if _, err := e.Pool.Exec(ctx, `UPDATE nodes SET spec = '{"tunnelPorts": [8888]}' WHERE id = $1`, e.node); err != nil {
		t.Fatal(err)
	}
	wantRefused(t, "a port no longer allowed", url, e.AdminKey, http.StatusPreconditionFailed)
	if _, err := e.Pool.Exec(ctx, `UPDATE nodes SET spec = '{"tunnelPorts": [22]}' WHERE id = $1`, e.node); err != nil {
		t.Fatal(err)
	}
	// No session.
	if _, err := e.Pool.Exec(ctx, `DELETE FROM node_sessions WHERE node_id = $1`, e.node); err != nil {
		t.Fatal(err)
	}
	wantRefused(t, "a node without a session", url, e.AdminKey, http.StatusServiceUnavailable)
	if n := e.gw.requests.Load(); n != 0 {
		t.Fatalf("the gateway got %d requests from refused upgrades", n)
	}
	if r := e.row(t, res.GetTunnel().GetId()); r.OpenedAt != nil || r.ClosedAt != nil {
		t.Fatalf("a refused ticket was spent: %+v", r)
	}

	// With the session back the ticket opens, once.
	e.connect(t, e.node)
	s := open(t, url, e.AdminKey)
	wantRefused(t, "a spent ticket", url, e.AdminKey, http.StatusConflict)
	if err := s.WriteFrame(tunnel.Frame{Type: tunnel.CloseWrite}); err != nil {
		t.Fatal(err)
	}
	if end := readToEnd(t, s); end.code != tunnel.CodeNormal {
		t.Fatalf("the tunnel ended with %d (%s)", end.code, end.reason)
	}

	// Expired and closed tickets.
	expired := e.create(t, e.AdminKey, e.node, 22)
	if _, err := e.Pool.Exec(ctx, `UPDATE tunnels SET expires_at = now() - interval '1 second' WHERE id = $1`, expired.GetTunnel().GetId()); err != nil {
		t.Fatal(err)
	}
	wantRefused(t, "an expired ticket", expired.GetUrl(), e.AdminKey, http.StatusGone)
	closed := e.create(t, e.AdminKey, e.node, 22)
	c, err := e.tunnels(e.AdminKey).CloseTunnel(ctx, &tunnelsv1.CloseTunnelRequest{Id: closed.GetTunnel().GetId()})
	if err != nil || c.GetTunnel().GetCloseCode() != int32(tunnel.CodeTunnelsClosed) || c.GetTunnel().GetCloseTime() == nil {
		t.Fatalf("close an unused ticket: %v (%v)", c.GetTunnel(), err)
	}
	wantRefused(t, "a closed ticket", closed.GetUrl(), e.AdminKey, http.StatusGone)
	if n := e.gw.requests.Load(); n != 1 {
		t.Fatalf("the gateway got %d requests, want the one of the tunnel that opened", n)
	}
	// Refusals of an authenticated principal are audited.
	audit, err := e.Audit(e.AdminKey).List(ctx, &auditv1.ListRequest{Method: "tunnels/open", Outcome: "failed_precondition"})
	if err != nil || len(audit.GetEvents()) < 3 {
		t.Fatalf("audit of refused upgrades: %v (%v)", audit.GetEvents(), err)
	}
}

// TestEchoWithHalfClose: a tunnel through the gateway carries bytes both ways, the node's side
// keeps sending after the client's half-close, and both half-closes end it normally; its row,
// audit rows and listing say so.
func TestEchoWithHalfClose(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	res := e.create(t, e.AdminKey, e.node, 8888)
	s := open(t, res.GetUrl(), e.AdminKey)
	o := e.gw.opening(t)
	if o.GetTunnelId() != res.GetTunnel().GetId() || o.GetNodeId() != e.node.String() || o.GetPort() != 8888 {
		t.Fatalf("the gateway was asked to open %v", o)
	}
	list, err := e.tunnels(e.AdminKey).List(ctx, &tunnelsv1.ListRequest{})
	if err != nil || len(list.GetTunnels()) != 1 || list.GetTunnels()[0].GetOpenTime() == nil || list.GetTunnels()[0].GetExpireTime() != nil {
		t.Fatalf("list while open: %v (%v)", list.GetTunnels(), err)
	}
	if r := e.row(t, res.GetTunnel().GetId()); r.GatewayID != gatewayID || r.ApiInstance == "" {
		t.Fatalf("the open tunnel's row: %+v", r)
	}
	big := []byte(strings.Repeat("0123456789", 20000)) // several frames
	for off := 0; off < len(big); off += tunnel.MaxPayload {
		if err := s.WriteFrame(tunnel.Frame{Type: tunnel.Data, Payload: big[off:min(off+tunnel.MaxPayload, len(big))]}); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.WriteFrame(tunnel.Frame{Type: tunnel.CloseWrite}); err != nil {
		t.Fatal(err)
	}
	end := readToEnd(t, s)
	if string(end.data) != string(big)+"bye" || !end.closeWrite || end.code != tunnel.CodeNormal {
		t.Fatalf("got %d bytes, close-write %v, code %d (%s); want the echo, \"bye\", a close-write and 1000",
			len(end.data), end.closeWrite, end.code, end.reason)
	}
	id := res.GetTunnel().GetId()
	poll.Until(t, 5*time.Second, "the tunnel's end is recorded", func() bool { return e.row(t, id).ClosedAt != nil })
	r := e.row(t, id)
	if *r.CloseCode != int32(tunnel.CodeNormal) || r.BytesToNode != int64(len(big)) || r.BytesFromNode != int64(len(big)+3) {
		t.Fatalf("the row: code %d, %d bytes to the node, %d from it", *r.CloseCode, r.BytesToNode, r.BytesFromNode)
	}
	for method, outcome := range map[string]string{"tunnels/open": "ok", "tunnels/closed": "1000"} {
		a, err := e.Audit(e.AdminKey).List(ctx, &auditv1.ListRequest{Method: method})
		if err != nil || len(a.GetEvents()) != 1 || a.GetEvents()[0].GetOutcome() != outcome || a.GetEvents()[0].GetTarget() != "tunnel/"+id {
			t.Fatalf("audit of %s: %v (%v)", method, a.GetEvents(), err)
		}
	}
	list, err = e.tunnels(e.AdminKey).List(ctx, &tunnelsv1.ListRequest{})
	if err != nil || len(list.GetTunnels()) != 0 {
		t.Fatalf("open tunnels after the end: %v (%v)", list.GetTunnels(), err)
	}
	second := e.create(t, e.AdminKey, e.node, 22)
	list, err = e.tunnels(e.AdminKey).List(ctx, &tunnelsv1.ListRequest{IncludeClosed: true, PageSize: 1})
	if err != nil || len(list.GetTunnels()) != 1 || list.GetTunnels()[0].GetId() != second.GetTunnel().GetId() || list.GetNextPageToken() == "" {
		t.Fatalf("first page, newest first: %v (%v)", list.GetTunnels(), err)
	}
	list, err = e.tunnels(e.AdminKey).List(ctx, &tunnelsv1.ListRequest{IncludeClosed: true, PageToken: list.GetNextPageToken(), NodeId: e.node.String()})
	if err != nil || len(list.GetTunnels()) != 1 || list.GetTunnels()[0].GetCloseCode() != 1000 || list.GetTunnels()[0].GetBytesFromNode() != int64(len(big)+3) {
		t.Fatalf("second page: %v (%v)", list.GetTunnels(), err)
	}
}

// TestReleaseEndsTunnels: releasing the lease that allowed a tunnel ends it with 4001 within two
// seconds, at the client and at the gateway.
func TestReleaseEndsTunnels(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	g := e.grantee(t, "acme")
	res := e.create(t, g.key, e.node, 8080)
	s := open(t, res.GetUrl(), g.key)
	e.gw.opening(t)
	if err := s.WriteFrame(tunnel.Frame{Type: tunnel.Data, Payload: []byte("ping")}); err != nil {
		t.Fatal(err)
	}
	f, err := s.ReadFrame()
	if err != nil || string(f.Payload) != "ping" {
		t.Fatalf("echo: %q (%v)", f.Payload, err)
	}
	leases := leasesv1connect.NewLeasesServiceClient(e.HTTPClient(g.key), e.URL)
	if _, err := leases.Release(ctx, &leasesv1.ReleaseRequest{Id: g.lease.String()}); err != nil {
		t.Fatal(err)
	}
	released := time.Now()
	end := readToEnd(t, s)
	if took := time.Since(released); end.code != tunnel.CodeLeaseEnded || took > 2*time.Second {
		t.Fatalf("the tunnel ended with %d (%s) %v after the release; want 4001 within 2s", end.code, end.reason, took)
	}
	if code := e.gw.abort(t); code != tunnel.CodeLeaseEnded {
		t.Fatalf("the gateway got abort %d", code)
	}
	id := res.GetTunnel().GetId()
	poll.Until(t, 5*time.Second, "the tunnel's end is recorded", func() bool { return e.row(t, id).ClosedAt != nil })
	if r := e.row(t, id); *r.CloseCode != int32(tunnel.CodeLeaseEnded) || r.BytesToNode != 4 {
		t.Fatalf("the row: %+v", r)
	}
}

// TestLeaseEndEndsTunnels: a tunnel whose lease reaches its end ends with 4001 within two seconds
// of that end (docs/tunnels.md), whether or not the placer has recorded the end yet (no placer
// runs here).
func TestLeaseEndEndsTunnels(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	g := e.grantee(t, "acme")
	res := e.create(t, g.key, e.node, 8080)
	s := open(t, res.GetUrl(), g.key)
	e.gw.opening(t)
	ended := make(chan tunnel.Code, 1)
	go func() { // readToEnd, without t: the first abort's code, or 0 for any other end
		for {
			f, err := s.ReadFrame()
			var ae *tunnel.AbortError
			switch {
			case errors.As(err, &ae):
				ended <- ae.Code
				return
			case err != nil:
				ended <- 0
				return
			case f.Type == tunnel.Abort:
				code, _ := tunnel.ParseAbort(f.Payload)
				ended <- code
				return
			}
		}
	}()
	var end time.Time
	if err := e.Pool.QueryRow(ctx, `UPDATE pool_leases SET ends_at = now() WHERE id = $1 RETURNING ends_at`, g.lease).Scan(&end); err != nil {
		t.Fatal(err)
	}
	select {
	case code := <-ended:
		if code != tunnel.CodeLeaseEnded {
			t.Fatalf("the tunnel ended with %d, want 4001", code)
		}
		t.Logf("the tunnel ended %v after its lease's end", time.Since(end).Round(time.Millisecond))
	case <-time.After(time.Until(end.Add(2 * time.Second))):
		t.Fatal("the tunnel was still open 2s after its lease's end")
	}
	if code := e.gw.abort(t); code != tunnel.CodeLeaseEnded {
		t.Fatalf("the gateway got abort %d", code)
	}
	if _, err := e.tunnels(g.key).Create(ctx, &tunnelsv1.CreateRequest{NodeId: e.node.String(), Port: 8080}); connect.CodeOf(err) != connect.CodeNotFound {
		t.Fatalf("a tunnel through the ended lease: %v", err)
	}
}

// TestCloseEndsTunnel: tunnels/close ends an open tunnel with 4008; closing it again changes
// nothing.
func TestCloseEndsTunnel(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	res := e.create(t, e.AdminKey, e.node, 22)
	s := open(t, res.GetUrl(), e.AdminKey)
	e.gw.opening(t)
	id := res.GetTunnel().GetId()
	c, err := e.tunnels(e.AdminKey).CloseTunnel(ctx, &tunnelsv1.CloseTunnelRequest{Id: id})
	if err != nil {
		t.Fatal(err)
	}
	if end := readToEnd(t, s); end.code != tunnel.CodeTunnelsClosed {
		t.Fatalf("the tunnel ended with %d (%s), want 4008", end.code, end.reason)
	}
	if c.GetTunnel().GetOpenTime() == nil {
		t.Fatalf("close returned %v", c.GetTunnel())
	}
	poll.Until(t, 5*time.Second, "the tunnel's end is recorded", func() bool { return e.row(t, id).ClosedAt != nil })
	again, err := e.tunnels(e.AdminKey).CloseTunnel(ctx, &tunnelsv1.CloseTunnelRequest{Id: id})
	if err != nil || again.GetTunnel().GetCloseCode() != int32(tunnel.CodeTunnelsClosed) {
		t.Fatalf("close again: %v (%v)", again.GetTunnel(), err)
	}
	_, acmeKey := e.tenant(t, "acme")
	_, err = e.tunnels(acmeKey).CloseTunnel(ctx, &tunnelsv1.CloseTunnelRequest{Id: id})
	wantCode(t, "another tenant's tunnel", err, connect.CodeNotFound, "")
}

// TestWatcherEndsTunnels: the watcher ends a tunnel that tunnels/close asked another API process
// to close (here the request is only written, as that process would see it), and one whose node
// was revoked.
func TestWatcherEndsTunnels(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	closing := open(t, e.create(t, e.AdminKey, e.node, 22).GetUrl(), e.AdminKey)
	e.gw.opening(t)
	revoked := open(t, e.create(t, e.AdminKey, e.node, 8888).GetUrl(), e.AdminKey)
	e.gw.opening(t)
	if _, err := e.Pool.Exec(ctx, `UPDATE tunnels SET close_requested_at = now() WHERE port = 22`); err != nil {
		t.Fatal(err)
	}
	if end := readToEnd(t, closing); end.code != tunnel.CodeTunnelsClosed {
		t.Fatalf("the tunnel asked to close ended with %d (%s)", end.code, end.reason)
	}
	if _, err := e.Pool.Exec(ctx, `UPDATE nodes SET revoked_at = now() WHERE id = $1`, e.node); err != nil {
		t.Fatal(err)
	}
	if end := readToEnd(t, revoked); end.code != tunnel.CodeNodeGone {
		t.Fatalf("the tunnel to a revoked node ended with %d (%s)", end.code, end.reason)
	}
}

// TestCaps: the open tunnels of a node and of a tenant are capped (429), and the refused ticket
// stays usable once a tunnel closes.
func TestCaps(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		opts tunnels.Options
	}{
		{"per node", tunnels.Options{PerNode: 1}},
		{"per tenant", tunnels.Options{PerTenant: 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, func(o *server.TunnelOptions) { o.PerNode, o.PerTenant = tc.opts.PerNode, tc.opts.PerTenant })
			first := e.create(t, e.AdminKey, e.node, 22)
			s := open(t, first.GetUrl(), e.AdminKey)
			second := e.create(t, e.AdminKey, e.node, 22)
			wantRefused(t, "over the cap", second.GetUrl(), e.AdminKey, http.StatusTooManyRequests)
			if _, err := e.tunnels(e.AdminKey).CloseTunnel(ctx, &tunnelsv1.CloseTunnelRequest{Id: first.GetTunnel().GetId()}); err != nil {
				t.Fatal(err)
			}
			if end := readToEnd(t, s); end.code != tunnel.CodeTunnelsClosed {
				t.Fatalf("the first tunnel ended with %d", end.code)
			}
			id := first.GetTunnel().GetId()
			poll.Until(t, 5*time.Second, "the first tunnel's end is recorded", func() bool { return e.row(t, id).ClosedAt != nil })
			open(t, second.GetUrl(), e.AdminKey)
		})
	}
}

// TestGatewayRefusal: a gateway that answers 503 before streaming (the node's daemon is not
// there) ends the tunnel with 4004.
func TestGatewayRefusal(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	e.gw.status.Store(http.StatusServiceUnavailable)
	res := e.create(t, e.AdminKey, e.node, 22)
	s := open(t, res.GetUrl(), e.AdminKey)
	if end := readToEnd(t, s); end.code != tunnel.CodeNodeOffline {
		t.Fatalf("the tunnel ended with %d (%s), want 4004", end.code, end.reason)
	}
	id := res.GetTunnel().GetId()
	poll.Until(t, 5*time.Second, "the tunnel's end is recorded", func() bool { return e.row(t, id).ClosedAt != nil })
	if r := e.row(t, id); *r.CloseCode != int32(tunnel.CodeNodeOffline) || r.OpenedAt == nil {
		t.Fatalf("the row: %+v", r)
	}
}

// TestIdleTimeout: a tunnel that carries nothing for the idle timeout ends with 4000.
func TestIdleTimeout(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(o *server.TunnelOptions) { o.IdleTimeout = 300 * time.Millisecond })
	s := open(t, e.create(t, e.AdminKey, e.node, 22).GetUrl(), e.AdminKey)
	if end := readToEnd(t, s); end.code != tunnel.CodeIdle {
		t.Fatalf("the tunnel ended with %d (%s), want 4000", end.code, end.reason)
	}
}

// TestOutlivesReadTimeout: the HTTP server's read timeout, which bounds requests, does not cut a
// tunnel: one that carries nothing ends by its idle timeout, later.
func TestOutlivesReadTimeout(t *testing.T) {
	t.Parallel()
	e := newEnvWithReadTimeout(t, func(o *server.TunnelOptions) { o.IdleTimeout = 2 * time.Second }, 500*time.Millisecond)
	s := open(t, e.create(t, e.AdminKey, e.node, 22).GetUrl(), e.AdminKey)
	if end := readToEnd(t, s); end.code != tunnel.CodeIdle {
		t.Fatalf("the tunnel ended with %d (%s), want 4000 after the idle timeout", end.code, end.reason)
	}
}

// TestShutdownClosesTunnels: when the API stops, its tunnels end with 1001 and new ones are
// refused.
func TestShutdownClosesTunnels(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	s := open(t, e.create(t, e.AdminKey, e.node, 22).GetUrl(), e.AdminKey)
	e.gw.opening(t)
	next := e.create(t, e.AdminKey, e.node, 22)
	done := make(chan struct{})
	go func() {
		defer close(done)
		e.Server.Config.Handler.(*server.Server).CloseTunnels(ctx)
	}()
	if end := readToEnd(t, s); end.code != tunnel.CodeGoingAway {
		t.Fatalf("the tunnel ended with %d (%s), want 1001", end.code, end.reason)
	}
	<-done
	wantRefused(t, "an upgrade after the shutdown", next.GetUrl(), e.AdminKey, http.StatusServiceUnavailable)
	if r := e.row(t, next.GetTunnel().GetId()); r.OpenedAt != nil {
		t.Fatal("a ticket refused at shutdown was spent")
	}
}

// TestListByGet: a Connect GET of tunnels/list at its short route reaches the method, not the
// tunnel endpoint that shares its path.
func TestListByGet(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	res, err := e.HTTPClient(e.AdminKey).Get(e.URL + "/tunnels/list?encoding=json&message=%7B%7D")
	if err != nil {
		t.Fatal(err)
	}
	_ = res.Body.Close()
	if res.StatusCode != http.StatusOK || !strings.HasPrefix(res.Header.Get("Content-Type"), "application/json") {
		t.Fatalf("GET tunnels/list: HTTP %d, %s", res.StatusCode, res.Header.Get("Content-Type"))
	}
}
