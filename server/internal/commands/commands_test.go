package commands_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/google/uuid"

	"github.com/better-compute/better-compute/gen/db"
	auditv1 "github.com/better-compute/better-compute/gen/go/bettercompute/audit/v1"
	commandsv1 "github.com/better-compute/better-compute/gen/go/bettercompute/commands/v1"
	"github.com/better-compute/better-compute/gen/go/bettercompute/commands/v1/commandsv1connect"
	iamv1 "github.com/better-compute/better-compute/gen/go/bettercompute/iam/v1"
	"github.com/better-compute/better-compute/internal/dbtest"
	"github.com/better-compute/better-compute/server/servertest"
)

func TestMain(m *testing.M) { dbtest.Main(m) }

var ctx = context.Background()

func wantCode(t *testing.T, err error, code connect.Code) {
	t.Helper()
	if connect.CodeOf(err) != code {
		t.Fatalf("error = %v, want code %v", err, code)
	}
}

func client(env *servertest.Env, key string) commandsv1connect.CommandsServiceClient {
	return commandsv1connect.NewCommandsServiceClient(env.HTTPClient(key), env.URL)
}

// tenantOf returns the tenant of key's principal.
func tenantOf(t *testing.T, env *servertest.Env, key string) uuid.UUID {
	t.Helper()
	me, err := env.IAM(key).WhoAmI(ctx, &iamv1.WhoAmIRequest{})
	if err != nil {
		t.Fatal(err)
	}
	return uuid.MustParse(me.GetTenant().GetId())
}

// node creates a node of the tenant for commands.
func node(t *testing.T, env *servertest.Env, tenant uuid.UUID) uuid.UUID {
	t.Helper()
	n, err := db.New(env.Pool).CreateNode(ctx, db.CreateNodeParams{ID: uuid.Must(uuid.NewV7()), TenantID: tenant, Labels: []byte(`{}`)})
	if err != nil {
		t.Fatal(err)
	}
	return n.ID
}

