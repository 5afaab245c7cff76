package commands_test

import (
	"strings"
	"testing"

	"connectrpc.com/connect"
	"github.com/google/uuid"
	"google.golang.org/protobuf/proto"

	"github.com/better-compute/better-compute/gen/db"
	commandsv1 "github.com/better-compute/better-compute/gen/go/bettercompute/commands/v1"
	daemonv1 "github.com/better-compute/better-compute/gen/go/bettercompute/daemon/v1"
	iamv1 "github.com/better-compute/better-compute/gen/go/bettercompute/iam/v1"
	"github.com/better-compute/better-compute/server/internal/commands"
	"github.com/better-compute/better-compute/server/servertest"
)

// labelledNode creates a node of the tenant with labels and pool.
func labelledNode(t *testing.T, env *servertest.Env, tenant uuid.UUID, labels, pool string) uuid.UUID {
	t.Helper()
	q := db.New(env.Pool)
	n, err := q.CreateNode(ctx, db.CreateNodeParams{ID: uuid.Must(uuid.NewV7()), TenantID: tenant, Labels: []byte(labels), Pool: pool})
	if err != nil {
		t.Fatal(err)
	}
	return n.ID
}

func fanOutEcho(sel *commandsv1.FanOutSelector) *commandsv1.FanOutRequest {
	return &commandsv1.FanOutRequest{Selector: sel, Payload: &commandsv1.FanOutRequest_Echo{Echo: echo}}
}

