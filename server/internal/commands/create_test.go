package commands_test

import (
	"strings"
	"testing"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/types/known/durationpb"

	commandsv1 "github.com/better-compute/better-compute/gen/go/bettercompute/commands/v1"
	daemonv1 "github.com/better-compute/better-compute/gen/go/bettercompute/daemon/v1"
	"github.com/better-compute/better-compute/server/servertest"
)

// echo is an empty echo payload.
var echo = &daemonv1.EchoPayload{}

func TestCreate(t *testing.T) {
	t.Parallel()
	env := servertest.New(t)
	c := client(env, env.AdminKey)
	tenant := tenantOf(t, env, env.AdminKey)
	n := node(t, env, tenant)

	res, err := c.Create(ctx, &commandsv1.CreateRequest{NodeId: n.String(), Payload: &commandsv1.CreateRequest_Echo{Echo: echo}, IdempotencyKey: "k"})
	if err != nil || len(res.GetCommands()) != 1 || res.GetCommands()[0].GetState() != commandsv1.CommandState_COMMAND_STATE_PENDING {
		t.Fatalf("create: %v, %v", res.GetCommands(), err)
	}
	again, err := c.Create(ctx, &commandsv1.CreateRequest{NodeId: n.String(), Payload: &commandsv1.CreateRequest_Echo{Echo: echo}, IdempotencyKey: "k"})
	if err != nil || again.GetCommands()[0].GetId() != res.GetCommands()[0].GetId() {
		t.Fatalf("same key made another command: %v, %v", again.GetCommands(), err)
	}

	for _, tc := range []struct {
		field string
		req   *commandsv1.CreateRequest
	}{
		{"node_id", &commandsv1.CreateRequest{Payload: &commandsv1.CreateRequest_Echo{Echo: echo}}},
		{"node_id", &commandsv1.CreateRequest{NodeId: n.String(), LabelSelector: map[string]string{"a": "b"}, Payload: &commandsv1.CreateRequest_Echo{Echo: echo}}},
		{"node_id", &commandsv1.CreateRequest{NodeId: "nope", Payload: &commandsv1.CreateRequest_Echo{Echo: echo}}},
		{"payload", &commandsv1.CreateRequest{NodeId: n.String()}},
		{"exec.path", &commandsv1.CreateRequest{NodeId: n.String(), Payload: &commandsv1.CreateRequest_Exec{Exec: &daemonv1.ExecPayload{Path: "nvidia-smi"}}}},
		{"upgrade.version", &commandsv1.CreateRequest{NodeId: n.String(), Payload: &commandsv1.CreateRequest_Upgrade{Upgrade: &daemonv1.UpgradePayload{}}}},
		{"upgrade.version", &commandsv1.CreateRequest{NodeId: n.String(), Payload: &commandsv1.CreateRequest_Upgrade{Upgrade: &daemonv1.UpgradePayload{Version: "v2/../x"}}}},
		{"configure.config", &commandsv1.CreateRequest{NodeId: n.String(), Payload: &commandsv1.CreateRequest_Configure{Configure: &daemonv1.ConfigurePayload{}}}},
		{"timeout", &commandsv1.CreateRequest{NodeId: n.String(), Payload: &commandsv1.CreateRequest_Echo{Echo: echo}, Timeout: durationpb.New(-1)}},
		{"timeout", &commandsv1.CreateRequest{NodeId: n.String(), Payload: &commandsv1.CreateRequest_Echo{Echo: echo}, Timeout: durationpb.New(48 * 3600e9)}},
		{"label_selector", &commandsv1.CreateRequest{LabelSelector: map[string]string{"bad key!": "x"}, Payload: &commandsv1.CreateRequest_Echo{Echo: echo}}},
	} {
		_, err := c.Create(ctx, tc.req)
		wantCode(t, err, connect.CodeInvalidArgument)
		if !strings.Contains(err.Error(), tc.field) {
			t.Errorf("error %q does not name %s", err, tc.field)
		}
	}
	_, err = c.Create(ctx, &commandsv1.CreateRequest{LabelSelector: map[string]string{"none": "match"}, Payload: &commandsv1.CreateRequest_Echo{Echo: echo}})
	wantCode(t, err, connect.CodeFailedPrecondition)
	list, err := c.List(ctx, &commandsv1.ListRequest{})
	if err != nil || len(list.GetCommands()) != 1 {
		t.Fatalf("refused creates left commands behind: %d, %v", len(list.GetCommands()), err)
	}
}