// command creates a pending command directly, as commands/create does.
func command(t *testing.T, env *servertest.Env, tenant, node uuid.UUID, payload string) db.Command {
	t.Helper()
	id := uuid.Must(uuid.NewV7())
	c, err := db.New(env.Pool).CreateCommand(ctx, db.CreateCommandParams{
		ID: id, TenantID: tenant, NodeID: node, Type: "exec", Payload: []byte(payload),
		IdempotencyKey: "key-" + id.String(), Deadline: time.Now().Add(time.Hour).Truncate(time.Microsecond),
	})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// finish moves a command through sent and acked to succeeded, as a gateway would.
func finish(t *testing.T, env *servertest.Env, c db.Command) {
	t.Helper()
	q := db.New(env.Pool)
	if _, err := q.MarkCommandsSent(ctx, db.MarkCommandsSentParams{NodeID: c.NodeID, Ids: []uuid.UUID{c.ID}}); err != nil {
		t.Fatal(err)
	}
	if _, err := q.AckCommand(ctx, db.AckCommandParams{NodeID: c.NodeID, ID: c.ID}); err != nil {
		t.Fatal(err)
	}
	if _, err := q.FinishCommand(ctx, db.FinishCommandParams{NodeID: c.NodeID, ID: c.ID, State: "succeeded", Result: []byte(`{"exit_code":0}`)}); err != nil {
		t.Fatal(err)
	}
}

func TestGetAndList(t *testing.T) {
	t.Parallel()
	env := servertest.New(t)
	tenant := tenantOf(t, env, env.AdminKey)
	n1, n2 := node(t, env, tenant), node(t, env, tenant)
	var ids []string
	for i := range 5 {
		n := n1
		if i%2 == 1 {
			n = n2
		}
		ids = append(ids, command(t, env, tenant, n, `{"path":"/bin/true"}`).ID.String())
	}
	first, err := db.New(env.Pool).GetCommand(ctx, db.GetCommandParams{TenantID: tenant, ID: uuid.MustParse(ids[0])})
	if err != nil {
		t.Fatal(err)
	}
	finish(t, env, first)
	c := client(env, env.AdminKey)

	got, err := c.Get(ctx, &commandsv1.GetRequest{Id: ids[0]})
	if err != nil {
		t.Fatal(err)
	}
	cmd := got.GetCommand()
	if cmd.GetId() != ids[0] || cmd.GetTenantId() != tenant.String() || cmd.GetNodeId() != n1.String() ||
		cmd.GetType() != "exec" || cmd.GetState() != commandsv1.CommandState_COMMAND_STATE_SUCCEEDED ||
		cmd.GetAttempts() != 1 || !cmd.GetDeadlineTime().AsTime().Equal(first.Deadline) ||
		cmd.GetSendTime() == nil || cmd.GetAckTime() == nil || cmd.GetFinishTime() == nil ||
		cmd.GetIdempotencyKey() != "key-"+ids[0] {
		t.Errorf("get = %v", cmd)
	}
	if p := cmd.GetExec(); p.GetPath() != "/bin/true" || len(p.GetArgs()) != 0 {
		t.Errorf("payload = %v", p)
	}
	if code, ok := cmd.GetResult().GetFields()["exit_code"]; !ok || code.GetNumberValue() != 0 {
		t.Errorf("result = %v", cmd.GetResult())
	}
	_, err = c.Get(ctx, &commandsv1.GetRequest{Id: uuid.NewString()})
	wantCode(t, err, connect.CodeNotFound)
	_, err = c.Get(ctx, &commandsv1.GetRequest{Id: "nope"})
	wantCode(t, err, connect.CodeInvalidArgument)

	// Pages of two, in creation order.
	var listed []string
	req := &commandsv1.ListRequest{PageSize: 2}
	for pages := 0; ; pages++ {
		res, err := c.List(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		if len(res.GetCommands()) > 2 || pages > 3 {
			t.Fatalf("page %d has %d commands", pages, len(res.GetCommands()))
		}
		for _, c := range res.GetCommands() {
			listed = append(listed, c.GetId())
		}
		if res.GetNextPageToken() == "" {
			break
		}
		req.PageToken = res.GetNextPageToken()
	}
	if strings.Join(listed, ",") != strings.Join(ids, ",") {
		t.Errorf("listed %v, want %v", listed, ids)
	}

	for _, tc := range []struct {
		req  *commandsv1.ListRequest
		want []string
	}{
		{&commandsv1.ListRequest{NodeId: n2.String()}, []string{ids[1], ids[3]}},
		{&commandsv1.ListRequest{State: commandsv1.CommandState_COMMAND_STATE_SUCCEEDED}, []string{ids[0]}},
		{&commandsv1.ListRequest{NodeId: n1.String(), State: commandsv1.CommandState_COMMAND_STATE_PENDING}, []string{ids[2], ids[4]}},
		{&commandsv1.ListRequest{State: commandsv1.CommandState_COMMAND_STATE_EXPIRED}, nil},
	} {
		res, err := c.List(ctx, tc.req)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, c := range res.GetCommands() {
			got = append(got, c.GetId())
		}
		if strings.Join(got, ",") != strings.Join(tc.want, ",") {
			t.Errorf("list %v = %v, want %v", tc.req, got, tc.want)
		}
	}
	_, err = c.List(ctx, &commandsv1.ListRequest{NodeId: "nope"})
	wantCode(t, err, connect.CodeInvalidArgument)
	_, err = c.List(ctx, &commandsv1.ListRequest{State: 99})
	wantCode(t, err, connect.CodeInvalidArgument)
}

func TestCancel(t *testing.T) {
	t.Parallel()
	env := servertest.New(t)
	tenant := tenantOf(t, env, env.AdminKey)
	n := node(t, env, tenant)
	pending := command(t, env, tenant, n, `{}`)
	sent := command(t, env, tenant, n, `{}`)
	if _, err := db.New(env.Pool).MarkCommandsSent(ctx, db.MarkCommandsSentParams{NodeID: n, Ids: []uuid.UUID{sent.ID}}); err != nil {
		t.Fatal(err)
	}
	done := command(t, env, tenant, n, `{}`)
	finish(t, env, done)
	c := client(env, env.AdminKey)

	for _, cmd := range []db.Command{pending, sent} {
		res, err := c.Cancel(ctx, &commandsv1.CancelRequest{Id: cmd.ID.String()})
		if err != nil {
			t.Fatal(err)
		}
		if got := res.GetCommand(); got.GetState() != commandsv1.CommandState_COMMAND_STATE_CANCELLED || got.GetFinishTime() == nil {
			t.Errorf("cancelled command = %v", got)
		}
	}
	// The node cannot ack or finish a cancelled command any more.
	if _, err := db.New(env.Pool).AckCommand(ctx, db.AckCommandParams{NodeID: n, ID: sent.ID}); err == nil {
		t.Error("a cancelled command was acked")
	}

	// Finished commands cannot be cancelled; the error names the state.
	for id, state := range map[uuid.UUID]string{pending.ID: "cancelled", done.ID: "succeeded"} {
		_, err := c.Cancel(ctx, &commandsv1.CancelRequest{Id: id.String()})
		wantCode(t, err, connect.CodeFailedPrecondition)
		if !strings.Contains(err.Error(), "is "+state) {
			t.Errorf("cancel of a %s command: %v", state, err)
		}
	}
	_, err := c.Cancel(ctx, &commandsv1.CancelRequest{Id: uuid.NewString()})
	wantCode(t, err, connect.CodeNotFound)

	// Each successful cancel left an audit row and an event.
	audit, err := env.Audit(env.AdminKey).List(ctx, &auditv1.ListRequest{Method: "commands/cancel", Outcome: "ok"})
	if err != nil {
		t.Fatal(err)
	}
	var targets []string
	for _, e := range audit.GetEvents() {
		targets = append(targets, e.GetTarget())
	}
	if want := []string{"command/" + sent.ID.String(), "command/" + pending.ID.String()}; strings.Join(targets, " ") != strings.Join(want, " ") {
		t.Errorf("audit targets %v, want %v (newest first)", targets, want)
	}
	var events int
	if err := env.Pool.QueryRow(ctx, `SELECT count(*) FROM outbox WHERE type = 'command.cancelled'`).Scan(&events); err != nil {
		t.Fatal(err)
	}
	if events != 2 {
		t.Errorf("%d command.cancelled events, want 2", events)
	}
}

func TestPermissions(t *testing.T) {
	t.Parallel()
	env := servertest.New(t)
	tenant := tenantOf(t, env, env.AdminKey)
	cmd := command(t, env, tenant, node(t, env, tenant), `{}`)
	admin := env.IAM(env.AdminKey)
	keyWith := func(name string, role iamv1.Role) string {
		p, err := admin.CreatePrincipal(ctx, &iamv1.CreatePrincipalRequest{Kind: iamv1.PrincipalKind_PRINCIPAL_KIND_SERVICE_ACCOUNT, Name: name})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := admin.CreateRoleBinding(ctx, &iamv1.CreateRoleBindingRequest{PrincipalId: p.GetPrincipal().GetId(), Role: role}); err != nil {
			t.Fatal(err)
		}
		k, err := admin.CreateApiKey(ctx, &iamv1.CreateApiKeyRequest{PrincipalId: p.GetPrincipal().GetId()})
		if err != nil {
			t.Fatal(err)
		}
		return k.GetKey()
	}
	viewer := client(env, keyWith("viewer", iamv1.Role_ROLE_VIEWER))
	if _, err := viewer.Get(ctx, &commandsv1.GetRequest{Id: cmd.ID.String()}); err != nil {
		t.Errorf("viewer get: %v", err)
	}
	_, err := viewer.Cancel(ctx, &commandsv1.CancelRequest{Id: cmd.ID.String()})
	wantCode(t, err, connect.CodePermissionDenied)
	operator := client(env, keyWith("operator", iamv1.Role_ROLE_OPERATOR))
	if _, err := operator.Cancel(ctx, &commandsv1.CancelRequest{Id: cmd.ID.String()}); err != nil {
		t.Errorf("operator cancel: %v", err)
	}
}

func TestTenantIsolation(t *testing.T) {
	t.Parallel()
	env := servertest.New(t)
	root := tenantOf(t, env, env.AdminKey)
	cmd := command(t, env, root, node(t, env, root), `{}`)
	acme, err := env.IAM(env.AdminKey).CreateTenant(ctx, &iamv1.CreateTenantRequest{Name: "acme"})
	if err != nil {
		t.Fatal(err)
	}
	other := client(env, acme.GetOwnerApiKey())

	_, err = other.Get(ctx, &commandsv1.GetRequest{Id: cmd.ID.String()})
	wantCode(t, err, connect.CodeNotFound)
	_, err = other.Cancel(ctx, &commandsv1.CancelRequest{Id: cmd.ID.String()})
	wantCode(t, err, connect.CodeNotFound)
	for _, req := range []*commandsv1.ListRequest{{}, {NodeId: cmd.NodeID.String()}} {
		res, err := other.List(ctx, req)
		if err != nil || len(res.GetCommands()) != 0 {
			t.Errorf("another tenant's list %v = %v %v", req, res.GetCommands(), err)
		}
	}
	got, err := client(env, env.AdminKey).Get(ctx, &commandsv1.GetRequest{Id: cmd.ID.String()})
	if err != nil || got.GetCommand().GetState() != commandsv1.CommandState_COMMAND_STATE_PENDING {
		t.Errorf("after another tenant's cancel: %v %v", got, err)
	}
}