func TestFanOut(t *testing.T) {
	t.Parallel()
	env := servertest.New(t)
	c := client(env, env.AdminKey)
	tenant := tenantOf(t, env, env.AdminKey)
	var h100 []uuid.UUID
	for range 5 {
		h100 = append(h100, labelledNode(t, env, tenant, `{"gpu":"h100"}`, "x"))
	}
	other := labelledNode(t, env, tenant, `{"gpu":"a100"}`, "x")
	revoked := labelledNode(t, env, tenant, `{"gpu":"h100"}`, "x")
	if _, err := db.New(env.Pool).RevokeNode(ctx, db.RevokeNodeParams{TenantID: tenant, ID: revoked}); err != nil {
		t.Fatal(err)
	}

	req := fanOutEcho(&commandsv1.FanOutSelector{Labels: map[string]string{"gpu": "h100"}})
	req.IdempotencyKey, req.MaxInFlight = "fan-1", 2
	res, err := c.FanOut(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	f := res.GetFanOut()
	if f.GetTotal() != 5 || f.GetMaxInFlight() != 2 || f.GetType() != "echo" || f.GetSelector().GetLabels()["gpu"] != "h100" {
		t.Fatalf("fan-out %v", f)
	}
	again, err := c.FanOut(ctx, req)
	if err != nil || again.GetFanOut().GetId() != f.GetId() {
		t.Fatalf("same key: %v, %v", again, err)
	}
	list, err := c.List(ctx, &commandsv1.ListRequest{FanOutId: f.GetId(), PageSize: 100})
	if err != nil || len(list.GetCommands()) != 5 {
		t.Fatalf("list by fan-out: %d, %v", len(list.GetCommands()), err)
	}
	for _, cmd := range list.GetCommands() {
		id := uuid.MustParse(cmd.GetNodeId())
		if id == other || id == revoked || cmd.GetType() != "echo" || cmd.GetIdempotencyKey() != "fan-1" {
			t.Errorf("command %v", cmd)
		}
		if v := uuid.MustParse(cmd.GetId()).Version(); v != 7 {
			t.Errorf("command id %s is version %d", cmd.GetId(), v)
		}
	}
	var events int
	if err := env.Pool.QueryRow(ctx, `SELECT count(*) FROM outbox WHERE tenant_id = $1 AND type = 'command.created'
		AND payload->>'type' = 'echo' AND subject = 'command/' || (payload->>'id')`, tenant).Scan(&events); err != nil || events != 5 {
		t.Errorf("command.created events: %d, %v", events, err)
	}

	// Progress: one succeeded, one failed, the rest pending.
	cmds := list.GetCommands()
	finishAs(t, env, uuid.MustParse(cmds[0].GetNodeId()), uuid.MustParse(cmds[0].GetId()), "succeeded")
	finishAs(t, env, uuid.MustParse(cmds[1].GetNodeId()), uuid.MustParse(cmds[1].GetId()), "failed")
	sum, err := c.GetFanOut(ctx, &commandsv1.GetFanOutRequest{Id: f.GetId()})
	if err != nil {
		t.Fatal(err)
	}
	want := &commandsv1.FanOutCounts{Pending: 3, Succeeded: 1, Failed: 1}
	if !proto.Equal(sum.GetCounts(), want) || sum.GetDone() || len(sum.GetFailures()) != 1 || sum.GetFailures()[0].GetId() != cmds[1].GetId() {
		t.Errorf("summary %v", sum)
	}

	// Other fields of the selector, and a limit.
	for _, tc := range []struct {
		sel  *commandsv1.FanOutSelector
		want int32
	}{
		{&commandsv1.FanOutSelector{Pool: "x"}, 6},
		{&commandsv1.FanOutSelector{NodeIds: []string{h100[0].String(), other.String(), revoked.String()}}, 2},
		{&commandsv1.FanOutSelector{Pool: "x", Limit: 3}, 3},
		{&commandsv1.FanOutSelector{States: []string{"joining"}, Labels: map[string]string{"gpu": "a100"}}, 1},
		{&commandsv1.FanOutSelector{Online: proto.Bool(false), Pool: "x"}, 6},
	} {
		res, err := c.FanOut(ctx, fanOutEcho(tc.sel))
		if err != nil || res.GetFanOut().GetTotal() != tc.want {
			t.Errorf("selector %v: %v, %v; want %d", tc.sel, res.GetFanOut(), err, tc.want)
		}
	}
}

func TestFanOutValidation(t *testing.T) {
	t.Parallel()
	env := servertest.New(t)
	c := client(env, env.AdminKey)
	labelledNode(t, env, tenantOf(t, env, env.AdminKey), `{"gpu":"h100"}`, "")
	many := make([]string, 10_001)
	for i := range many {
		many[i] = uuid.NewString()
	}
	sel := &commandsv1.FanOutSelector{Labels: map[string]string{"gpu": "h100"}}
	for _, tc := range []struct {
		field string
		req   *commandsv1.FanOutRequest
	}{
		{"selector", fanOutEcho(nil)},
		{"selector", fanOutEcho(&commandsv1.FanOutSelector{})},
		{"selector.labels", fanOutEcho(&commandsv1.FanOutSelector{Labels: map[string]string{"bad key!": "x"}})},
		{"selector.node_ids", fanOutEcho(&commandsv1.FanOutSelector{NodeIds: []string{"nope"}})},
		{"selector.node_ids", fanOutEcho(&commandsv1.FanOutSelector{NodeIds: many})},
		{"selector.states", fanOutEcho(&commandsv1.FanOutSelector{States: []string{"asleep"}})},
		{"selector.pool", fanOutEcho(&commandsv1.FanOutSelector{Pool: strings.Repeat("p", 257)})},
		{"selector.gpu_model", fanOutEcho(&commandsv1.FanOutSelector{GpuModel: "a\x00b"})},
		{"selector.limit", fanOutEcho(&commandsv1.FanOutSelector{Limit: -1})},
		{"selector.limit", fanOutEcho(&commandsv1.FanOutSelector{Limit: 100_001})},
		{"payload", &commandsv1.FanOutRequest{Selector: sel}},
		{"exec.path", &commandsv1.FanOutRequest{Selector: sel, Payload: &commandsv1.FanOutRequest_Exec{Exec: &daemonv1.ExecPayload{Path: "nvidia-smi"}}}},
		{"max_in_flight", &commandsv1.FanOutRequest{Selector: sel, Payload: &commandsv1.FanOutRequest_Echo{Echo: echo}, MaxInFlight: commands.MaxInFlight + 1}},
		{"max_in_flight", &commandsv1.FanOutRequest{Selector: sel, Payload: &commandsv1.FanOutRequest_Echo{Echo: echo}, MaxInFlight: -1}},
		{"idempotency_key", &commandsv1.FanOutRequest{Selector: sel, Payload: &commandsv1.FanOutRequest_Echo{Echo: echo}, IdempotencyKey: strings.Repeat("k", 256)}},
	} {
		_, err := c.FanOut(ctx, tc.req)
		wantCode(t, err, connect.CodeInvalidArgument)
		if !strings.Contains(err.Error(), tc.field) {
			t.Errorf("error %q does not name %s", err, tc.field)
		}
	}
	_, err := c.FanOut(ctx, fanOutEcho(&commandsv1.FanOutSelector{Labels: map[string]string{"none": "match"}}))
	wantCode(t, err, connect.CodeFailedPrecondition)
	_, err = c.GetFanOut(ctx, &commandsv1.GetFanOutRequest{Id: "x"})
	wantCode(t, err, connect.CodeInvalidArgument)
	_, err = c.List(ctx, &commandsv1.ListRequest{FanOutId: "x"})
	wantCode(t, err, connect.CodeInvalidArgument)
}

// TestFanOutTenantScoping: a tenant's fan-out reaches only its own nodes, as commands/create
// does, even when it names another tenant's node ids; its fan-outs are not found by others.
func TestFanOutTenantScoping(t *testing.T) {
	t.Parallel()
	env := servertest.New(t)
	root := tenantOf(t, env, env.AdminKey)
	mine := labelledNode(t, env, root, `{"gpu":"h100"}`, "")
	acme, err := env.IAM(env.AdminKey).CreateTenant(ctx, &iamv1.CreateTenantRequest{Name: "acme"})
	if err != nil {
		t.Fatal(err)
	}
	acmeTenant := tenantOf(t, env, acme.GetOwnerApiKey())
	theirs := labelledNode(t, env, acmeTenant, `{"gpu":"h100"}`, "")
	other := client(env, acme.GetOwnerApiKey())

	res, err := other.FanOut(ctx, fanOutEcho(&commandsv1.FanOutSelector{Labels: map[string]string{"gpu": "h100"}}))
	if err != nil || res.GetFanOut().GetTotal() != 1 {
		t.Fatalf("acme's fan-out: %v, %v", res, err)
	}
	list, err := other.List(ctx, &commandsv1.ListRequest{FanOutId: res.GetFanOut().GetId()})
	if err != nil || len(list.GetCommands()) != 1 || list.GetCommands()[0].GetNodeId() != theirs.String() {
		t.Fatalf("acme's fan-out reached %v, %v", list.GetCommands(), err)
	}
	_, err = other.FanOut(ctx, fanOutEcho(&commandsv1.FanOutSelector{NodeIds: []string{mine.String()}}))
	wantCode(t, err, connect.CodeFailedPrecondition)
	_, err = client(env, env.AdminKey).GetFanOut(ctx, &commandsv1.GetFanOutRequest{Id: res.GetFanOut().GetId()})
	wantCode(t, err, connect.CodeNotFound)
	rootList, err := client(env, env.AdminKey).List(ctx, &commandsv1.ListRequest{FanOutId: res.GetFanOut().GetId()})
	if err != nil || len(rootList.GetCommands()) != 0 {
		t.Errorf("root lists acme's fan-out: %v, %v", rootList.GetCommands(), err)
	}
}

// finishAs moves a command through sent to state, as a gateway would.
func finishAs(t *testing.T, env *servertest.Env, node, id uuid.UUID, state string) {
	t.Helper()
	q := db.New(env.Pool)
	if _, err := q.MarkCommandsSent(ctx, db.MarkCommandsSentParams{NodeID: node, Ids: []uuid.UUID{id}}); err != nil {
		t.Fatal(err)
	}
	if _, err := q.FinishCommand(ctx, db.FinishCommandParams{NodeID: node, ID: id, State: db.CommandState(state), Error: state}); err != nil {
		t.Fatal(err)
	}
}
