package tunnels_test

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/google/uuid"
	"google.golang.org/protobuf/types/known/fieldmaskpb"

	"github.com/better-compute/better-compute/client"
	"github.com/better-compute/better-compute/client/tunnel"
	leasesv1 "github.com/better-compute/better-compute/gen/go/bettercompute/leases/v1"
	nodesv1 "github.com/better-compute/better-compute/gen/go/bettercompute/nodes/v1"
	poolsv1 "github.com/better-compute/better-compute/gen/go/bettercompute/pools/v1"
	tunnelsv1 "github.com/better-compute/better-compute/gen/go/bettercompute/tunnels/v1"
	"github.com/better-compute/better-compute/internal/capacity/capacitytest"
	"github.com/better-compute/better-compute/internal/poll"
)

// TestTransfer: transferSize bytes (1 GiB without the race detector) go to a port on the node
// and back through one tunnel, each way with the SHA-256 it was sent with, as the node read it
// too; after the client's half-close the node's last bytes (its hash) still arrive, the tunnel
// ends normally, and its row records it with the bytes each way.
func TestTransfer(t *testing.T) {
	t.Parallel()
	e := newEnv(t, false)
	p := listen(t, echo)
	n := e.startFake(fakeOptions{tunnelPorts: []int{p.port}})
	e.allow(n, p.port)

	conn := e.open(e.admin, n, p.port)
	start := time.Now()
	x := transfer(conn, transferSize, 1)
	took := time.Since(start)
	x.check(t, "the transfer")
	t.Logf("%d MiB each way in %v: %.0f MiB/s each way", transferSize>>20, took.Round(time.Millisecond), float64(transferSize)/(1<<20)/took.Seconds())
	if err := conn.Close(); err != nil {
		t.Errorf("close after both sides closed: %v", err)
	}
	id := conn.Info().GetId()
	poll.Until(t, 60*time.Second, "the tunnel's end is recorded", func() bool { return e.row(id).closed })
	if r := e.row(id); r.code != int32(tunnel.CodeNormal) {
		t.Errorf("the tunnel ended with %d, want %d", r.code, tunnel.CodeNormal)
	}
	var toNode, fromNode int64
	if err := e.Pool.QueryRow(ctx, `SELECT bytes_to_node, bytes_from_node FROM tunnels WHERE id = $1`, id).Scan(&toNode, &fromNode); err != nil {
		t.Fatal(err)
	}
	if toNode != transferSize || fromNode != transferSize+64 {
		t.Errorf("the row counts %d bytes to the node and %d from it, want %d and %d", toNode, fromNode, transferSize, transferSize+64)
	}
	if got := p.accepted.Load(); got != 1 {
		t.Errorf("the node's port accepted %d connections, want 1", got)
	}
}

