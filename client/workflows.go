package client

import (
	"context"

	workflowsv1 "github.com/better-compute/better-compute/gen/go/bettercompute/workflows/v1"
)

// WaitForWorkflow polls a workflow until it is finished ("succeeded", "failed" or "cancelled")
// or "paused", and returns it with its nodes, or returns ctx's error when ctx ends first. A
// workflow pauses when more nodes failed than its policy's max_failures (its counts say so) or
// when someone paused it; workflows/resume goes on.
func (c *Client) WaitForWorkflow(ctx context.Context, id string) (*workflowsv1.GetResponse, error) {
	return poll(ctx, func(ctx context.Context) (*workflowsv1.GetResponse, error) {
		return c.Workflows.Get(ctx, &workflowsv1.GetRequest{Id: id})
	}, func(res *workflowsv1.GetResponse) bool {
		return res.GetWorkflow().GetState() != "running"
	})
}
