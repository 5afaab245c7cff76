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

// How a workflow or a remediation is followed: one get a second, each bounded, giving up after a few
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
	return pollUntil(ctx,
		func(ctx context.Context) (*workflowsv1.GetResponse, error) {
			return c.Workflows.Get(ctx, &workflowsv1.GetRequest{Id: id})
		},
		func(res *workflowsv1.GetResponse) bool {
			p.show(res.GetWorkflow())
			return settled(res.GetWorkflow())
		},
		"follow workflow "+id, func() error { return stoppedFollowing(id) })
}

// pollUntil calls get every pollEvery, each call bounded by pollTimeout, and hands each answer to
// seen until seen says it settles; it returns that answer. It gives up after maxPollFailures
// failed calls in a row (each already retried by the client) or one that is not transient, with
// the error prefixed by what. When ctx ends first it returns the last answer (the zero T if none)
// and stopped's error. A Retry-After longer than pollEvery is waited for.
func pollUntil[T any](ctx context.Context, get func(context.Context) (T, error), seen func(T) bool, what string, stopped func() error) (T, error) {
	tick := time.NewTicker(pollEvery)
	defer tick.Stop()
	var last T
	failures := 0
	for {
		callCtx, cancel := context.WithTimeout(ctx, pollTimeout)
		res, err := get(callCtx)
		cancel()
		switch {
		case ctx.Err() != nil:
			return last, stopped()
		case err != nil:
			failures++
			if failures >= maxPollFailures || !transient(err) {
				return last, fmt.Errorf("%s: %w", what, err)
			}
		default:
			failures = 0
			last = res
			if seen(res) {
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
			return last, stopped()
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
