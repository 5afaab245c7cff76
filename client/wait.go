package client

import (
	"context"
	"time"

	commandsv1 "github.com/better-compute/better-compute/gen/go/bettercompute/commands/v1"
	leasesv1 "github.com/better-compute/better-compute/gen/go/bettercompute/leases/v1"
)

// poll calls get until done says so, waiting 250 ms, then longer up to 5 s, between calls.
func poll[T any](ctx context.Context, get func(context.Context) (T, error), done func(T) bool) (T, error) {
	wait := 250 * time.Millisecond
	for {
		v, err := get(ctx)
		if err != nil || done(v) {
			return v, err
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return v, ctx.Err()
		case <-t.C:
		}
		wait = min(2*wait, 5*time.Second)
	}
}

// WaitForLease polls a lease until it is no longer pending (placed, or failed, released or
// expired) and returns it, or returns ctx's error when ctx ends first.
func (c *Client) WaitForLease(ctx context.Context, id string) (*leasesv1.Lease, error) {
	return poll(ctx, func(ctx context.Context) (*leasesv1.Lease, error) {
		res, err := c.Leases.Get(ctx, &leasesv1.GetRequest{Id: id})
		return res.GetLease(), err
	}, func(l *leasesv1.Lease) bool { return l.GetState() != leasesv1.LeaseState_LEASE_STATE_PENDING })
}

// WaitForCommand polls a command until it has finished (succeeded, failed, expired or
// cancelled) and returns it, or returns ctx's error when ctx ends first.
func (c *Client) WaitForCommand(ctx context.Context, id string) (*commandsv1.Command, error) {
	return poll(ctx, func(ctx context.Context) (*commandsv1.Command, error) {
		res, err := c.Commands.Get(ctx, &commandsv1.GetRequest{Id: id})
		return res.GetCommand(), err
	}, func(cmd *commandsv1.Command) bool {
		return cmd.GetState() >= commandsv1.CommandState_COMMAND_STATE_SUCCEEDED
	})
}
