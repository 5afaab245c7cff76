package remediations_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"connectrpc.com/connect"
	"github.com/google/uuid"

	gpusv1 "github.com/better-compute/better-compute/gen/go/bettercompute/gpus/v1"
	"github.com/better-compute/better-compute/gen/go/bettercompute/gpus/v1/gpusv1connect"
	iamv1 "github.com/better-compute/better-compute/gen/go/bettercompute/iam/v1"
	remediationsv1 "github.com/better-compute/better-compute/gen/go/bettercompute/remediations/v1"
	"github.com/better-compute/better-compute/gen/go/bettercompute/remediations/v1/remediationsv1connect"
	"github.com/better-compute/better-compute/internal/capacity/capacitytest"
	"github.com/better-compute/better-compute/internal/dbtest"
	"github.com/better-compute/better-compute/server/servertest"
)

func TestMain(m *testing.M) { dbtest.Main(m) }

var ctx = context.Background()

func client(env *servertest.Env, key string) remediationsv1connect.RemediationsServiceClient {
	return remediationsv1connect.NewRemediationsServiceClient(env.HTTPClient(key), env.URL)
}

// gpuUUID is the UUID capacitytest gives a node's GPU i.
func gpuUUID(node uuid.UUID, i int) string {
	return fmt.Sprintf("GPU-node-%s-%d", node.String()[24:], i)
}

func wantField(t *testing.T, err error, code connect.Code, field string) {
	t.Helper()
	if connect.CodeOf(err) != code || !strings.Contains(err.Error(), field+":") {
		t.Fatalf("error %v, want %v naming %s", err, code, field)
	}
}

func ids(rs []*remediationsv1.Remediation) []string {
	out := make([]string, len(rs))
	for i, r := range rs {
		out[i] = r.GetId()
	}
	return out
}

// TestCreateGetAndCancel: a remediation started by hand waits with the operator's reason and
// the default ladder; a second one of the node is refused; a cancel ends it, and a second cancel
// is refused.
func TestCreateGetAndCancel(t *testing.T) {
	t.Parallel()
	env := servertest.New(t)
	c := client(env, env.AdminKey)
	root := capacitytest.RootTenant(t, env.Pool)
	nodes := capacitytest.Nodes(t, env.Pool, root, 2, capacitytest.NodeSpec{GPUs: 2, Model: "H100"})

	res, err := c.Create(ctx, &remediationsv1.CreateRequest{NodeId: nodes[0].String(), GpuUuid: gpuUUID(nodes[0], 1), Reason: "NCCL timeouts"})
	if err != nil {
		t.Fatal(err)
	}
	r := res.GetRemediation()
	if r.GetState() != remediationsv1.State_STATE_WAITING || r.GetLadder() != "reset" || r.GetReason() != "manual: NCCL timeouts" ||
		r.GetGpuUuid() != gpuUUID(nodes[0], 1) || r.GetHostname() == "" || r.GetPrincipalId() == "" || r.GetEndTime() != nil ||
		len(r.GetSteps()) < 2 || r.GetSteps()[0].GetAction() != "drain" || r.GetPolicyVersion() == "" {
		t.Fatalf("created: %v", r)
	}
	_, err = c.Create(ctx, &remediationsv1.CreateRequest{NodeId: nodes[0].String(), Reason: "again"})
	wantField(t, err, connect.CodeFailedPrecondition, "node_id")

	node, err := c.Create(ctx, &remediationsv1.CreateRequest{NodeId: nodes[1].String(), Reason: "flaky host"})
	if err != nil || node.GetRemediation().GetLadder() != "reboot" || node.GetRemediation().GetGpuUuid() != "" {
		t.Fatalf("node remediation: %v (%v)", node.GetRemediation(), err)
	}

	got, err := c.Get(ctx, &remediationsv1.GetRequest{Id: r.GetId()})
	if err != nil || got.GetRemediation().GetId() != r.GetId() || got.GetRemediation().GetReason() != r.GetReason() {
		t.Fatalf("get: %v (%v)", got.GetRemediation(), err)
	}

	cancelled, err := c.Cancel(ctx, &remediationsv1.CancelRequest{Id: r.GetId()})
	if err != nil {
		t.Fatal(err)
	}
	cr := cancelled.GetRemediation()
	if cr.GetState() != remediationsv1.State_STATE_CANCELLED || cr.GetEndTime() == nil || len(cr.GetHistory()) != 1 || cr.GetHistory()[0].GetOutcome() != "cancelled" {
		t.Fatalf("cancelled: %v", cr)
	}
	var events int
	if err := env.Pool.QueryRow(ctx, `SELECT count(*) FROM outbox WHERE type = 'remediation.cancelled' AND subject = $1`, "remediation/"+r.GetId()).Scan(&events); err != nil || events != 1 {
		t.Fatalf("remediation.cancelled events: %d (%v)", events, err)
	}
	_, err = c.Cancel(ctx, &remediationsv1.CancelRequest{Id: r.GetId()})
	if connect.CodeOf(err) != connect.CodeFailedPrecondition {
		t.Fatalf("cancel of a cancelled remediation: %v", err)
	}
	// The node may have another now.
	if _, err := c.Create(ctx, &remediationsv1.CreateRequest{NodeId: nodes[0].String(), Reason: "again", Ladder: "service"}); err != nil {
		t.Fatal(err)
	}
}

