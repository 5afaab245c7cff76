package workflows

import (
	"context"
	"fmt"
	"time"

	"github.com/better-compute/better-compute/gen/db"
	"github.com/better-compute/better-compute/internal/capacity"
	"github.com/better-compute/better-compute/internal/command"
	"github.com/better-compute/better-compute/internal/event"
	"github.com/better-compute/better-compute/internal/fleet"
	"github.com/better-compute/better-compute/internal/workflow"
)

// node is a node in its steps, as the run changes it; the run writes it back once.
type node struct {
	db.WorkflowNodesInFlightRow
	// stepStart is when the current step began (now, for a step entered in this run).
	stepStart time.Time
}

// advance moves one node through as many steps as what is recorded allows, and records where
// it got to.
func (r *run) advance(ctx context.Context, row db.WorkflowNodesInFlightRow) error {
	n := &node{WorkflowNodesInFlightRow: row, stepStart: r.now}
	if row.StepAt != nil {
		n.stepStart = *row.StepAt
	}
	before := row
	for range 8 { // at most every step once
		from := n.Step
		if err := r.step(ctx, n); err != nil {
			return fmt.Errorf("workflow %s, node %s, step %s: %w", r.w.ID, n.NodeID, from, err)
		}
		if n.Step == from || !workflow.InProgress(n.Step) {
			break
		}
		n.stepStart = r.now
	}
	if n.Step == before.Step && n.Message == before.Message && n.Cordoned == before.Cordoned &&
		equalPtr(n.CommandID, before.CommandID) && equalPtr(n.HealthySince, before.HealthySince) {
		return nil
	}
	if err := r.q.SetWorkflowNodeStep(ctx, db.SetWorkflowNodeStepParams{
		WorkflowID: r.w.ID, NodeID: n.NodeID, Step: n.Step, Message: n.Message,
		CommandID: n.CommandID, Cordoned: n.Cordoned, HealthySince: n.HealthySince,
	}); err != nil {
		return fmt.Errorf("record step %s of node %s in workflow %s: %w", n.Step, n.NodeID, r.w.ID, err)
	}
	switch n.Step {
	case workflow.StepSucceeded:
		return r.nodeEvent(ctx, nodeSucceeded, n.NodeID, n.Hostname, n.Attempt, n.Message)
	case workflow.StepFailed:
		return r.nodeEvent(ctx, nodeFailed, n.NodeID, n.Hostname, n.Attempt, n.Message)
	}
	return nil
}

// step does what the node's current step calls for, moving it on when it is done.
func (r *run) step(ctx context.Context, n *node) error {
	if n.RevokedAt != nil || n.NodeState == db.NodeStateRetired {
		r.fail(n, "the node was retired or revoked")
		return nil
	}
	switch n.Step {
	case workflow.StepCordon:
		return r.cordon(ctx, n)
	case workflow.StepDrain:
		return r.drain(ctx, n)
	case workflow.StepAct:
		return r.act(ctx, n)
	case workflow.StepVerify:
		r.verify(n)
	case workflow.StepUncordon:
		return r.uncordon(ctx, n)
	}
	return nil
}

// cordon takes a ready (or joining) node out of service; a node already out of service (an
// operator cordoned or drained it) is left as it is, and is not uncordoned at the end either.
func (r *run) cordon(ctx context.Context, n *node) error {
	if n.NodeState == fleet.StateReady || n.NodeState == fleet.StateJoining {
		if err := r.moveNode(ctx, n, fleet.StateCordoned); err != nil {
			return err
		}
		n.Cordoned = true
	}
	n.Step, n.Message = workflow.StepDrain, "cordoned"
	return nil
}

