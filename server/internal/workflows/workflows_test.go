package workflows_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/google/uuid"
	"google.golang.org/protobuf/types/known/durationpb"

	iamv1 "github.com/better-compute/better-compute/gen/go/bettercompute/iam/v1"
	workflowsv1 "github.com/better-compute/better-compute/gen/go/bettercompute/workflows/v1"
	"github.com/better-compute/better-compute/gen/go/bettercompute/workflows/v1/workflowsv1connect"
	"github.com/better-compute/better-compute/internal/capacity/capacitytest"
	"github.com/better-compute/better-compute/internal/dbtest"
	"github.com/better-compute/better-compute/server/servertest"
)

func TestMain(m *testing.M) { dbtest.Main(m) }

var ctx = context.Background()

func client(env *servertest.Env, key string) workflowsv1connect.WorkflowsServiceClient {
	return workflowsv1connect.NewWorkflowsServiceClient(env.HTTPClient(key), env.URL)
}

func upgrade(v string) *workflowsv1.Action {
	return &workflowsv1.Action{Kind: &workflowsv1.Action_Upgrade{Upgrade: &workflowsv1.UpgradeAction{Version: v}}}
}

func ids(us []uuid.UUID) []string {
	out := make([]string, len(us))
	for i, u := range us {
		out[i] = u.String()
	}
	return out
}

func wantCode(t *testing.T, err error, code connect.Code, field string) {
	t.Helper()
	var cerr *connect.Error
	if !errors.As(err, &cerr) || cerr.Code() != code {
		t.Fatalf("error %v, want %s", err, code)
	}
	if field != "" && !strings.HasPrefix(cerr.Message(), field+": ") {
		t.Errorf("message %q does not name %s", cerr.Message(), field)
	}
}

func TestCreateAndSteer(t *testing.T) {
	t.Parallel()
	env := servertest.New(t)
	root := capacitytest.RootTenant(t, env.Pool)
	nodes := capacitytest.Nodes(t, env.Pool, root, 3, capacitytest.NodeSpec{CPUs: 4, Labels: map[string]string{"rack": "a"}})
	c := client(env, env.AdminKey)

	res, err := c.Create(ctx, &workflowsv1.CreateRequest{
		Name: "rack a to v2", Action: upgrade("v2.0.0"),
		Target: &workflowsv1.Target{LabelSelector: map[string]string{"rack": "a"}},
		Policy: &workflowsv1.Policy{MaxParallel: 2, MinHealthy: durationpb.New(30 * time.Second)}, Paused: true,
	})
	if err != nil {
		t.Fatal(err)
	}
	w := res.GetWorkflow()
	if w.GetState() != "paused" || w.GetCounts().GetTotal() != 3 || w.GetCounts().GetPending() != 3 || w.GetOrigin() != "api" ||
		w.GetPolicy().GetMaxParallel() != 2 || w.GetPolicy().GetDrainDeadline().AsDuration() != time.Hour ||
		w.GetPolicy().GetStepTimeout().AsDuration() != 15*time.Minute || w.GetAction().GetUpgrade().GetVersion() != "v2.0.0" {
		t.Fatalf("created %v", w)
	}
	got, err := c.Get(ctx, &workflowsv1.GetRequest{Id: w.GetId()})
	if err != nil {
		t.Fatal(err)
	}
	if len(got.GetNodes()) != 3 || got.GetNodes()[0].GetNodeId() != nodes[0].String() || got.GetNodes()[2].GetPosition() != 2 ||
		got.GetNodes()[0].GetStep() != "pending" || got.GetNodes()[0].GetAttempt() != 1 {
		t.Fatalf("nodes %v", got.GetNodes())
	}

	// A node is in one unfinished workflow at a time.
	_, err = c.Create(ctx, &workflowsv1.CreateRequest{Action: upgrade("v3.0.0"), Target: &workflowsv1.Target{NodeIds: ids(nodes[1:2])}})
	wantCode(t, err, connect.CodeFailedPrecondition, "target")

	// Pause, resume, cancel; a finished workflow can only be cancelled again.
	r, err := c.Resume(ctx, &workflowsv1.ResumeRequest{Id: w.GetId(), MaxFailures: new(int32(2))})
	if err != nil || r.GetWorkflow().GetState() != "running" || r.GetWorkflow().GetPolicy().GetMaxFailures() != 2 {
		t.Fatalf("resume: %v %v", r.GetWorkflow(), err)
	}
	p, err := c.Pause(ctx, &workflowsv1.PauseRequest{Id: w.GetId(), Reason: "looking"})
	if err != nil || p.GetWorkflow().GetState() != "paused" || p.GetWorkflow().GetReason() != "looking" {
		t.Fatalf("pause: %v %v", p.GetWorkflow(), err)
	}
	x, err := c.Cancel(ctx, &workflowsv1.CancelRequest{Id: w.GetId()})
	if err != nil || x.GetWorkflow().GetState() != "cancelled" || x.GetWorkflow().GetFinishTime() == nil {
		t.Fatalf("cancel: %v %v", x.GetWorkflow(), err)
	}
	if _, err := c.Cancel(ctx, &workflowsv1.CancelRequest{Id: w.GetId()}); err != nil {
		t.Errorf("cancelling a cancelled workflow: %v", err)
	}
	_, err = c.Resume(ctx, &workflowsv1.ResumeRequest{Id: w.GetId()})
	wantCode(t, err, connect.CodeFailedPrecondition, "")

	list, err := c.List(ctx, &workflowsv1.ListRequest{States: []string{"cancelled"}})
	if err != nil || len(list.GetWorkflows()) != 1 || list.GetWorkflows()[0].GetId() != w.GetId() {
		t.Fatalf("list: %v %v", list.GetWorkflows(), err)
	}
	var events int
	if err := env.Pool.QueryRow(ctx, `SELECT count(*) FROM outbox WHERE subject = 'workflow/' || $1`, w.GetId()).Scan(&events); err != nil || events != 4 {
		t.Errorf("%d workflow events (created, resumed, paused, cancelled), want 4 (%v)", events, err)
	}

	// Another tenant sees none of it.
	other, err := env.IAM(env.AdminKey).CreateTenant(ctx, &iamv1.CreateTenantRequest{Name: "other"})
	if err != nil {
		t.Fatal(err)
	}
	oc := client(env, other.GetOwnerApiKey())
	_, err = oc.Get(ctx, &workflowsv1.GetRequest{Id: w.GetId()})
	wantCode(t, err, connect.CodeNotFound, "")
	_, err = oc.Cancel(ctx, &workflowsv1.CancelRequest{Id: w.GetId()})
	wantCode(t, err, connect.CodeNotFound, "")
	_, err = oc.Create(ctx, &workflowsv1.CreateRequest{Action: upgrade("v2.0.0"), Target: &workflowsv1.Target{NodeIds: ids(nodes[:1])}})
	wantCode(t, err, connect.CodeFailedPrecondition, "target.node_ids[0]")
	if l, err := oc.List(ctx, &workflowsv1.ListRequest{}); err != nil || len(l.GetWorkflows()) != 0 {
		t.Errorf("other tenant lists %v (%v)", l.GetWorkflows(), err)
	}
}

