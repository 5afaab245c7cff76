package client_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/better-compute/better-compute/client"
	commandsv1 "github.com/better-compute/better-compute/gen/go/bettercompute/commands/v1"
	daemonv1 "github.com/better-compute/better-compute/gen/go/bettercompute/daemon/v1"
	leasesv1 "github.com/better-compute/better-compute/gen/go/bettercompute/leases/v1"
	nodesv1 "github.com/better-compute/better-compute/gen/go/bettercompute/nodes/v1"
)

// The examples client/README.md shows; they are compiled with the tests.

var (
	ctx            = context.Background()
	c              = client.New(os.Getenv("BETTER_COMPUTE_URL"), client.WithAPIKey(os.Getenv("BETTER_COMPUTE_API_KEY")))
	poolID, nodeID = os.Getenv("POOL_ID"), os.Getenv("NODE_ID")
)

func Example_listNodes() {
	res, err := c.Nodes.List(ctx, &nodesv1.ListRequest{})
	if err != nil {
		log.Fatal(err)
	}
	for _, n := range res.GetNodes() {
		fmt.Println(n.GetHostname(), n.GetState(), n.GetOnline())
	}
}

func Example_createLease() {
	res, err := c.Leases.Create(ctx, &leasesv1.CreateRequest{PoolId: poolID, Gpus: 2, Duration: durationpb.New(time.Hour)})
	if err != nil {
		log.Fatal(err)
	}
	lease, err := c.WaitForLease(ctx, res.GetLease().GetId())
	if err != nil || lease.GetState() != leasesv1.LeaseState_LEASE_STATE_PLACED {
		log.Fatal(err, lease.GetState(), lease.GetReason())
	}
	for _, a := range lease.GetAllocations() {
		fmt.Println(a.GetHostname(), "GPU", a.GetGpuIndex())
	}
}

func Example_runCommand() {
	res, err := c.Commands.Create(ctx, &commandsv1.CreateRequest{NodeId: nodeID, Payload: &commandsv1.CreateRequest_Exec{
		Exec: &daemonv1.ExecPayload{Path: "/usr/bin/nvidia-smi", Args: []string{"-L"}},
	}})
	if err != nil {
		log.Fatal(err)
	}
	cmd, err := c.WaitForCommand(ctx, res.GetCommands()[0].GetId())
	if err != nil || cmd.GetState() != commandsv1.CommandState_COMMAND_STATE_SUCCEEDED {
		log.Fatal(err, cmd.GetState(), cmd.GetError())
	}
	fmt.Print(cmd.GetResult().GetFields()["stdout"].GetStringValue())
}
