package nodes_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"github.com/better-compute/better-compute/gen/db"
	auditv1 "github.com/better-compute/better-compute/gen/go/bettercompute/audit/v1"
	daemonv1 "github.com/better-compute/better-compute/gen/go/bettercompute/daemon/v1"
	gpusv1 "github.com/better-compute/better-compute/gen/go/bettercompute/gpus/v1"
	iamv1 "github.com/better-compute/better-compute/gen/go/bettercompute/iam/v1"
	nodesv1 "github.com/better-compute/better-compute/gen/go/bettercompute/nodes/v1"
	"github.com/better-compute/better-compute/gen/go/bettercompute/nodes/v1/nodesv1connect"
	"github.com/better-compute/better-compute/internal/admission"
	"github.com/better-compute/better-compute/internal/auth"
	"github.com/better-compute/better-compute/internal/dbtest"
	"github.com/better-compute/better-compute/internal/guard"
	"github.com/better-compute/better-compute/internal/registry"
	"github.com/better-compute/better-compute/internal/requestid"
	"github.com/better-compute/better-compute/internal/seal"
	"github.com/better-compute/better-compute/server/internal/nodes"
	"github.com/better-compute/better-compute/server/servertest"
)

func TestMain(m *testing.M) { dbtest.Main(m) }

var ctx = context.Background()

func client(env *servertest.Env, key string) nodesv1connect.NodesServiceClient {
	return nodesv1connect.NewNodesServiceClient(env.HTTPClient(key), env.URL)
}

func wantCode(t *testing.T, err error, code connect.Code) {
	t.Helper()
	if connect.CodeOf(err) != code {
		t.Fatalf("error = %v, want code %v", err, code)
	}
}

func wantField(t *testing.T, err error, field string) {
	t.Helper()
	wantCode(t, err, connect.CodeInvalidArgument)
	var cerr *connect.Error
	if !errors.As(err, &cerr) || !strings.HasPrefix(cerr.Message(), field+": ") {
		t.Errorf("message %q does not name %s", err, field)
	}
}

func tenantOf(t testing.TB, env *servertest.Env, key string) uuid.UUID {
	t.Helper()
	who, err := env.IAM(key).WhoAmI(ctx, &iamv1.WhoAmIRequest{})
	if err != nil {
		t.Fatal(err)
	}
	return uuid.MustParse(who.GetTenant().GetId())
}

// insertNode creates a node as the gateway's Join does.
func insertNode(t *testing.T, pool *pgxpool.Pool, tenant uuid.UUID, hostname string, labels string) uuid.UUID {
	t.Helper()
	id := uuid.Must(uuid.NewV7())
	certExpiry := time.Now().Add(24 * time.Hour)
	if _, err := db.New(pool).CreateNode(ctx, db.CreateNodeParams{
		ID: id, TenantID: tenant, Hostname: hostname, Pool: "default", Labels: []byte(labels), CertNotAfter: &certExpiry,
	}); err != nil {
		t.Fatal(err)
	}
	return id
}

func ids(ns []*nodesv1.Node) []string {
	out := []string{}
	for _, n := range ns {
		out = append(out, n.GetHostname())
	}
	slices.Sort(out)
	return out
}