// TestRefusals: a reused, expired or another tenant's ticket, a port the node's daemon does not
// allow, a port the node's spec does not allow, and a node that is offline are each refused with
// their documented status or close code, and none of them opens anything: no connection reaches
// the node's port, and the ticket's row is left as it was.
func TestRefusals(t *testing.T) {
	t.Parallel()
	e := newEnv(t, false)
	p := listen(t, echo)
	refused := listen(t, echo) // in the spec, not in the daemon's allow list
	n := e.startFake(fakeOptions{tunnelPorts: []int{p.port}})
	e.allow(n, p.port, refused.port)
	create := func(key string, port int) *tunnelsv1.CreateResponse {
		t.Helper()
		res, err := e.client(key).Tunnels.Create(ctx, &tunnelsv1.CreateRequest{NodeId: n.id, Port: int32(port)})
		if err != nil {
			t.Fatalf("create a ticket for port %d: %v", port, err)
		}
		return res
	}
	wantRefused := func(what, url, key string, status int) {
		t.Helper()
		s, got, err := dialTicket(t, url, key)
		if err == nil {
			_ = s.Close()
			t.Fatalf("%s: the tunnel opened, want HTTP %d", what, status)
		}
		if got != status {
			t.Fatalf("%s: HTTP %d (%v), want %d", what, got, err, status)
		}
	}
	unopened := func(what, id string) {
		t.Helper()
		if r := e.row(id); r.opened {
			t.Fatalf("%s: the ticket's tunnel is recorded as opened: %+v", what, r)
		}
	}

	// spend opens a ticket and ends the tunnel at once: the node's port answers with its hash of
	// nothing and closes.
	spend := func(what string, res *tunnelsv1.CreateResponse) {
		t.Helper()
		s, _, err := dialTicket(t, res.GetUrl(), e.api.AdminKey)
		if err != nil {
			t.Fatalf("%s: open: %v", what, err)
		}
		if err := s.WriteFrame(tunnel.Frame{Type: tunnel.CloseWrite}); err != nil {
			t.Fatal(err)
		}
		var got []byte
		for {
			f, err := s.ReadFrame()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				t.Fatalf("%s: %v", what, err)
			}
			got = append(got, f.Payload...)
		}
		if len(got) != 64 {
			t.Fatalf("%s: the node's hash of nothing is %q", what, got)
		}
	}

	// Reused: the first use works, the second is refused with 409.
	used := create(e.api.AdminKey, p.port)
	spend("a ticket's first use", used)
	wantRefused("a used ticket", used.GetUrl(), e.api.AdminKey, http.StatusConflict)

	// Expired: its expiry moved into the past, as 30 s of waiting would.
	expired := create(e.api.AdminKey, p.port)
	if _, err := e.Pool.Exec(ctx, `UPDATE tunnels SET expires_at = now() - interval '1 second' WHERE id = $1`, expired.GetTunnel().GetId()); err != nil {
		t.Fatal(err)
	}
	wantRefused("an expired ticket", expired.GetUrl(), e.api.AdminKey, http.StatusGone)
	unopened("an expired ticket", expired.GetTunnel().GetId())

	// Another tenant's: refused with 403, and still its own tenant's to spend.
	_, otherKey := e.tenant("other")
	theirs := create(e.api.AdminKey, p.port)
	wantRefused("another tenant's ticket", theirs.GetUrl(), otherKey, http.StatusForbidden)
	unopened("another tenant's ticket", theirs.GetTunnel().GetId())
	spend("another tenant's ticket, by its own tenant", theirs)
	if got := p.accepted.Load(); got != 2 {
		t.Fatalf("the node's port accepted %d connections, want 2 (the tickets spent)", got)
	}

	// A port the daemon does not allow: the tunnel opens as far as the daemon, which refuses it
	// with 4003 without dialling.
	conn := e.open(e.admin, n, refused.port)
	_, err := conn.Read(make([]byte, 1))
	var ae *client.TunnelAbortError
	if !errors.As(err, &ae) || ae.Code != tunnel.CodePortRefused {
		t.Fatalf("a port the daemon does not allow: %v, want close code %d", err, tunnel.CodePortRefused)
	}
	poll.Until(t, 60*time.Second, "the refused tunnel's end is recorded", func() bool { return e.row(conn.Info().GetId()).closed })
	if r := e.row(conn.Info().GetId()); r.code != int32(tunnel.CodePortRefused) {
		t.Fatalf("the refused tunnel's row: %+v", r)
	}
	if got := refused.accepted.Load(); got != 0 {
		t.Fatalf("the port the daemon does not allow accepted %d connections", got)
	}

	// A port the spec does not allow: tunnels/create refuses it, naming the port, and stores
	// no ticket.
	notInSpec := listen(t, echo)
	_, err = e.admin.Tunnels.Create(ctx, &tunnelsv1.CreateRequest{NodeId: n.id, Port: int32(notInSpec.port)})
	var cerr *connect.Error
	if !errors.As(err, &cerr) || cerr.Code() != connect.CodeFailedPrecondition || !strings.HasPrefix(cerr.Message(), "port: ") {
		t.Fatalf("tunnels/create for a port the spec does not allow: %v, want FailedPrecondition naming port", err)
	}
	var rows int
	if err := e.Pool.QueryRow(ctx, `SELECT count(*) FROM tunnels WHERE port = $1`, notInSpec.port).Scan(&rows); err != nil || rows != 0 {
		t.Fatalf("%d tickets for the port the spec does not allow (%v)", rows, err)
	}

	// Offline: the daemon stopped, its session ended; the ticket is refused with 503.
	n.stop()
	poll.Until(t, 60*time.Second, "the node shows disconnected", func() bool {
		res, err := e.admin.Nodes.Get(ctx, &nodesv1.GetRequest{Id: n.id})
		return err == nil && !res.GetNode().GetConnected()
	})
	offline := create(e.api.AdminKey, p.port)
	wantRefused("a node that is offline", offline.GetUrl(), e.api.AdminKey, http.StatusServiceUnavailable)
	unopened("a node that is offline", offline.GetTunnel().GetId())
	if got := p.accepted.Load() + notInSpec.accepted.Load(); got != 2 {
		t.Fatalf("the node's ports accepted %d connections, want 2", got)
	}
}