func TestCreateRefusesBadInput(t *testing.T) {
	t.Parallel()
	env := servertest.New(t)
	root := capacitytest.RootTenant(t, env.Pool)
	nodes := capacitytest.Nodes(t, env.Pool, root, 1, capacitytest.NodeSpec{CPUs: 4})
	c := client(env, env.AdminKey)
	one := &workflowsv1.Target{NodeIds: ids(nodes)}
	for _, tc := range []struct {
		field string
		req   *workflowsv1.CreateRequest
	}{
		{"action", &workflowsv1.CreateRequest{Target: one}},
		{"action.kind", &workflowsv1.CreateRequest{Action: &workflowsv1.Action{}, Target: one}},
		{"action.upgrade.version", &workflowsv1.CreateRequest{Action: upgrade(""), Target: one}},
		{"action.upgrade.version", &workflowsv1.CreateRequest{Action: upgrade("v1/../../x"), Target: one}},
		{"target", &workflowsv1.CreateRequest{Action: upgrade("v2")}},
		{"target", &workflowsv1.CreateRequest{Action: upgrade("v2"), Target: &workflowsv1.Target{NodeIds: ids(nodes), LabelSelector: map[string]string{"a": "b"}}}},
		{"target.node_ids[1]", &workflowsv1.CreateRequest{Action: upgrade("v2"), Target: &workflowsv1.Target{NodeIds: []string{nodes[0].String(), nodes[0].String()}}}},
		{"target.node_ids[0]", &workflowsv1.CreateRequest{Action: upgrade("v2"), Target: &workflowsv1.Target{NodeIds: []string{"nope"}}}},
		{"target.pool_id", &workflowsv1.CreateRequest{Action: upgrade("v2"), Target: &workflowsv1.Target{PoolId: "nope"}}},
		{"policy.max_parallel", &workflowsv1.CreateRequest{Action: upgrade("v2"), Target: one, Policy: &workflowsv1.Policy{MaxParallel: 1001}}},
		{"policy.max_failures", &workflowsv1.CreateRequest{Action: upgrade("v2"), Target: one, Policy: &workflowsv1.Policy{MaxFailures: -1}}},
		{"policy.step_timeout", &workflowsv1.CreateRequest{Action: upgrade("v2"), Target: one, Policy: &workflowsv1.Policy{StepTimeout: durationpb.New(time.Second)}}},
		{"policy.min_healthy", &workflowsv1.CreateRequest{Action: upgrade("v2"), Target: one, Policy: &workflowsv1.Policy{MinHealthy: durationpb.New(2 * time.Hour)}}},
		{"name", &workflowsv1.CreateRequest{Name: strings.Repeat("n", 129), Action: upgrade("v2"), Target: one}},
	} {
		_, err := c.Create(ctx, tc.req)
		wantCode(t, err, connect.CodeInvalidArgument, tc.field)
	}
	_, err := c.Create(ctx, &workflowsv1.CreateRequest{Action: upgrade("v2"), Target: &workflowsv1.Target{LabelSelector: map[string]string{"none": "match"}}})
	wantCode(t, err, connect.CodeFailedPrecondition, "target")
	var n int
	if err := env.Pool.QueryRow(ctx, `SELECT count(*) FROM workflows`).Scan(&n); err != nil || n != 0 {
		t.Errorf("%d workflows after refused creates (%v)", n, err)
	}
}