func TestListAndGet(t *testing.T) {
	t.Parallel()
	env := servertest.New(t)
	tenant := tenantOf(t, env, env.AdminKey)
	a := insertNode(t, env.Pool, tenant, "a", `{"gpu": "a100", "zone": "eu-1"}`)
	insertNode(t, env.Pool, tenant, "b", `{"gpu": "a100", "zone": "us-1"}`)
	insertNode(t, env.Pool, tenant, "c", `{"gpu": "h100", "zone": "eu-1"}`)
	insertNode(t, env.Pool, tenant, "d", `{}`)

	// Node a says hello through gateway gw-1.
	q := db.New(env.Pool)
	inv := &daemonv1.Inventory{
		Hostname: "a.example", Os: "linux", Kernel: "6.8", CpuModel: "EPYC", Cpus: 64, MemoryBytes: 512 << 30,
		Gpus: []*daemonv1.Gpu{{
			Index: 0, Model: "A100", MemoryBytes: 80 << 30, Uuid: "GPU-1", Serial: "1652922034521",
			PciBusId: "00000000:18:00.0", NumaNode: proto.Int32(1), VbiosVersion: "96.00.74.00.01", MigMode: "disabled",
			PowerLimitWatts: 700, PersistenceMode: true, MinorNumber: 3,
			Links:    []*daemonv1.GpuLink{{PeerIndex: 1, PeerUuid: "GPU-2", Path: "NV12", Nvlinks: 12}},
			NearNics: []string{"mlx5_0"},
		}},
		Disks:     []*daemonv1.Disk{{Name: "nvme0n1", SizeBytes: 4 << 40, Model: "PM9A3"}},
		Nics:      []*daemonv1.Nic{{Name: "eth0", Mac: "02:00:00:00:00:01", SpeedMbps: 100000}},
		GpuDriver: &daemonv1.GpuDriver{DriverVersion: "550.54.15", CudaVersion: "12.4", FabricManagerState: "Completed", FabricManagerStatus: "Success"},
	}
	invJSON, err := protojson.Marshal(inv)
	if err != nil {
		t.Fatal(err)
	}
	if err := q.NodeHello(ctx, db.NodeHelloParams{ID: a, DaemonVersion: "1.2.3", Inventory: invJSON}); err != nil {
		t.Fatal(err)
	}
	if err := q.UpsertGateway(ctx, db.UpsertGatewayParams{ID: "gw-1", Region: "eu"}); err != nil {
		t.Fatal(err)
	}
	if err := q.ClaimSession(ctx, db.ClaimSessionParams{NodeID: a, GatewayID: "gw-1", SessionID: "s-1", Transport: "h2"}); err != nil {
		t.Fatal(err)
	}

	c := client(env, env.AdminKey)
	all, err := c.List(ctx, &nodesv1.ListRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if got := ids(all.GetNodes()); !slices.Equal(got, []string{"a", "b", "c", "d"}) {
		t.Fatalf("listed %v", got)
	}
	for _, n := range all.GetNodes() {
		if n.GetInventory() != nil {
			t.Errorf("list returned the inventory of %s", n.GetHostname())
		}
		if n.GetTenantId() != tenant.String() || n.GetPool() != "default" || n.GetCertExpireTime() == nil || n.GetRevoked() {
			t.Errorf("listed %v", n)
		}
		if connected := n.GetHostname() == "a"; n.GetConnected() != connected || (n.GetGatewayId() == "gw-1") != connected ||
			(n.GetConnectTime() != nil) != connected {
			t.Errorf("node %s: connected %v gateway %q", n.GetHostname(), n.GetConnected(), n.GetGatewayId())
		}
	}

	for _, tc := range []struct {
		selector map[string]string
		want     []string
	}{
		{map[string]string{"gpu": "a100"}, []string{"a", "b"}},
		{map[string]string{"zone": "eu-1"}, []string{"a", "c"}},
		{map[string]string{"gpu": "a100", "zone": "eu-1"}, []string{"a"}},
		{map[string]string{"gpu": "v100"}, []string{}},
		{map[string]string{"gpu": ""}, []string{}},
	} {
		res, err := c.List(ctx, &nodesv1.ListRequest{LabelSelector: tc.selector})
		if err != nil {
			t.Fatal(err)
		}
		if got := ids(res.GetNodes()); !slices.Equal(got, tc.want) {
			t.Errorf("selector %v listed %v, want %v", tc.selector, got, tc.want)
		}
	}
	_, err = c.List(ctx, &nodesv1.ListRequest{LabelSelector: map[string]string{"bad key": "x"}})
	wantField(t, err, "label_selector")

	got, err := c.Get(ctx, &nodesv1.GetRequest{Id: a.String()})
	if err != nil {
		t.Fatal(err)
	}
	n := got.GetNode()
	if n.GetState() != "ready" || n.GetDaemonVersion() != "1.2.3" || !n.GetConnected() || n.GetGatewayId() != "gw-1" ||
		n.GetLabels()["zone"] != "eu-1" || n.GetLastSeenTime() == nil {
		t.Errorf("got %v", n)
	}
	i := n.GetInventory()
	if i.GetCpus() != 64 || i.GetMemoryBytes() != 512<<30 || i.GetOs() != "linux" || i.GetCpuModel() != "EPYC" ||
		len(i.GetGpus()) != 1 || i.GetGpus()[0].GetUuid() != "GPU-1" || i.GetGpus()[0].GetMemoryBytes() != 80<<30 ||
		len(i.GetDisks()) != 1 || i.GetDisks()[0].GetSizeBytes() != 4<<40 ||
		len(i.GetNics()) != 1 || i.GetNics()[0].GetSpeedMbps() != 100000 {
		t.Errorf("inventory %v", i)
	}
	// Every GPU field and the driver's reach the API, field for field.
	wantGPU := &nodesv1.Gpu{
		Index: 0, Model: "A100", MemoryBytes: 80 << 30, Uuid: "GPU-1", Serial: "1652922034521",
		PciBusId: "00000000:18:00.0", NumaNode: proto.Int32(1), VbiosVersion: "96.00.74.00.01", MigMode: "disabled",
		PowerLimitWatts: 700, PersistenceMode: true, MinorNumber: 3,
		Links:    []*nodesv1.GpuLink{{PeerIndex: 1, PeerUuid: "GPU-2", Path: "NV12", Nvlinks: 12}},
		NearNics: []string{"mlx5_0"},
		// With its health, from the device row the inventory made.
		Health: gpusv1.HealthState_HEALTH_STATE_HEALTHY,
	}
	if len(i.GetGpus()) != 1 || !proto.Equal(i.GetGpus()[0], wantGPU) {
		t.Errorf("GPUs %v, want [%v]", i.GetGpus(), wantGPU)
	}
	if d := i.GetGpuDriver(); d.GetDriverVersion() != "550.54.15" || d.GetCudaVersion() != "12.4" ||
		d.GetFabricManagerState() != "Completed" || d.GetFabricManagerStatus() != "Success" {
		t.Errorf("GPU driver %v", d)
	}

	// A node before its first hello has no inventory and is not connected.
	d, err := c.Get(ctx, &nodesv1.GetRequest{Id: all.GetNodes()[3].GetId()})
	if err != nil {
		t.Fatal(err)
	}
	if d.GetNode().GetInventory() != nil || d.GetNode().GetState() != "joining" || d.GetNode().GetConnected() {
		t.Errorf("new node %v", d.GetNode())
	}

	_, err = c.Get(ctx, &nodesv1.GetRequest{Id: "nope"})
	wantField(t, err, "id")
	_, err = c.Get(ctx, &nodesv1.GetRequest{Id: uuid.NewString()})
	wantCode(t, err, connect.CodeNotFound)
}

func TestPagination(t *testing.T) {
	t.Parallel()
	env := servertest.New(t)
	tenant := tenantOf(t, env, env.AdminKey)
	for i := range 7 {
		insertNode(t, env.Pool, tenant, fmt.Sprintf("n%d", i), `{"role": "worker"}`)
	}
	insertNode(t, env.Pool, tenant, "other", `{"role": "db"}`)
	c := client(env, env.AdminKey)
	seen := map[string]bool{}
	tok, pages := "", 0
	for {
		res, err := c.List(ctx, &nodesv1.ListRequest{PageSize: 3, PageToken: tok, LabelSelector: map[string]string{"role": "worker"}})
		if err != nil {
			t.Fatal(err)
		}
		pages++
		for _, n := range res.GetNodes() {
			if seen[n.GetId()] {
				t.Errorf("node %s on two pages", n.GetHostname())
			}
			seen[n.GetId()] = true
		}
		if tok = res.GetNextPageToken(); tok == "" {
			break
		}
	}
	if len(seen) != 7 || pages != 3 {
		t.Errorf("saw %d nodes on %d pages, want 7 on 3", len(seen), pages)
	}
	_, err := c.List(ctx, &nodesv1.ListRequest{PageSize: -1})
	wantField(t, err, "page_size")
}

func TestTenantIsolation(t *testing.T) {
	t.Parallel()
	env := servertest.New(t)
	other, err := env.IAM(env.AdminKey).CreateTenant(ctx, &iamv1.CreateTenantRequest{Name: "other"})
	if err != nil {
		t.Fatal(err)
	}
	mine := insertNode(t, env.Pool, tenantOf(t, env, env.AdminKey), "mine", `{"x": "y"}`)
	theirs := insertNode(t, env.Pool, uuid.MustParse(other.GetTenant().GetId()), "theirs", `{"x": "y"}`)

	c := client(env, other.GetOwnerApiKey())
	for _, sel := range []map[string]string{nil, {"x": "y"}} {
		res, err := c.List(ctx, &nodesv1.ListRequest{LabelSelector: sel})
		if err != nil {
			t.Fatal(err)
		}
		if got := ids(res.GetNodes()); !slices.Equal(got, []string{"theirs"}) {
			t.Errorf("other tenant lists %v", got)
		}
	}
	_, err = c.Get(ctx, &nodesv1.GetRequest{Id: mine.String()})
	wantCode(t, err, connect.CodeNotFound)
	_, err = c.Revoke(ctx, &nodesv1.RevokeRequest{Id: mine.String()})
	wantCode(t, err, connect.CodeNotFound)
	n, err := client(env, env.AdminKey).Get(ctx, &nodesv1.GetRequest{Id: mine.String()})
	if err != nil || n.GetNode().GetRevoked() {
		t.Errorf("after another tenant's revoke: %v %v", n.GetNode(), err)
	}
	_, err = client(env, env.AdminKey).Get(ctx, &nodesv1.GetRequest{Id: theirs.String()})
	wantCode(t, err, connect.CodeNotFound)
}

func TestRevoke(t *testing.T) {
	t.Parallel()
	env := servertest.New(t)
	tenant := tenantOf(t, env, env.AdminKey)
	id := insertNode(t, env.Pool, tenant, "a", `{}`)
	keep := insertNode(t, env.Pool, tenant, "b", `{}`)
	c := client(env, env.AdminKey)

	res, err := c.Revoke(ctx, &nodesv1.RevokeRequest{Id: id.String()})
	if err != nil {
		t.Fatal(err)
	}
	if !res.GetNode().GetRevoked() || res.GetNode().GetRevokeTime() == nil {
		t.Fatalf("revoked %v", res.GetNode())
	}
	again, err := c.Revoke(ctx, &nodesv1.RevokeRequest{Id: id.String()})
	if err != nil {
		t.Fatal(err)
	}
	if !again.GetNode().GetRevokeTime().AsTime().Equal(res.GetNode().GetRevokeTime().AsTime()) {
		t.Error("a second revoke moved the revoke time")
	}
	revoked, err := db.New(env.Pool).RevokedAmong(ctx, []uuid.UUID{id, keep})
	if err != nil || !slices.Equal(revoked, []uuid.UUID{id}) {
		t.Errorf("revoked among both: %v %v", revoked, err)
	}
	var events int
	if err := env.Pool.QueryRow(ctx, `SELECT count(*) FROM outbox WHERE type = 'node.revoked' AND subject = $1`, "node/"+id.String()).Scan(&events); err != nil || events != 1 {
		t.Errorf("%d node.revoked events (%v), want 1", events, err)
	}
	a, err := env.Audit(env.AdminKey).List(ctx, &auditv1.ListRequest{Method: "nodes/revoke"})
	if err != nil {
		t.Fatal(err)
	}
	if len(a.GetEvents()) != 2 || a.GetEvents()[0].GetTarget() != "node/"+id.String() || a.GetEvents()[0].GetOutcome() != "ok" {
		t.Errorf("audit rows %v", a.GetEvents())
	}

	_, err = c.Revoke(ctx, &nodesv1.RevokeRequest{Id: "x"})
	wantField(t, err, "id")
	_, err = c.Revoke(ctx, &nodesv1.RevokeRequest{Id: uuid.NewString()})
	wantCode(t, err, connect.CodeNotFound)
}

// recorder records notifications, and whether each node was revoked, as other connections see
// it, when notified.
type recorder struct {
	pool  *pgxpool.Pool
	mu    sync.Mutex
	calls [][]uuid.UUID
	seen  []bool
}

func (r *recorder) NodesRevoked(ctx context.Context, ids []uuid.UUID) {
	var committed bool
	err := r.pool.QueryRow(ctx, `SELECT bool_and(revoked_at IS NOT NULL) FROM nodes WHERE id = ANY($1)`, ids).Scan(&committed)
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls = append(r.calls, ids)
	r.seen = append(r.seen, err == nil && committed)
}

// notifyServer serves NodesService with a notifier, behind the real guard and admission, as
// server.New does (server.Options has no notifier to pass).
func notifyServer(t *testing.T, n nodes.RevocationNotifier) (nodesv1connect.NodesServiceClient, *pgxpool.Pool) {
	t.Helper()
	pool := dbtest.Pool(t)
	reg, err := registry.FromGlobal()
	if err != nil {
		t.Fatal(err)
	}
	sealer, err := seal.New(servertest.Secret, "idempotency")
	if err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.DiscardHandler)
	mux := http.NewServeMux()
	mux.Handle(nodesv1connect.NewNodesServiceHandler(nodes.New(pool, admission.New(pool, sealer, nil), n),
		connect.WithInterceptors(guard.New(reg, auth.NewEmbedded(pool, log), pool, log))))
	ts := httptest.NewServer(requestid.Middleware(mux))
	t.Cleanup(ts.Close)
	key, err := auth.MintAdminKey(ctx, pool, "admin")
	if err != nil {
		t.Fatal(err)
	}
	env := &servertest.Env{URL: ts.URL, Pool: pool, Server: ts}
	return nodesv1connect.NewNodesServiceClient(env.HTTPClient(key.String()), ts.URL), pool
}

func TestRevokeNotifiesGateways(t *testing.T) {
	t.Parallel()
	rec := &recorder{}
	c, pool := notifyServer(t, rec)
	rec.pool = pool
	root, err := auth.EnsureRootTenant(ctx, pool)
	if err != nil {
		t.Fatal(err)
	}
	id := insertNode(t, pool, root.ID, "a", `{}`)

	_, err = c.Revoke(ctx, &nodesv1.RevokeRequest{Id: uuid.NewString()})
	wantCode(t, err, connect.CodeNotFound)
	if len(rec.calls) != 0 {
		t.Fatalf("notified of a failed revoke: %v", rec.calls)
	}
	if _, err := c.Revoke(ctx, &nodesv1.RevokeRequest{Id: id.String()}); err != nil {
		t.Fatal(err)
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	if len(rec.calls) != 1 || !slices.Equal(rec.calls[0], []uuid.UUID{id}) {
		t.Fatalf("notified %v, want [[%s]]", rec.calls, id)
	}
	if !rec.seen[0] {
		t.Error("notified before the revocation committed")
	}
}
