package gpus_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/google/uuid"

	gpusv1 "github.com/better-compute/better-compute/gen/go/bettercompute/gpus/v1"
	"github.com/better-compute/better-compute/gen/go/bettercompute/gpus/v1/gpusv1connect"
	iamv1 "github.com/better-compute/better-compute/gen/go/bettercompute/iam/v1"
	nodesv1 "github.com/better-compute/better-compute/gen/go/bettercompute/nodes/v1"
	"github.com/better-compute/better-compute/gen/go/bettercompute/nodes/v1/nodesv1connect"
	"github.com/better-compute/better-compute/internal/capacity/capacitytest"
	"github.com/better-compute/better-compute/internal/dbtest"
	"github.com/better-compute/better-compute/internal/gpuhealth"
	"github.com/better-compute/better-compute/server/servertest"
)

func TestMain(m *testing.M) { dbtest.Main(m) }

var ctx = context.Background()

const (
	unhealthy = gpusv1.HealthState_HEALTH_STATE_UNHEALTHY
	degraded  = gpusv1.HealthState_HEALTH_STATE_DEGRADED
	healthy   = gpusv1.HealthState_HEALTH_STATE_HEALTHY
)

func client(env *servertest.Env, key string) gpusv1connect.GpusServiceClient {
	return gpusv1connect.NewGpusServiceClient(env.HTTPClient(key), env.URL)
}

// gpuUUID is the UUID capacitytest gives a node's GPU i.
func gpuUUID(node uuid.UUID, i int) string {
	return fmt.Sprintf("GPU-node-%s-%d", node.String()[24:], i)
}

// setHealth sets a GPU's health and reasons as the health reconciler would.
func setHealth(t *testing.T, env *servertest.Env, gpu string, h gpuhealth.Health, reasons ...gpuhealth.Reason) {
	t.Helper()
	b, err := gpuhealth.EncodeReasons(reasons)
	if err != nil {
		t.Fatal(err)
	}
	tag, err := env.Pool.Exec(ctx, `UPDATE devices SET health = $2, health_reasons = $3, health_changed_at = now() WHERE uuid = $1`, gpu, h, b)
	if err != nil || tag.RowsAffected() == 0 {
		t.Fatalf("set health of %s: %v (%d rows)", gpu, err, tag.RowsAffected())
	}
}

func reason(check string, code int64, effect gpuhealth.Effect) gpuhealth.Reason {
	now := time.Now().UTC().Truncate(time.Second)
	return gpuhealth.Reason{Check: check, Code: code, Count: 1, FirstSeen: now, LastSeen: now, Effect: effect, Description: check}
}

// newTenant makes a child tenant of the root and returns its id and its owner's key.
func newTenant(t *testing.T, env *servertest.Env, name string) (uuid.UUID, string) {
	t.Helper()
	res, err := env.IAM(env.AdminKey).CreateTenant(ctx, &iamv1.CreateTenantRequest{Name: name})
	if err != nil {
		t.Fatal(err)
	}
	return uuid.MustParse(res.GetTenant().GetId()), res.GetOwnerApiKey()
}

// principal makes a service account of the root tenant with role (none when unspecified) and
// returns its key.
func principal(t *testing.T, env *servertest.Env, name string, role iamv1.Role) string {
	t.Helper()
	c := env.IAM(env.AdminKey)
	p, err := c.CreatePrincipal(ctx, &iamv1.CreatePrincipalRequest{Kind: iamv1.PrincipalKind_PRINCIPAL_KIND_SERVICE_ACCOUNT, Name: name})
	if err != nil {
		t.Fatal(err)
	}
	if role != iamv1.Role_ROLE_UNSPECIFIED {
		if _, err := c.CreateRoleBinding(ctx, &iamv1.CreateRoleBindingRequest{PrincipalId: p.GetPrincipal().GetId(), Role: role}); err != nil {
			t.Fatal(err)
		}
	}
	k, err := c.CreateApiKey(ctx, &iamv1.CreateApiKeyRequest{PrincipalId: p.GetPrincipal().GetId()})
	if err != nil {
		t.Fatal(err)
	}
	return k.GetKey()
}

