package main_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/structpb"

	"github.com/better-compute/better-compute/gateway"
	"github.com/better-compute/better-compute/gateway/gatewaytest"
	commandsv1 "github.com/better-compute/better-compute/gen/go/bettercompute/commands/v1"
	"github.com/better-compute/better-compute/gen/go/bettercompute/commands/v1/commandsv1connect"
	jointokensv1 "github.com/better-compute/better-compute/gen/go/bettercompute/jointokens/v1"
	"github.com/better-compute/better-compute/gen/go/bettercompute/jointokens/v1/jointokensv1connect"
	nodesv1 "github.com/better-compute/better-compute/gen/go/bettercompute/nodes/v1"
	"github.com/better-compute/better-compute/gen/go/bettercompute/nodes/v1/nodesv1connect"
	"github.com/better-compute/better-compute/internal/command"
	"github.com/better-compute/better-compute/internal/daemon/state"
	"github.com/better-compute/better-compute/internal/fleet"
	"github.com/better-compute/better-compute/internal/poll"
	"github.com/better-compute/better-compute/server"
	"github.com/better-compute/better-compute/server/servertest"
	"github.com/better-compute/better-compute/workers"
	"github.com/better-compute/better-compute/workers/workerstest"
)

// TestNodeSpecReachesBcd sets a NodeSpec through the API and watches the NodeSpec reconciler's
// typed configure command reach a real bcd: configure is applied (config.json in the state
// directory), after which SpecApplied is True. (The spec's daemon version is rolled out by
// workflows; TestUpgradeEndToEnd upgrades bcd through an upgrade command.)
func TestNodeSpecReachesBcd(t *testing.T) {
	t.Parallel()
	bcd := buildBcd(t, "spec-1")[0]

	env := gatewaytest.New(t)
	notifier, err := gateway.NewNotifier(env.Pool, env.Bundle, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(notifier.Wait)
	api := servertest.Start(t, env.Pool, func(o *server.Options) { o.Notifier = notifier })
	client := api.HTTPClient(api.AdminKey)
	tokens := jointokensv1connect.NewJoinTokensServiceClient(client, api.URL)
	nodes := nodesv1connect.NewNodesServiceClient(client, api.URL)
	commands := commandsv1connect.NewCommandsServiceClient(client, api.URL)
	gw := startGateway(t, env, "127.0.0.1:0")
	workerstest.Run(t, workerstest.Options{
		Pool: env.Pool, Roles: []string{workers.RoleControllers},
		Reconcilers: workerstest.NodeControl(env.Pool, workerstest.NodeControlOptions{
			Notifier: notifier, CommandPoll: 100 * time.Millisecond, RetryFailedAfter: time.Second,
		}),
	})

	work := t.TempDir()
	caFile := filepath.Join(work, "root-ca.pem")
	if err := os.WriteFile(caFile, env.Bundle.RootPEM(), 0o644); err != nil {
		t.Fatal(err)
	}
	stateDir := filepath.Join(work, "state")
	tok, err := tokens.Create(t.Context(), &jointokensv1.CreateRequest{})
	if err != nil {
		t.Fatal(err)
	}
	runBcd(t, bcd, 0, "join", "--state-dir", stateDir, "--token", tok.GetToken(), "--gateway", gw.addr, "--ca-file", caFile)
	dir, _ := state.New(stateDir)
	joined, err := dir.ReadNode()
	if err != nil {
		t.Fatal(err)
	}
	nodeID := joined.NodeID

	d := startBcd(t, bcd, work, "run", "--state-dir", stateDir, "--max-backoff", "1s")
	poll.Until(t, 15*time.Second, "the node is ready with version spec-1", func() bool {
		res, err := nodes.Get(t.Context(), &nodesv1.GetRequest{Id: nodeID})
		return err == nil && res.GetNode().GetState() == "ready" && res.GetNode().GetConnected() && res.GetNode().GetDaemonVersion() == "spec-1"
	}, poll.Every(25*time.Millisecond), d.logReport())

	config, err := structpb.NewStruct(map[string]any{"logLevel": "debug", "limits": map[string]any{"pids": 4096}})
	if err != nil {
		t.Fatal(err)
	}
	res, err := nodes.UpdateSpec(t.Context(), &nodesv1.UpdateSpecRequest{Id: nodeID, Spec: &nodesv1.NodeSpec{Config: config}})
	if err != nil {
		t.Fatal(err)
	}
	gen := res.GetNode().GetSpecGeneration()

	poll.Until(t, 20*time.Second, "configure succeeds", func() bool {
		list, err := commands.List(t.Context(), &commandsv1.ListRequest{NodeId: nodeID})
		if err != nil {
			return false
		}
		for _, c := range list.GetCommands() {
			if c.GetType() == command.Configure && c.GetState() == commandsv1.CommandState_COMMAND_STATE_SUCCEEDED {
				return true
			}
		}
		return false
	}, poll.Every(25*time.Millisecond), d.logReport())
	applied, err := dir.Config()
	if err != nil {
		t.Fatal(err)
	}
	var got map[string]any
	if err := json.Unmarshal(applied, &got); err != nil || got["logLevel"] != "debug" || got["limits"].(map[string]any)["pids"] != 4096.0 {
		t.Errorf("config.json = %s (%v)", applied, err)
	}
	poll.Until(t, 20*time.Second, "SpecApplied is True", func() bool {
		res, err := nodes.Get(t.Context(), &nodesv1.GetRequest{Id: nodeID})
		if err != nil || res.GetNode().GetObservedGeneration() != gen {
			return false
		}
		for _, c := range res.GetNode().GetConditions() {
			if c.GetType() == fleet.ConditionSpecApplied {
				return c.GetStatus() == fleet.StatusTrue
			}
		}
		return false
	}, poll.Every(25*time.Millisecond), d.logReport())
}