// drain waits for the node's leases to end, and ends them (as failed, with the reason) once the
// drain deadline passed.
func (r *run) drain(ctx context.Context, n *node) error {
	ids, err := r.q.NodeActiveLeaseIDs(ctx, n.NodeID)
	if err != nil {
		return fmt.Errorf("read leases on node %s: %w", n.NodeID, err)
	}
	if len(ids) > 0 {
		deadline := n.stepStart.Add(r.policy.DrainDeadline)
		if left := deadline.Sub(r.now); left > 0 {
			n.Message = fmt.Sprintf("waiting for %d leases to end, until %s", len(ids), deadline.UTC().Format(time.RFC3339))
			r.wait(min(r.poll, left))
			return nil
		}
		reason := fmt.Sprintf("node %s drained by workflow %s", n.Hostname, r.w.ID)
		var ev event.Batch
		if _, err := capacity.EndLeases(ctx, r.q, ids, capacity.LeaseFailed, reason, nil, ev.Add); err != nil {
			return err
		}
		if err := ev.Emit(ctx, r.q); err != nil {
			return err
		}
	}
	n.Step, n.Message = workflow.StepAct, "drained"
	return nil
}

// act sends the action's command, once per attempt (its idempotency key names the attempt).
func (r *run) act(ctx context.Context, n *node) error {
	typ, payload, ok := workflow.Command(r.action)
	if !ok || r.upToDate(n) {
		n.Step, n.Message = workflow.StepVerify, "nothing to send"
		return nil
	}
	b, err := command.Encode(payload)
	if err != nil {
		return err
	}
	c, isNew, err := command.Create(ctx, r.q, r.w.TenantID, n.NodeID, typ, workflow.CommandKey(r.w.ID, n.Attempt), b, r.policy.StepTimeout)
	if err != nil {
		return err
	}
	if isNew {
		r.commanded = append(r.commanded, n.NodeID)
	}
	n.CommandID, n.CommandState, n.CommandError, n.CommandFinishedAt, n.CommandSentAt = &c.ID, &c.State, &c.Error, c.FinishedAt, c.SentAt
	n.Step, n.Message = workflow.StepVerify, fmt.Sprintf("sent %s command %s", typ, c.ID)
	return nil
}

// upToDate reports whether an upgrade has nothing to do on the node: its daemon already runs
// the version.
func (r *run) upToDate(n *node) bool {
	v := r.action.GetUpgrade().GetVersion()
	return v != "" && n.DaemonVersion == v
}

// verify waits for the command's outcome and for what it should have changed on the node.
func (r *run) verify(n *node) {
	if r.timedOut(n, 0) {
		r.fail(n, fmt.Sprintf("not done within the step timeout (%s): %s", r.policy.StepTimeout, n.Message))
		return
	}
	if n.CommandID != nil && n.CommandState != nil {
		switch *n.CommandState {
		case command.Pending, command.Sent, command.Acked:
			n.Message = fmt.Sprintf("command %s is %s", n.CommandID, *n.CommandState)
			r.wait(r.untilTimeout(n, 0)) // its result wakes the run
			return
		case command.Succeeded:
		default:
			msg := fmt.Sprintf("command %s %s", n.CommandID, *n.CommandState)
			if n.CommandError != nil && *n.CommandError != "" {
				msg += ": " + *n.CommandError
			}
			r.fail(n, msg)
			return
		}
	}
	switch workflow.ActionType(r.action) {
	case workflow.ActionUpgrade:
		if !r.upToDate(n) || !r.connected(n) {
			n.Message = fmt.Sprintf("waiting for the daemon to report version %s (it reports %s)", r.action.GetUpgrade().GetVersion(), orNone(n.DaemonVersion))
			r.wait(min(r.poll, r.untilTimeout(n, 0)))
			return
		}
	case workflow.ActionReboot:
		// The session must have started after the command was last sent: the daemon took it in
		// the session before the reboot (its result may come before or after it is back).
		if !r.connected(n) || n.CommandSentAt == nil || !n.SessionConnectedAt.After(*n.CommandSentAt) {
			n.Message = "waiting for the node to come back after the reboot"
			r.wait(min(r.poll, r.untilTimeout(n, 0)))
			return
		}
	}
	n.Step, n.Message = workflow.StepUncordon, "verified"
}