func uuids(gs []*gpusv1.Gpu) []string {
	out := make([]string, len(gs))
	for i, g := range gs {
		out[i] = g.GetUuid()
	}
	return out
}

func wantField(t *testing.T, err error, code connect.Code, field string) {
	t.Helper()
	if connect.CodeOf(err) != code || !strings.Contains(err.Error(), ": "+field+":") {
		t.Fatalf("error %v, want %v naming %s", err, code, field)
	}
}

func TestListFiltersAndPages(t *testing.T) {
	t.Parallel()
	env := servertest.New(t)
	root := capacitytest.RootTenant(t, env.Pool)
	h100 := capacitytest.Nodes(t, env.Pool, root, 2, capacitytest.NodeSpec{GPUs: 2, Model: "H100", Labels: map[string]string{"pool": "a"}})
	a100 := capacitytest.Nodes(t, env.Pool, root, 1, capacitytest.NodeSpec{GPUs: 4, Model: "A100"})
	capacitytest.Pool(t, env.Pool, root, "a", map[string]string{"pool": "a"})
	setHealth(t, env, gpuUUID(h100[0], 1), gpuhealth.Unhealthy, reason(gpuhealth.CheckXid, 79, gpuhealth.EffectQuarantineGPU))
	setHealth(t, env, gpuUUID(a100[0], 2), gpuhealth.Degraded, reason(gpuhealth.CheckThermalSlowdown, 90, gpuhealth.EffectDegrade))
	if _, err := env.Pool.Exec(ctx, `UPDATE devices SET present = false WHERE uuid = $1`, gpuUUID(a100[0], 3)); err != nil {
		t.Fatal(err)
	}
	c := client(env, env.AdminKey)

	all, err := c.List(ctx, &gpusv1.ListRequest{})
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	for _, n := range h100 {
		want = append(want, gpuUUID(n, 0), gpuUUID(n, 1))
	}
	for i := range 4 {
		want = append(want, gpuUUID(a100[0], i))
	}
	if got := uuids(all.GetGpus()); !slices.Equal(got, want) || all.GetNextPageToken() != "" {
		t.Fatalf("list = %v (next %q), want %v in node and index order", got, all.GetNextPageToken(), want)
	}
	g := all.GetGpus()[1]
	if g.GetHealth() != unhealthy || len(g.GetReasons()) != 1 || g.GetReasons()[0].GetCode() != 79 ||
		g.GetReasons()[0].GetEffect() != string(gpuhealth.EffectQuarantineGPU) || g.GetHealthChangeTime() == nil ||
		g.GetNodeId() != h100[0].String() || g.GetHostname() == "" || g.GetModel() != "H100" || g.GetIndex() != 1 || !g.GetPresent() {
		t.Fatalf("unhealthy GPU: %v", g)
	}
	if all.GetGpus()[0].GetHealth() != healthy || len(all.GetGpus()[0].GetReasons()) != 0 {
		t.Fatalf("healthy GPU: %v", all.GetGpus()[0])
	}

	missing := false
	cases := []struct {
		name string
		req  *gpusv1.ListRequest
		want []string
	}{
		{"unhealthy", &gpusv1.ListRequest{Health: []gpusv1.HealthState{unhealthy}}, []string{gpuUUID(h100[0], 1)}},
		{"degraded or unhealthy", &gpusv1.ListRequest{Health: []gpusv1.HealthState{degraded, unhealthy}}, []string{gpuUUID(h100[0], 1), gpuUUID(a100[0], 2)}},
		{"model", &gpusv1.ListRequest{Model: "A100", Health: []gpusv1.HealthState{healthy}}, []string{gpuUUID(a100[0], 0), gpuUUID(a100[0], 1), gpuUUID(a100[0], 3)}},
		{"node", &gpusv1.ListRequest{NodeId: h100[1].String()}, []string{gpuUUID(h100[1], 0), gpuUUID(h100[1], 1)}},
		{"pool", &gpusv1.ListRequest{Pool: "a", Model: "H100", Health: []gpusv1.HealthState{unhealthy}}, []string{gpuUUID(h100[0], 1)}},
		{"no such pool", &gpusv1.ListRequest{Pool: "b"}, nil},
		{"missing", &gpusv1.ListRequest{Present: &missing}, []string{gpuUUID(a100[0], 3)}},
	}
	for _, tc := range cases {
		res, err := c.List(ctx, tc.req)
		if err != nil {
			t.Errorf("%s: %v", tc.name, err)
			continue
		}
		if got := uuids(res.GetGpus()); !slices.Equal(got, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}

	// Pages of 3 walk the same list, each GPU once.
	var paged []string
	req := &gpusv1.ListRequest{PageSize: 3}
	for pages := 0; ; pages++ {
		if pages > 4 {
			t.Fatal("too many pages")
		}
		res, err := c.List(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		if len(res.GetGpus()) > 3 {
			t.Fatalf("page of %d", len(res.GetGpus()))
		}
		paged = append(paged, uuids(res.GetGpus())...)
		if res.GetNextPageToken() == "" {
			break
		}
		req.PageToken = res.GetNextPageToken()
	}
	if !slices.Equal(paged, want) {
		t.Fatalf("paged = %v, want %v", paged, want)
	}
}

func TestBadRequests(t *testing.T) {
	t.Parallel()
	env := servertest.New(t)
	c := client(env, env.AdminKey)
	_, err := c.List(ctx, &gpusv1.ListRequest{Health: []gpusv1.HealthState{healthy, gpusv1.HealthState_HEALTH_STATE_UNSPECIFIED}})
	wantField(t, err, connect.CodeInvalidArgument, "health[1]")
	_, err = c.List(ctx, &gpusv1.ListRequest{Health: []gpusv1.HealthState{42}})
	wantField(t, err, connect.CodeInvalidArgument, "health[0]")
	_, err = c.List(ctx, &gpusv1.ListRequest{NodeId: "node-1"})
	wantField(t, err, connect.CodeInvalidArgument, "node_id")
	_, err = c.List(ctx, &gpusv1.ListRequest{PageToken: "not a token"})
	wantField(t, err, connect.CodeInvalidArgument, "page_token")
	_, err = c.List(ctx, &gpusv1.ListRequest{PageSize: -1})
	wantField(t, err, connect.CodeInvalidArgument, "page_size")
	_, err = c.List(ctx, &gpusv1.ListRequest{Model: strings.Repeat("m", 257)})
	wantField(t, err, connect.CodeInvalidArgument, "model")
	_, err = c.List(ctx, &gpusv1.ListRequest{Pool: strings.Repeat("p", 64)})
	wantField(t, err, connect.CodeInvalidArgument, "pool")
	_, err = c.Summary(ctx, &gpusv1.SummaryRequest{Pool: strings.Repeat("p", 64)})
	wantField(t, err, connect.CodeInvalidArgument, "pool")
	for _, bad := range []string{"", "GPU with spaces", strings.Repeat("x", 129)} {
		_, err = c.Get(ctx, &gpusv1.GetRequest{Uuid: bad})
		wantField(t, err, connect.CodeInvalidArgument, "uuid")
	}
	_, err = c.Get(ctx, &gpusv1.GetRequest{Uuid: "GPU-1", HistorySize: -1})
	wantField(t, err, connect.CodeInvalidArgument, "history_size")
	_, err = c.Get(ctx, &gpusv1.GetRequest{Uuid: "GPU-nowhere"})
	if connect.CodeOf(err) != connect.CodeNotFound {
		t.Fatalf("get of an unknown GPU: %v", err)
	}
	// Both bad fields at once.
	_, err = c.List(ctx, &gpusv1.ListRequest{NodeId: "x", PageSize: -1})
	wantField(t, err, connect.CodeInvalidArgument, "node_id")
	if !strings.Contains(err.Error(), "page_size:") {
		t.Fatalf("error %v does not name page_size too", err)
	}
	_, err = c.Quarantine(ctx, &gpusv1.QuarantineRequest{Uuid: "GPU-1"})
	wantField(t, err, connect.CodeInvalidArgument, "reason")
	_, err = c.Quarantine(ctx, &gpusv1.QuarantineRequest{Uuid: "GPU-1", Reason: strings.Repeat("é", 501)})
	wantField(t, err, connect.CodeInvalidArgument, "reason")
	_, err = c.Clear(ctx, &gpusv1.ClearRequest{})
	wantField(t, err, connect.CodeInvalidArgument, "uuid")

	// Another tenant's GPU, or none, is not found.
	if _, err := c.Quarantine(ctx, &gpusv1.QuarantineRequest{Uuid: "GPU-1", Reason: "fans"}); connect.CodeOf(err) != connect.CodeNotFound {
		t.Errorf("quarantine of an unknown GPU: %v", err)
	}
	if _, err := c.Clear(ctx, &gpusv1.ClearRequest{Uuid: "GPU-1"}); connect.CodeOf(err) != connect.CodeNotFound {
		t.Errorf("clear of an unknown GPU: %v", err)
	}
}

// TestQuarantineAndClear: an operator's quarantine makes a GPU unhealthy at once, with the
// reason "manual", its history and events; a second quarantine changes nothing; a clear makes it
// healthy again.
func TestQuarantineAndClear(t *testing.T) {
	t.Parallel()
	env := servertest.New(t)
	c := gpusv1connect.NewGpusServiceClient(env.HTTPClient(env.AdminKey), env.URL)
	root := capacitytest.RootTenant(t, env.Pool)
	gpu := gpuUUID(capacitytest.Nodes(t, env.Pool, root, 1, capacitytest.NodeSpec{GPUs: 2, Model: "H100"})[0], 1)

	q, err := c.Quarantine(ctx, &gpusv1.QuarantineRequest{Uuid: gpu, Reason: "fans failing"})
	if err != nil {
		t.Fatal(err)
	}
	g := q.GetGpu()
	if g.GetHealth() != gpusv1.HealthState_HEALTH_STATE_UNHEALTHY || len(g.GetReasons()) != 1 || g.GetReasons()[0].GetCheck() != gpuhealth.CheckManual ||
		g.GetReasons()[0].GetDetail() != "fans failing" || g.GetManualQuarantine().GetReason() != "fans failing" || g.GetManualQuarantine().GetPrincipalId() == "" {
		t.Fatalf("quarantined: %v", g)
	}
	again, err := c.Quarantine(ctx, &gpusv1.QuarantineRequest{Uuid: gpu, Reason: "something else"})
	if err != nil || again.GetGpu().GetManualQuarantine().GetReason() != "fans failing" {
		t.Fatalf("second quarantine: %v (%v)", again.GetGpu(), err)
	}
	cl, err := c.Clear(ctx, &gpusv1.ClearRequest{Uuid: gpu})
	if err != nil {
		t.Fatal(err)
	}
	if g := cl.GetGpu(); g.GetHealth() != gpusv1.HealthState_HEALTH_STATE_HEALTHY || len(g.GetReasons()) != 0 || g.GetManualQuarantine() != nil || g.GetClearTime() == nil {
		t.Fatalf("cleared: %v", g)
	}
	res, err := c.Get(ctx, &gpusv1.GetRequest{Uuid: gpu})
	if err != nil {
		t.Fatal(err)
	}
	if h := res.GetHistory(); len(h) != 2 || h[0].GetTo() != gpusv1.HealthState_HEALTH_STATE_HEALTHY || h[1].GetTo() != gpusv1.HealthState_HEALTH_STATE_UNHEALTHY || h[1].GetPrincipalId() == "" {
		t.Fatalf("history %v", h)
	}
	var events int
	if err := env.Pool.QueryRow(ctx, `SELECT count(*) FROM outbox WHERE subject = $1 AND type IN ('gpu.unhealthy', 'gpu.healthy')`, "gpu/"+gpu).Scan(&events); err != nil || events != 2 {
		t.Fatalf("%d gpu events (%v), want 2", events, err)
	}
	var audited int
	if err := env.Pool.QueryRow(ctx, `SELECT count(*) FROM audit_events WHERE target = $1`, "gpu/"+gpu).Scan(&audited); err != nil || audited != 3 {
		t.Fatalf("%d audit rows (%v), want 3", audited, err)
	}
}

func TestTenantIsolation(t *testing.T) {
	t.Parallel()
	env := servertest.New(t)
	root := capacitytest.RootTenant(t, env.Pool)
	ours := capacitytest.Nodes(t, env.Pool, root, 1, capacitytest.NodeSpec{GPUs: 1, Model: "H100"})
	acme, acmeKey := newTenant(t, env, "acme")
	theirs := capacitytest.Nodes(t, env.Pool, acme, 1, capacitytest.NodeSpec{GPUs: 1, Model: "H100"})
	setHealth(t, env, gpuUUID(theirs[0], 0), gpuhealth.Unhealthy, reason(gpuhealth.CheckGPUMissing, 0, gpuhealth.EffectQuarantineGPU))
	if _, err := env.Pool.Exec(ctx, `INSERT INTO node_gpu_health (node_id, quarantined, probe_error) VALUES ($1, true, 'timeout')`, theirs[0]); err != nil {
		t.Fatal(err)
	}
	// The same UUID on a node of each tenant (a GPU moved between tenants' machines).
	if _, err := env.Pool.Exec(ctx, `UPDATE devices SET uuid = 'GPU-moved' WHERE node_id = ANY($1::uuid[])`, []uuid.UUID{ours[0], theirs[0]}); err != nil {
		t.Fatal(err)
	}

	c := client(env, env.AdminKey)
	list, err := c.List(ctx, &gpusv1.ListRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if len(list.GetGpus()) != 1 || list.GetGpus()[0].GetNodeId() != ours[0].String() {
		t.Fatalf("root lists %v, want its one GPU", list.GetGpus())
	}
	if res, err := c.List(ctx, &gpusv1.ListRequest{NodeId: theirs[0].String()}); err != nil || len(res.GetGpus()) != 0 {
		t.Fatalf("root lists acme's node's GPUs: %v, %v", res.GetGpus(), err)
	}
	got, err := c.Get(ctx, &gpusv1.GetRequest{Uuid: "GPU-moved"})
	if err != nil || got.GetGpu().GetNodeId() != ours[0].String() || got.GetGpu().GetHealth() != healthy {
		t.Fatalf("root gets %v (%v), want its own healthy GPU", got.GetGpu(), err)
	}
	sum, err := c.Summary(ctx, &gpusv1.SummaryRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if len(sum.GetStates()) != 1 || sum.GetStates()[0].GetHealth() != healthy || len(sum.GetReasons()) != 0 ||
		sum.GetQuarantinedNodes() != 0 || sum.GetNodesDriverNotAnswering() != 0 {
		t.Fatalf("root's summary counts acme's: %v", sum)
	}

	// Acme sees its own, and not root's.
	a := client(env, acmeKey)
	got, err = a.Get(ctx, &gpusv1.GetRequest{Uuid: "GPU-moved"})
	if err != nil || got.GetGpu().GetNodeId() != theirs[0].String() || got.GetGpu().GetHealth() != unhealthy {
		t.Fatalf("acme gets %v (%v), want its unhealthy GPU", got.GetGpu(), err)
	}
	if _, err := env.Pool.Exec(ctx, `UPDATE devices SET uuid = 'GPU-ours' WHERE node_id = $1`, ours[0]); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Get(ctx, &gpusv1.GetRequest{Uuid: "GPU-ours"}); connect.CodeOf(err) != connect.CodeNotFound {
		t.Fatalf("acme gets root's GPU: %v", err)
	}
	sum, err = a.Summary(ctx, &gpusv1.SummaryRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if sum.GetQuarantinedNodes() != 1 || sum.GetNodesDriverNotAnswering() != 1 || len(sum.GetReasons()) != 1 {
		t.Fatalf("acme's summary: %v", sum)
	}
}

func TestGetHistoryAndLease(t *testing.T) {
	t.Parallel()
	env := servertest.New(t)
	root := capacitytest.RootTenant(t, env.Pool)
	nodes := capacitytest.Nodes(t, env.Pool, root, 2, capacitytest.NodeSpec{GPUs: 1, Model: "H100", CPUs: 8, MemoryBytes: 1 << 30})
	gpu := gpuUUID(nodes[0], 0)
	var device int64
	if err := env.Pool.QueryRow(ctx, `SELECT id FROM devices WHERE uuid = $1`, gpu).Scan(&device); err != nil {
		t.Fatal(err)
	}
	// Three changes, oldest first, the last by an operator.
	operator := uuid.Must(uuid.NewV7())
	steps := []struct {
		from, to  gpuhealth.Health
		principal *uuid.UUID
	}{
		{gpuhealth.Healthy, gpuhealth.Degraded, nil},
		{gpuhealth.Degraded, gpuhealth.Unhealthy, nil},
		{gpuhealth.Unhealthy, gpuhealth.Healthy, &operator},
	}
	for i, s := range steps {
		reasons, _ := gpuhealth.EncodeReasons([]gpuhealth.Reason{reason(gpuhealth.CheckXid, int64(i), gpuhealth.EffectDegrade)})
		if _, err := env.Pool.Exec(ctx, `
			INSERT INTO gpu_health_changes (tenant_id, device_id, at, from_health, to_health, reasons, principal_id)
			VALUES ($1, $2, now() - make_interval(mins => $3), $4, $5, $6, $7)`,
			root, device, 10-i, s.from, s.to, reasons, s.principal); err != nil {
			t.Fatal(err)
		}
	}
	// The GPU moved to the second node, where it is now; its old row is missing.
	if _, err := env.Pool.Exec(ctx, `UPDATE devices SET present = false WHERE id = $1`, device); err != nil {
		t.Fatal(err)
	}
	if _, err := env.Pool.Exec(ctx, `UPDATE devices SET uuid = $1 WHERE node_id = $2`, gpu, nodes[1]); err != nil {
		t.Fatal(err)
	}
	poolID := capacitytest.Pool(t, env.Pool, root, "p", nil, nodes...)
	lease := capacitytest.Leases(t, env.Pool, root, poolID, 1, capacitytest.LeaseSpec{GPUs: 1, Model: "H100"})[0]
	capacitytest.PlaceOn(t, env.Pool, lease, nodes[1])

	c := client(env, env.AdminKey)
	got, err := c.Get(ctx, &gpusv1.GetRequest{Uuid: gpu})
	if err != nil {
		t.Fatal(err)
	}
	if got.GetGpu().GetNodeId() != nodes[1].String() || !got.GetGpu().GetPresent() || got.GetGpu().GetLeaseId() != lease.String() {
		t.Fatalf("get = %v, want the present GPU on the second node, held by lease %s", got.GetGpu(), lease)
	}
	if len(got.GetHistory()) != 0 {
		t.Fatalf("the moved GPU's row has history %v", got.GetHistory())
	}
	// The old row, with its history, once it is the only one.
	if _, err := env.Pool.Exec(ctx, `UPDATE devices SET uuid = 'GPU-other' WHERE node_id = $1`, nodes[1]); err != nil {
		t.Fatal(err)
	}
	got, err = c.Get(ctx, &gpusv1.GetRequest{Uuid: gpu})
	if err != nil {
		t.Fatal(err)
	}
	h := got.GetHistory()
	if got.GetGpu().GetPresent() || got.GetGpu().GetLeaseId() != "" || len(h) != 3 {
		t.Fatalf("get = %v with %d history entries", got.GetGpu(), len(h))
	}
	if h[0].GetTo() != healthy || h[0].GetFrom() != unhealthy || h[0].GetPrincipalId() != operator.String() ||
		h[2].GetTo() != degraded || h[2].GetPrincipalId() != "" || h[2].GetReasons()[0].GetCode() != 0 ||
		!h[0].GetTime().AsTime().After(h[1].GetTime().AsTime()) || !h[1].GetTime().AsTime().After(h[2].GetTime().AsTime()) {
		t.Fatalf("history not newest first: %v", h)
	}
	got, err = c.Get(ctx, &gpusv1.GetRequest{Uuid: gpu, HistorySize: 2})
	if err != nil || len(got.GetHistory()) != 2 || got.GetHistory()[0].GetTo() != healthy {
		t.Fatalf("history of 2: %v, %v", got.GetHistory(), err)
	}
}

func TestSummary(t *testing.T) {
	t.Parallel()
	env := servertest.New(t)
	root := capacitytest.RootTenant(t, env.Pool)
	h100 := capacitytest.Nodes(t, env.Pool, root, 2, capacitytest.NodeSpec{GPUs: 2, Model: "H100", Labels: map[string]string{"pool": "a"}})
	a100 := capacitytest.Nodes(t, env.Pool, root, 1, capacitytest.NodeSpec{GPUs: 2, Model: "A100"})
	capacitytest.Pool(t, env.Pool, root, "a", map[string]string{"pool": "a"})
	xid79 := reason(gpuhealth.CheckXid, 79, gpuhealth.EffectQuarantineGPU)
	setHealth(t, env, gpuUUID(h100[0], 0), gpuhealth.Unhealthy, xid79)
	setHealth(t, env, gpuUUID(h100[1], 0), gpuhealth.Unhealthy, xid79, reason(gpuhealth.CheckECCDoubleBit, 0, gpuhealth.EffectQuarantineGPU))
	setHealth(t, env, gpuUUID(a100[0], 1), gpuhealth.Degraded, reason(gpuhealth.CheckThermalSlowdown, 0, gpuhealth.EffectDegrade))
	if _, err := env.Pool.Exec(ctx, `
		INSERT INTO node_gpu_health (node_id, quarantined, probe_error)
		VALUES ($1, true, ''), ($2, false, 'nvidia-smi timed out'), ($3, false, '')`, h100[0], a100[0], h100[1]); err != nil {
		t.Fatal(err)
	}
	c := client(env, env.AdminKey)
	sum, err := c.Summary(ctx, &gpusv1.SummaryRequest{})
	if err != nil {
		t.Fatal(err)
	}
	states := map[string]int64{}
	for _, s := range sum.GetStates() {
		states[s.GetModel()+"/"+s.GetHealth().String()] = s.GetGpus()
	}
	want := map[string]int64{
		"A100/" + healthy.String(): 1, "A100/" + degraded.String(): 1,
		"H100/" + healthy.String(): 2, "H100/" + unhealthy.String(): 2,
	}
	if fmt.Sprint(states) != fmt.Sprint(want) {
		t.Fatalf("states %v, want %v", states, want)
	}
	reasons := map[string]int64{}
	for _, r := range sum.GetReasons() {
		reasons[fmt.Sprintf("%s/%d/%s", r.GetCheck(), r.GetCode(), r.GetEffect())] = r.GetGpus()
	}
	wantReasons := map[string]int64{"xid/79/quarantine_gpu": 2, "ecc_dbe/0/quarantine_gpu": 1, "thermal_slowdown/0/degrade": 1}
	if fmt.Sprint(reasons) != fmt.Sprint(wantReasons) {
		t.Fatalf("reasons %v, want %v", reasons, wantReasons)
	}
	if sum.GetQuarantinedNodes() != 1 || sum.GetNodesDriverNotAnswering() != 1 {
		t.Fatalf("nodes: %d quarantined, %d driver not answering", sum.GetQuarantinedNodes(), sum.GetNodesDriverNotAnswering())
	}
	// The pool narrows it to the H100 nodes.
	sum, err = c.Summary(ctx, &gpusv1.SummaryRequest{Pool: "a"})
	if err != nil {
		t.Fatal(err)
	}
	if len(sum.GetStates()) != 2 || len(sum.GetReasons()) != 2 || sum.GetQuarantinedNodes() != 1 || sum.GetNodesDriverNotAnswering() != 0 {
		t.Fatalf("pool a's summary: %v", sum)
	}
}

func TestPermissions(t *testing.T) {
	t.Parallel()
	env := servertest.New(t)
	root := capacitytest.RootTenant(t, env.Pool)
	nodes := capacitytest.Nodes(t, env.Pool, root, 1, capacitytest.NodeSpec{GPUs: 1, Model: "H100"})
	viewer := client(env, principal(t, env, "viewer", iamv1.Role_ROLE_VIEWER))
	if res, err := viewer.List(ctx, &gpusv1.ListRequest{}); err != nil || len(res.GetGpus()) != 1 {
		t.Fatalf("viewer lists %v, %v", res.GetGpus(), err)
	}
	if _, err := viewer.Get(ctx, &gpusv1.GetRequest{Uuid: gpuUUID(nodes[0], 0)}); err != nil {
		t.Fatalf("viewer gets: %v", err)
	}
	if _, err := viewer.Summary(ctx, &gpusv1.SummaryRequest{}); err != nil {
		t.Fatalf("viewer summarises: %v", err)
	}
	// Changing health takes gpus.operate, which a viewer does not hold.
	if _, err := viewer.Clear(ctx, &gpusv1.ClearRequest{Uuid: gpuUUID(nodes[0], 0)}); connect.CodeOf(err) != connect.CodePermissionDenied {
		t.Fatalf("viewer clears: %v", err)
	}
	nobody := client(env, principal(t, env, "nobody", iamv1.Role_ROLE_UNSPECIFIED))
	if _, err := nobody.List(ctx, &gpusv1.ListRequest{}); connect.CodeOf(err) != connect.CodePermissionDenied {
		t.Fatalf("a principal without roles lists: %v", err)
	}
}

// TestNodesShowGPUHealth checks nodes/get and nodes/list: the health of each inventory GPU and
// the node's unhealthy GPUs and quarantine.
func TestNodesShowGPUHealth(t *testing.T) {
	t.Parallel()
	env := servertest.New(t)
	root := capacitytest.RootTenant(t, env.Pool)
	ids := capacitytest.Nodes(t, env.Pool, root, 2, capacitytest.NodeSpec{GPUs: 3, Model: "H100"})
	setHealth(t, env, gpuUUID(ids[0], 1), gpuhealth.Unhealthy, reason(gpuhealth.CheckXid, 48, gpuhealth.EffectQuarantineGPU))
	setHealth(t, env, gpuUUID(ids[0], 2), gpuhealth.Degraded, reason(gpuhealth.CheckPCIeReplays, 0, gpuhealth.EffectDegrade))
	if _, err := env.Pool.Exec(ctx, `INSERT INTO node_gpu_health (node_id, quarantined) VALUES ($1, true)`, ids[0]); err != nil {
		t.Fatal(err)
	}
	c := nodesv1connect.NewNodesServiceClient(env.HTTPClient(env.AdminKey), env.URL)
	got, err := c.Get(ctx, &nodesv1.GetRequest{Id: ids[0].String()})
	if err != nil {
		t.Fatal(err)
	}
	n := got.GetNode()
	gs := n.GetInventory().GetGpus()
	if n.GetUnhealthyGpus() != 1 || !n.GetGpuQuarantined() || len(gs) != 3 ||
		gs[0].GetHealth() != healthy || gs[1].GetHealth() != unhealthy || gs[2].GetHealth() != degraded ||
		len(gs[1].GetHealthReasons()) != 1 || gs[1].GetHealthReasons()[0].GetCode() != 48 || len(gs[0].GetHealthReasons()) != 0 {
		t.Fatalf("nodes/get: %v", n)
	}
	for _, inv := range []bool{false, true} {
		list, err := c.List(ctx, &nodesv1.ListRequest{IncludeInventory: inv})
		if err != nil {
			t.Fatal(err)
		}
		byID := map[string]*nodesv1.Node{}
		for _, n := range list.GetNodes() {
			byID[n.GetId()] = n
		}
		sick, well := byID[ids[0].String()], byID[ids[1].String()]
		if sick.GetUnhealthyGpus() != 1 || !sick.GetGpuQuarantined() || well.GetUnhealthyGpus() != 0 || well.GetGpuQuarantined() {
			t.Fatalf("nodes/list (inventory %v): %v", inv, list.GetNodes())
		}
		if inv && (sick.GetInventory().GetGpus()[1].GetHealth() != unhealthy || well.GetInventory().GetGpus()[1].GetHealth() != healthy) {
			t.Fatalf("nodes/list with inventory: %v", list.GetNodes())
		}
	}
}