// TestLeaseReleaseClosesTunnel: a grantee tenant's tunnel, allowed by the pool of its lease on
// the node, closes with 4001 within two seconds of the lease's release at the client, and its
// connection to the node's port closes too.
func TestLeaseReleaseClosesTunnel(t *testing.T) {
	t.Parallel()
	e := newEnv(t, false)
	p := listen(t, echo)
	n := e.startFake(fakeOptions{tunnelPorts: []int{p.port}})

	created, err := e.admin.Pools.Create(ctx, &poolsv1.CreateRequest{Name: "gpus", NodeIds: []string{n.id}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.admin.Pools.Update(ctx, &poolsv1.UpdateRequest{
		Id: created.GetPool().GetId(), TunnelPorts: []int32{int32(p.port)}, UpdateMask: &fieldmaskpb.FieldMask{Paths: []string{"tunnel_ports"}},
	}); err != nil {
		t.Fatal(err)
	}
	grantee, key := e.tenant("grantee")
	lease := capacitytest.Leases(t, e.Pool, grantee, uuid.MustParse(created.GetPool().GetId()), 1, capacitytest.LeaseSpec{GPUs: 1, Model: "H100"})[0]
	capacitytest.PlaceOn(t, e.Pool, lease, uuid.MustParse(n.id))

	c := e.client(key)
	conn := e.open(c, n, p.port)
	if _, err := conn.Write([]byte("ping")); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 4)
	if _, err := io.ReadFull(conn, buf); err != nil || string(buf) != "ping" {
		t.Fatalf("echo: %q (%v)", buf, err)
	}
	if _, err := c.Leases.Release(ctx, &leasesv1.ReleaseRequest{Id: lease.String()}); err != nil {
		t.Fatal(err)
	}
	released := time.Now()
	_, err = conn.Read(buf)
	took := time.Since(released)
	var ae *client.TunnelAbortError
	if !errors.As(err, &ae) || ae.Code != tunnel.CodeLeaseEnded || took > 2*time.Second {
		t.Fatalf("after the release the tunnel read %v after %v; want close code %d within 2s", err, took, tunnel.CodeLeaseEnded)
	}
	t.Logf("the release closed the tunnel after %v", took.Round(time.Millisecond))
	poll.Until(t, 5*time.Second, "the node's connection closes", func() bool { return p.ended.Load() == 1 })
}

// TestGatewayKilledMidTransfer: when the gateway's process dies in the middle of a transfer (its
// connections reset, nothing said), the client's tunnel ends with an error, 4006, instead of
// hanging; the tunnel's row records it.
func TestGatewayKilledMidTransfer(t *testing.T) {
	t.Parallel()
	e := newEnv(t, true)
	p := listen(t, echo)
	n := e.startFake(fakeOptions{tunnelPorts: []int{p.port}})
	e.allow(n, p.port)
	conn := e.open(e.admin, n, p.port)

	// The client sends and reads as fast as it can until the tunnel ends.
	var echoed atomic.Int64
	readErr, writeErr := make(chan error, 1), make(chan error, 1)
	go func() {
		buf := make([]byte, tunnel.MaxPayload)
		for {
			if _, err := conn.Write(buf); err != nil {
				writeErr <- err
				return
			}
		}
	}()
	go func() {
		buf := make([]byte, tunnel.MaxPayload)
		for {
			k, err := conn.Read(buf)
			echoed.Add(int64(k))
			if err != nil {
				readErr <- err
				return
			}
		}
	}()
	poll.Until(t, 60*time.Second, "8 MiB are echoed", func() bool { return echoed.Load() > 8<<20 })
	killed := time.Now()
	e.killGateway()

	var err error
	select {
	case err = <-readErr:
	case <-time.After(15 * time.Second):
		t.Fatalf("the client's read did not end within 15s of the gateway's death (%d bytes echoed)", echoed.Load())
	}
	t.Logf("the tunnel ended %v after the gateway's death, %d MiB echoed: %v", time.Since(killed).Round(time.Millisecond), echoed.Load()>>20, err)
	var ae *client.TunnelAbortError
	if !errors.As(err, &ae) || ae.Code != tunnel.CodeGatewayLost {
		t.Errorf("the client's read ended with %v, want close code %d", err, tunnel.CodeGatewayLost)
	}
	select {
	case err := <-writeErr:
		if err == nil {
			t.Error("the write ended without an error")
		}
	case <-time.After(15 * time.Second):
		t.Fatal("the client's write did not end")
	}
	id := conn.Info().GetId()
	poll.Until(t, 60*time.Second, "the tunnel's end is recorded", func() bool { return e.row(id).closed })
	if r := e.row(id); r.code != int32(tunnel.CodeGatewayLost) {
		t.Errorf("the row records close code %d, want %d", r.code, tunnel.CodeGatewayLost)
	}
}

// TestManyTunnels: 200 tunnels to one node are open at once (the gateway and the daemon count
// them all), and each then echoes its own bytes and closes cleanly.
func TestManyTunnels(t *testing.T) {
	t.Parallel()
	const count = 200
	e := newEnv(t, false)
	p := listen(t, echo)
	n := e.startFake(fakeOptions{tunnelPorts: []int{p.port}})
	e.allow(n, p.port)

	var opened, done sync.WaitGroup
	release := make(chan struct{})
	errs := make(chan error, count)
	ids := make([]string, count)
	opened.Add(count)
	for i := range count {
		done.Go(func() {
			openedOnce := sync.OnceFunc(opened.Done)
			defer openedOnce()
			err := func() error {
				conn, err := e.admin.Tunnel(ctx, n.id, p.port)
				if err != nil {
					return err
				}
				defer conn.Close()
				ids[i] = conn.Info().GetId()
				msg := fmt.Sprintf("tunnel %d of %d", i, count)
				if _, err := io.WriteString(conn, msg); err != nil {
					return err
				}
				buf := make([]byte, len(msg))
				if _, err := io.ReadFull(conn, buf); err != nil || string(buf) != msg {
					return fmt.Errorf("echo %q: %q (%w)", msg, buf, err)
				}
				openedOnce()
				<-release
				x := transfer(conn, 64<<10, uint64(i))
				if x.err != nil || x.echoed != x.sent {
					return fmt.Errorf("after the first echo: %+v", x)
				}
				return conn.Close()
			}()
			if err != nil {
				errs <- fmt.Errorf("tunnel %d: %w", i, err)
			}
		})
	}
	opened.Wait()
	open := e.gw.Tunnels()
	daemonOpen := n.fake.Status().Tunnels
	close(release)
	done.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if t.Failed() {
		t.FailNow()
	}
	if open != count || daemonOpen != count {
		t.Errorf("with every tunnel open, the gateway relayed %d and the daemon held %d; want %d", open, daemonOpen, count)
	}
	poll.Until(t, 20*time.Second, "every tunnel's end is recorded", func() bool {
		var closed int
		err := e.Pool.QueryRow(ctx, `SELECT count(*) FROM tunnels WHERE id = ANY($1::uuid[]) AND close_code = $2`, ids, int32(tunnel.CodeNormal)).Scan(&closed)
		return err == nil && closed == count
	})
	if got := p.accepted.Load(); got != count {
		t.Errorf("the node's port accepted %d connections, want %d", got, count)
	}
}
