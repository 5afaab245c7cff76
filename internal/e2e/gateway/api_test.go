package gateway_test

import (
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/google/uuid"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/better-compute/better-compute/gateway"
	commandsv1 "github.com/better-compute/better-compute/gen/go/bettercompute/commands/v1"
	"github.com/better-compute/better-compute/gen/go/bettercompute/commands/v1/commandsv1connect"
	daemonv1 "github.com/better-compute/better-compute/gen/go/bettercompute/daemon/v1"
	jointokensv1 "github.com/better-compute/better-compute/gen/go/bettercompute/jointokens/v1"
	"github.com/better-compute/better-compute/gen/go/bettercompute/jointokens/v1/jointokensv1connect"
	nodesv1 "github.com/better-compute/better-compute/gen/go/bettercompute/nodes/v1"
	"github.com/better-compute/better-compute/gen/go/bettercompute/nodes/v1/nodesv1connect"
	"github.com/better-compute/better-compute/internal/poll"
	"github.com/better-compute/better-compute/server"
	"github.com/better-compute/better-compute/server/servertest"
)

// TestThroughTheAPI drives a node only through the public API: a join token from
// joinTokens/create, a FakeDaemon joining a real gateway on loopback TLS, a command from
// commands/create whose result is read back with commands/get, and nodes/revoke ending the
// session at once through the notifier and refusing the reconnect.
func TestThroughTheAPI(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	notifier, err := gateway.NewNotifier(e.pool, e.bundle, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(notifier.Wait)
	api := servertest.Start(t, e.pool, func(o *server.Options) { o.Notifier = notifier })
	client := api.HTTPClient(api.AdminKey)
	tokens := jointokensv1connect.NewJoinTokensServiceClient(client, api.URL)
	nodes := nodesv1connect.NewNodesServiceClient(client, api.URL)
	commands := commandsv1connect.NewCommandsServiceClient(client, api.URL)

	tok, err := tokens.Create(ctx, &jointokensv1.CreateRequest{Labels: map[string]string{"gpu": "h100"}})
	if err != nil {
		t.Fatal(err)
	}
	// The loop is slowed down so that only the notifier can deliver quickly.
	gw := e.startGatewayWith("gw1", 30*time.Second)
	f := e.startFake(gw.addr, tok.GetToken())
	list, err := nodes.List(ctx, &nodesv1.ListRequest{LabelSelector: map[string]string{"gpu": "h100"}})
	if err != nil || len(list.GetNodes()) != 1 || !list.GetNodes()[0].GetConnected() {
		t.Fatalf("nodes/list: %v, %v", list.GetNodes(), err)
	}
	nodeID := list.GetNodes()[0].GetId()
	if nodeID != f.Status().NodeID {
		t.Fatalf("listed node %s, daemon is %s", nodeID, f.Status().NodeID)
	}

	payload, _ := structpb.NewStruct(map[string]any{"msg": "hi"})
	start := time.Now()
	created, err := commands.Create(ctx, &commandsv1.CreateRequest{NodeId: nodeID, Payload: &commandsv1.CreateRequest_Echo{Echo: &daemonv1.EchoPayload{Data: payload}}})
	if err != nil {
		t.Fatal(err)
	}
	id := created.GetCommands()[0].GetId()
	var got *commandsv1.Command
	poll.Until(t, 10*time.Second, "the command succeeds", func() bool {
		res, err := commands.Get(ctx, &commandsv1.GetRequest{Id: id})
		got = res.GetCommand()
		return err == nil && got.GetState() == commandsv1.CommandState_COMMAND_STATE_SUCCEEDED
	})
	t.Logf("round trip through the API with the notifier: %v (dispatch loop every 30s)", time.Since(start))
	if got.GetResult().GetFields()["msg"].GetStringValue() != "hi" {
		t.Errorf("result %v", got.GetResult())
	}
	if got.GetType() != "echo" || got.GetEcho().GetData().GetFields()["msg"].GetStringValue() != "hi" {
		t.Errorf("type %q, payload %v", got.GetType(), got.GetEcho())
	}

	// collectInventory refreshes the stored inventory, with a history record.
	f.SetInventory(&daemonv1.Inventory{Hostname: "fake", Os: "linux", CpuModel: "Fake CPU v2", Cpus: 16, MemoryBytes: 64 << 30})
	created, err = commands.Create(ctx, &commandsv1.CreateRequest{NodeId: nodeID, Payload: &commandsv1.CreateRequest_CollectInventory{CollectInventory: &daemonv1.CollectInventoryPayload{}}})
	if err != nil {
		t.Fatal(err)
	}
	poll.Until(t, 10*time.Second, "collectInventory succeeds", func() bool {
		res, err := commands.Get(ctx, &commandsv1.GetRequest{Id: created.GetCommands()[0].GetId()})
		return err == nil && res.GetCommand().GetState() == commandsv1.CommandState_COMMAND_STATE_SUCCEEDED
	})
	node, err := nodes.Get(ctx, &nodesv1.GetRequest{Id: nodeID})
	if err != nil || node.GetNode().GetInventory().GetCpuModel() != "Fake CPU v2" || node.GetNode().GetInventory().GetCpus() != 16 {
		t.Errorf("inventory after collectInventory: %v, %v", node.GetNode().GetInventory(), err)
	}
	var history int
	if err := e.pool.QueryRow(ctx, "SELECT count(*) FROM node_inventory_history WHERE node_id = $1", nodeID).Scan(&history); err != nil || history != 2 {
		t.Errorf("%d inventory history records, want 2 (hello, collectInventory): %v", history, err)
	}

	// A selector reaches every matching node; the same idempotency key returns the same command.
	again, err := commands.Create(ctx, &commandsv1.CreateRequest{LabelSelector: map[string]string{"gpu": "h100"}, Payload: &commandsv1.CreateRequest_Echo{Echo: &daemonv1.EchoPayload{}}, IdempotencyKey: "once"})
	if err != nil {
		t.Fatal(err)
	}
	same, err := commands.Create(ctx, &commandsv1.CreateRequest{LabelSelector: map[string]string{"gpu": "h100"}, Payload: &commandsv1.CreateRequest_Echo{Echo: &daemonv1.EchoPayload{}}, IdempotencyKey: "once"})
	if err != nil || same.GetCommands()[0].GetId() != again.GetCommands()[0].GetId() {
		t.Fatalf("same idempotency key gave %v, %v", same.GetCommands(), err)
	}
	_, err = commands.Create(ctx, &commandsv1.CreateRequest{NodeId: uuid.NewString(), Payload: &commandsv1.CreateRequest_Echo{Echo: &daemonv1.EchoPayload{}}})
	if connect.CodeOf(err) != connect.CodeNotFound {
		t.Errorf("command for an unknown node: %v", err)
	}

	sessions := f.Status().Sessions
	start = time.Now()
	if _, err := nodes.Revoke(ctx, &nodesv1.RevokeRequest{Id: nodeID}); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, 5*time.Second, "the revoked node's session ends", func() bool { return !f.Status().Connected })
	t.Logf("nodes/revoke ended the session after %v", time.Since(start))
	poll.Until(t, 10*time.Second, "the reconnect is refused", func() bool {
		return connect.CodeOf(f.Status().LastError) == connect.CodePermissionDenied
	})
	if f.Status().Sessions != sessions {
		t.Error("the revoked node opened a new session")
	}
	_, err = commands.Create(ctx, &commandsv1.CreateRequest{NodeId: nodeID, Payload: &commandsv1.CreateRequest_Echo{Echo: &daemonv1.EchoPayload{}}})
	if connect.CodeOf(err) != connect.CodeFailedPrecondition {
		t.Errorf("command for a revoked node: %v", err)
	}
}
