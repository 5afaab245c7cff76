package client_test

import (
	"fmt"
	"log"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"

	workflowsv1 "github.com/better-compute/better-compute/gen/go/bettercompute/workflows/v1"
)

// The rolling upgrade example client/README.md shows (c and ctx are example_test.go's); it is
// compiled with the tests, and TestREADMEShowsTheExamples checks that the README shows it as it
// is.

func Example_rollingUpgrade() {
	res, err := c.Workflows.Create(ctx, &workflowsv1.CreateRequest{
		Name:   "upgrade the GPU nodes to 1.4.0",
		Action: &workflowsv1.Action{Kind: &workflowsv1.Action_Upgrade{Upgrade: &workflowsv1.UpgradeAction{Version: "1.4.0"}}},
		Target: &workflowsv1.Target{LabelSelector: map[string]string{"role": "gpu"}},
		Policy: &workflowsv1.Policy{MaxParallel: 2, MinHealthy: durationpb.New(30 * time.Second)},
	})
	if err != nil {
		log.Fatal(err)
	}
	id := res.GetWorkflow().GetId()
	for retried := false; ; retried = true {
		got, err := c.WaitForWorkflow(ctx, id) // workflows/get until it is finished or paused
		if err != nil {
			log.Fatal(err)
		}
		w := got.GetWorkflow()
		if w.GetState() != "paused" {
			fmt.Println(w.GetState(), w.GetCounts().GetSucceeded(), "of", w.GetCounts().GetTotal(), "nodes upgraded")
			break
		}
		for _, n := range got.GetNodes() {
			if n.GetStep() == "failed" {
				fmt.Println(n.GetHostname(), "failed:", n.GetMessage())
			}
		}
		if retried {
			log.Fatalf("paused again: %s", w.GetReason())
		}
		// Paused (a node failed, max_failures being 0): start the failed nodes over, once.
		if _, err := c.Workflows.Resume(ctx, &workflowsv1.ResumeRequest{Id: id, RetryFailed: true}); err != nil {
			log.Fatal(err)
		}
	}
}
