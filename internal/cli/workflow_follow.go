package cli

import (
	"context"
	"fmt"
	"time"

	"connectrpc.com/connect"

	"github.com/better-compute/better-compute/client"
	workflowsv1 "github.com/better-compute/better-compute/gen/go/bettercompute/workflows/v1"
	"github.com/better-compute/better-compute/internal/workflow"
)

// How a workflow is followed: one workflows/get a second, each bounded, giving up after a few
// failed ones in a row (each already retried by the client).
const (
	pollEvery       = time.Second
	pollTimeout     = 30 * time.Second
	maxPollFailures = 5
)

// pausedForFailures reports whether w is paused because more of its nodes failed than its
// policy tolerates (rather than by someone, or created paused).
func pausedForFailures(w *workflowsv1.Workflow) bool {
	return w.GetState() == string(workflow.Paused) && w.GetCounts().GetFailed() > w.GetPolicy().GetMaxFailures()
}

// settled reports whether following w can stop: it finished, or it paused for failures and
// waits for someone to resume or cancel it. A workflow paused by someone is followed on.
func settled(w *workflowsv1.Workflow) bool {
	switch w.GetState() {
	case string(workflow.Succeeded), string(workflow.Failed), string(workflow.Cancelled):
		return true
	}
	return pausedForFailures(w)
}

// followWorkflow polls workflow id until it settles, showing each answer on p, and returns the
// last answer. When ctx ends first it returns the last answer (nil if none) and an error that
// says the workflow goes on.
func followWorkflow(ctx context.Context, c *client.Client, id string, p *progressView) (*workflowsv1.GetResponse, error) {
	defer p.end()
	tick := time.NewTicker(pollEvery)
	defer tick.Stop()
	var last *workflowsv1.GetResponse
	failures := 0
	for {
		callCtx, cancel := context.WithTimeout(ctx, pollTimeout)
		res, err := c.Workflows.Get(callCtx, &workflowsv1.GetRequest{Id: id})
		cancel()
		switch {
		case ctx.Err() != nil:
			return last, stoppedFollowing(id)
		case err != nil:
			failures++
			if failures >= maxPollFailures || !transient(err) {
				return last, fmt.Errorf("follow workflow %s: %w", id, err)
			}
		default:
			failures = 0
			last = res
			p.show(res.GetWorkflow())
			if settled(res.GetWorkflow()) {
				return res, nil
			}
		}
		next, stop := tick.C, func() bool { return false }
		if after, ok := client.RetryAfter(err); ok && after > pollEvery {
			// The API asked for a longer wait than the client's retries give (a quota's minute).
			t := time.NewTimer(after)
			next, stop = t.C, t.Stop
		}
		select {
		case <-ctx.Done():
			stop()
			return last, stoppedFollowing(id)
		case <-next:
		}
	}
}

func stoppedFollowing(id string) error {
	return fmt.Errorf("stopped following workflow %s, which goes on (better-compute workflow status %s --watch)", id, id)
}

// transient reports whether a failed poll is worth another one.
func transient(err error) bool {
	switch connect.CodeOf(err) {
	case connect.CodeUnavailable, connect.CodeDeadlineExceeded, connect.CodeResourceExhausted, connect.CodeAborted, connect.CodeUnknown:
		return true
	}
	return false
}

// outcome is how a settled workflow ends the command: nil when it succeeded, exit code 3 when it
// paused for failures, 1 otherwise.
func outcome(w *workflowsv1.Workflow) error {
	id := w.GetId()
	switch {
	case w.GetState() == string(workflow.Succeeded):
		return nil
	case pausedForFailures(w):
		return &ExitError{Code: ExitPaused, Err: fmt.Errorf("workflow %s paused: %s; resume it with `better-compute workflow resume %s --retry-failed` (or a larger --max-failures), or cancel it",
			id, orDash(w.GetReason()), id)}
	}
	return &ExitError{Code: 1, Err: fmt.Errorf("workflow %s %s: %s", id, w.GetState(), orDash(w.GetReason()))}
}

func orDash(s string) string {
	if s == "" {
		return "—"
	}
	return s
}