// TestListFiltersAndPages: filters combine, pages walk the list once.
func TestListFiltersAndPages(t *testing.T) {
	t.Parallel()
	env := servertest.New(t)
	c := client(env, env.AdminKey)
	root := capacitytest.RootTenant(t, env.Pool)
	nodes := capacitytest.Nodes(t, env.Pool, root, 3, capacitytest.NodeSpec{GPUs: 2, Model: "H100"})
	var all []string
	for i, n := range nodes {
		req := &remediationsv1.CreateRequest{NodeId: n.String(), Reason: fmt.Sprintf("r%d", i)}
		if i == 1 {
			req.GpuUuid = gpuUUID(n, 0)
		}
		res, err := c.Create(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, res.GetRemediation().GetId())
	}
	if _, err := c.Cancel(ctx, &remediationsv1.CancelRequest{Id: all[2]}); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		req  *remediationsv1.ListRequest
		want []string
	}{
		{"all", &remediationsv1.ListRequest{}, all},
		{"waiting", &remediationsv1.ListRequest{State: remediationsv1.State_STATE_WAITING}, all[:2]},
		{"cancelled", &remediationsv1.ListRequest{State: remediationsv1.State_STATE_CANCELLED}, all[2:]},
		{"node", &remediationsv1.ListRequest{NodeId: nodes[1].String()}, all[1:2]},
		{"gpu", &remediationsv1.ListRequest{GpuUuid: gpuUUID(nodes[1], 0)}, all[1:2]},
		{"node and state", &remediationsv1.ListRequest{NodeId: nodes[2].String(), State: remediationsv1.State_STATE_WAITING}, nil},
	}
	for _, tc := range cases {
		res, err := c.List(ctx, tc.req)
		if err != nil {
			t.Errorf("%s: %v", tc.name, err)
			continue
		}
		if got := ids(res.GetRemediations()); !slices.Equal(got, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
	var paged []string
	req := &remediationsv1.ListRequest{PageSize: 2}
	for pages := 0; ; pages++ {
		if pages > 3 {
			t.Fatal("too many pages")
		}
		res, err := c.List(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		if len(res.GetRemediations()) > 2 {
			t.Fatalf("page of %d", len(res.GetRemediations()))
		}
		paged = append(paged, ids(res.GetRemediations())...)
		if res.GetNextPageToken() == "" {
			break
		}
		req.PageToken = res.GetNextPageToken()
	}
	if !slices.Equal(paged, all) {
		t.Fatalf("paged = %v, want %v", paged, all)
	}
}

// TestReturnFromService: a remediation in service is returned: its GPU healthy again, its node
// ready; one not in service is refused.
func TestReturnFromService(t *testing.T) {
	t.Parallel()
	env := servertest.New(t)
	c := client(env, env.AdminKey)
	root := capacitytest.RootTenant(t, env.Pool)
	node := capacitytest.Nodes(t, env.Pool, root, 1, capacitytest.NodeSpec{GPUs: 2, Model: "H100"})[0]
	gpu := gpuUUID(node, 1)
	gpus := gpusv1connect.NewGpusServiceClient(env.HTTPClient(env.AdminKey), env.URL)
	if _, err := gpus.Quarantine(ctx, &gpusv1.QuarantineRequest{Uuid: gpu, Reason: "Xid 79"}); err != nil {
		t.Fatal(err)
	}
	res, err := c.Create(ctx, &remediationsv1.CreateRequest{NodeId: node.String(), GpuUuid: gpu, Reason: "fell off the bus", Ladder: "service"})
	if err != nil {
		t.Fatal(err)
	}
	id := res.GetRemediation().GetId()
	_, err = c.ReturnFromService(ctx, &remediationsv1.ReturnFromServiceRequest{Id: id})
	if connect.CodeOf(err) != connect.CodeFailedPrecondition {
		t.Fatalf("return of a waiting remediation: %v", err)
	}
	// What the controller leaves after the service step: the remediation in service, the node
	// drained.
	if _, err := env.Pool.Exec(ctx, `UPDATE remediations SET state = 'service', step = 1, ended_at = now() WHERE id = $1`, id); err != nil {
		t.Fatal(err)
	}
	if _, err := env.Pool.Exec(ctx, `UPDATE nodes SET state = 'drained' WHERE id = $1`, node); err != nil {
		t.Fatal(err)
	}
	ret, err := c.ReturnFromService(ctx, &remediationsv1.ReturnFromServiceRequest{Id: id})
	if err != nil {
		t.Fatal(err)
	}
	if r := ret.GetRemediation(); r.GetState() != remediationsv1.State_STATE_RETURNED || r.GetEndTime() == nil ||
		len(r.GetHistory()) != 1 || r.GetHistory()[0].GetOutcome() != "returned" {
		t.Fatalf("returned: %v", r)
	}
	g, err := gpus.Get(ctx, &gpusv1.GetRequest{Uuid: gpu})
	if err != nil || g.GetGpu().GetHealth() != gpusv1.HealthState_HEALTH_STATE_HEALTHY || g.GetGpu().GetManualQuarantine() != nil {
		t.Fatalf("GPU after the return: %v (%v)", g.GetGpu(), err)
	}
	var state string
	var undrains int
	if err := env.Pool.QueryRow(ctx, `SELECT state, (SELECT count(*) FROM commands WHERE node_id = $1 AND type = 'undrain') FROM nodes WHERE id = $1`, node).Scan(&state, &undrains); err != nil {
		t.Fatal(err)
	}
	if state != "ready" || undrains != 1 {
		t.Fatalf("node %s with %d undrain commands, want ready and 1", state, undrains)
	}
	_, err = c.ReturnFromService(ctx, &remediationsv1.ReturnFromServiceRequest{Id: id})
	if connect.CodeOf(err) != connect.CodeFailedPrecondition {
		t.Fatalf("second return: %v", err)
	}
}

// TestOtherTenantAndBadRequests: another tenant sees none of the remediations, nor the nodes;
// bad input is refused naming the field; a viewer cannot operate.
func TestOtherTenantAndBadRequests(t *testing.T) {
	t.Parallel()
	env := servertest.New(t)
	c := client(env, env.AdminKey)
	root := capacitytest.RootTenant(t, env.Pool)
	node := capacitytest.Nodes(t, env.Pool, root, 1, capacitytest.NodeSpec{GPUs: 2, Model: "H100"})[0]
	res, err := c.Create(ctx, &remediationsv1.CreateRequest{NodeId: node.String(), Reason: "mine"})
	if err != nil {
		t.Fatal(err)
	}
	id := res.GetRemediation().GetId()

	tenant, err := env.IAM(env.AdminKey).CreateTenant(ctx, &iamv1.CreateTenantRequest{Name: "other"})
	if err != nil {
		t.Fatal(err)
	}
	other := client(env, tenant.GetOwnerApiKey())
	if _, err := other.Get(ctx, &remediationsv1.GetRequest{Id: id}); connect.CodeOf(err) != connect.CodeNotFound {
		t.Errorf("other tenant's get: %v", err)
	}
	if _, err := other.Cancel(ctx, &remediationsv1.CancelRequest{Id: id}); connect.CodeOf(err) != connect.CodeNotFound {
		t.Errorf("other tenant's cancel: %v", err)
	}
	if _, err := other.ReturnFromService(ctx, &remediationsv1.ReturnFromServiceRequest{Id: id}); connect.CodeOf(err) != connect.CodeNotFound {
		t.Errorf("other tenant's return: %v", err)
	}
	if _, err := other.Create(ctx, &remediationsv1.CreateRequest{NodeId: node.String(), Reason: "theirs"}); connect.CodeOf(err) != connect.CodeNotFound {
		t.Errorf("other tenant's create: %v", err)
	}
	if l, err := other.List(ctx, &remediationsv1.ListRequest{}); err != nil || len(l.GetRemediations()) != 0 {
		t.Errorf("other tenant's list: %v (%v)", l.GetRemediations(), err)
	}

	_, err = c.Create(ctx, &remediationsv1.CreateRequest{NodeId: "node-1", Reason: "x"})
	wantField(t, err, connect.CodeInvalidArgument, "node_id")
	_, err = c.Create(ctx, &remediationsv1.CreateRequest{NodeId: node.String()})
	wantField(t, err, connect.CodeInvalidArgument, "reason")
	_, err = c.Create(ctx, &remediationsv1.CreateRequest{NodeId: node.String(), Reason: strings.Repeat("é", 501)})
	wantField(t, err, connect.CodeInvalidArgument, "reason")
	_, err = c.Create(ctx, &remediationsv1.CreateRequest{NodeId: node.String(), Reason: "x", Ladder: "pray"})
	wantField(t, err, connect.CodeInvalidArgument, "ladder")
	_, err = c.Create(ctx, &remediationsv1.CreateRequest{NodeId: node.String(), Reason: "x", GpuUuid: "GPU with spaces"})
	wantField(t, err, connect.CodeInvalidArgument, "gpu_uuid")
	_, err = c.Create(ctx, &remediationsv1.CreateRequest{NodeId: node.String(), Reason: "x", GpuUuid: "GPU-elsewhere"})
	wantField(t, err, connect.CodeInvalidArgument, "gpu_uuid")
	_, err = c.Get(ctx, &remediationsv1.GetRequest{Id: "r-1"})
	wantField(t, err, connect.CodeInvalidArgument, "id")
	_, err = c.Cancel(ctx, &remediationsv1.CancelRequest{})
	wantField(t, err, connect.CodeInvalidArgument, "id")
	_, err = c.List(ctx, &remediationsv1.ListRequest{State: 42})
	wantField(t, err, connect.CodeInvalidArgument, "state")
	_, err = c.List(ctx, &remediationsv1.ListRequest{NodeId: "x", PageSize: -1})
	wantField(t, err, connect.CodeInvalidArgument, "node_id")
	if !strings.Contains(err.Error(), "page_size:") {
		t.Fatalf("error %v does not name page_size too", err)
	}
	_, err = c.List(ctx, &remediationsv1.ListRequest{PageToken: "not a token"})
	wantField(t, err, connect.CodeInvalidArgument, "page_token")
	if _, err := c.Get(ctx, &remediationsv1.GetRequest{Id: uuid.NewString()}); connect.CodeOf(err) != connect.CodeNotFound {
		t.Errorf("get of an unknown remediation: %v", err)
	}
}