// uncordon puts back in service a node the workflow cordoned, then waits until it has been
// healthy (online, and on the version for an upgrade) for min_healthy.
func (r *run) uncordon(ctx context.Context, n *node) error {
	if n.Cordoned {
		if n.NodeState == fleet.StateCordoned {
			if err := r.moveNode(ctx, n, fleet.StateReady); err != nil {
				return err
			}
		}
		n.Cordoned = false
	}
	healthy := n.Online && r.connected(n) && (workflow.ActionType(r.action) != workflow.ActionUpgrade || r.upToDate(n))
	if !healthy {
		n.HealthySince = nil
		if r.timedOut(n, r.policy.MinHealthy) {
			r.fail(n, fmt.Sprintf("not healthy after uncordon within the step timeout (%s): online %t, version %s", r.policy.StepTimeout, n.Online, orNone(n.DaemonVersion)))
			return nil
		}
		n.Message = "waiting for the node to be online"
		r.wait(r.poll)
		return nil
	}
	if n.HealthySince == nil {
		now := r.now
		n.HealthySince = &now
	}
	if left := n.HealthySince.Add(r.policy.MinHealthy).Sub(r.now); left > 0 {
		n.Message = fmt.Sprintf("healthy since %s; counts until min_healthy (%s) passed", n.HealthySince.UTC().Format(time.RFC3339), r.policy.MinHealthy)
		r.wait(min(r.poll, left))
		return nil
	}
	n.Step, n.Message = workflow.StepSucceeded, "done"
	return nil
}

// connected reports whether the node holds a session now.
func (r *run) connected(n *node) bool { return n.SessionConnectedAt != nil }

// timedOut reports whether the act, verify and uncordon steps (with extra) took longer than the
// step timeout.
func (r *run) timedOut(n *node, extra time.Duration) bool { return r.untilTimeout(n, extra) <= 0 }

// untilTimeout is how long is left of the step timeout (with extra).
func (r *run) untilTimeout(n *node, extra time.Duration) time.Duration {
	start := r.now
	if n.ActAt != nil {
		start = *n.ActAt
	}
	return start.Add(r.policy.StepTimeout + extra).Sub(r.now)
}

// fail ends the node's attempt as failed. A node the workflow cordoned stays cordoned, for an
// operator to look at; a retry (workflows/resume with retry_failed) takes it from there.
func (r *run) fail(n *node, msg string) {
	n.Step, n.Message = workflow.StepFailed, msg
}

// moveNode changes a node's life-cycle state as nodes/cordon and nodes/uncordon do: the state,
// its event, and the lifecycle reconciler queued to update the Schedulable condition.
func (r *run) moveNode(ctx context.Context, n *node, to db.NodeState) error {
	from := n.NodeState
	if _, err := r.q.SetNodeState(ctx, db.SetNodeStateParams{
		TenantID: r.w.TenantID, ID: n.NodeID, State: to, FromStates: []string{string(from)},
	}); err != nil {
		return fmt.Errorf("move node %s from %s to %s: %w", n.NodeID, from, to, err)
	}
	t := event.NodeTransition{ID: n.NodeID, Hostname: n.Hostname, From: string(from), To: string(to)}
	var ev event.Event = event.NodeCordoned{NodeTransition: t}
	if to == fleet.StateReady {
		ev = event.NodeUncordoned{NodeTransition: t}
	}
	if err := event.Emit(ctx, r.q, r.w.TenantID, ev); err != nil {
		return err
	}
	n.NodeState = to
	return fleet.Enqueue(ctx, r.q, fleet.KindLifecycle, n.NodeID)
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}

func equalPtr[T comparable](a, b *T) bool {
	if a == nil || b == nil {
		return a == b
	}
	return *a == *b
}
