package workflows

import (
	"context"
	"fmt"

	"github.com/google/uuid"

	"github.com/better-compute/better-compute/gen/db"
	"github.com/better-compute/better-compute/internal/command"
	"github.com/better-compute/better-compute/internal/event"
	"github.com/better-compute/better-compute/internal/fleet"
	"github.com/better-compute/better-compute/internal/workflow"
)

// setState moves the workflow to state with its event.
func (r *run) setState(ctx context.Context, state db.WorkflowState, reason string, c workflow.Counts) error {
	w, err := r.q.SetWorkflowState(ctx, db.SetWorkflowStateParams{TenantID: r.w.TenantID, ID: r.w.ID, State: state, Reason: reason})
	if err != nil {
		return fmt.Errorf("move workflow %s to %s: %w", r.w.ID, state, err)
	}
	r.w = w
	change := workflow.Change(w, c.Total, c.Failed)
	var ev event.Event
	switch state {
	case workflow.Paused:
		ev = event.WorkflowPaused{WorkflowChange: change}
	case workflow.Succeeded:
		ev = event.WorkflowSucceeded{WorkflowChange: change}
	case workflow.Failed:
		ev = event.WorkflowFailed{WorkflowChange: change}
	default:
		return nil
	}
	return event.Emit(ctx, r.q, w.TenantID, ev)
}

// Node events the controller emits.
const (
	nodeStarted = iota
	nodeSucceeded
	nodeFailed
)

func (r *run) nodeEvent(ctx context.Context, kind int, id uuid.UUID, hostname string, attempt int32, msg string) error {
	c := event.WorkflowNodeChange{WorkflowID: r.w.ID, NodeID: id, Hostname: hostname, Attempt: attempt, Message: msg}
	var ev event.Event
	switch kind {
	case nodeStarted:
		ev = event.WorkflowNodeStarted{WorkflowNodeChange: c}
	case nodeSucceeded:
		ev = event.WorkflowNodeSucceeded{WorkflowNodeChange: c}
	default:
		ev = event.WorkflowNodeFailed{WorkflowNodeChange: c}
	}
	return event.Emit(ctx, r.q, r.w.TenantID, ev)
}

// cancel cleans up after workflows/cancel: pending nodes are skipped; for nodes in their steps,
// a command not yet sent is cancelled and a node the workflow cordoned is uncordoned; then the
// workflow lets go of its nodes.
func (r *run) cancel(ctx context.Context) error {
	if _, err := r.q.SkipPendingWorkflowNodes(ctx, db.SkipPendingWorkflowNodesParams{
		WorkflowID: r.w.ID, Message: "the workflow was cancelled before the node's turn",
	}); err != nil {
		return fmt.Errorf("skip pending nodes of workflow %s: %w", r.w.ID, err)
	}
	nodes, err := r.q.WorkflowNodesInFlight(ctx, r.w.ID)
	if err != nil {
		return fmt.Errorf("read nodes of workflow %s: %w", r.w.ID, err)
	}
	for _, row := range nodes {
		n := &node{WorkflowNodesInFlightRow: row}
		if n.CommandID != nil && n.CommandState != nil && *n.CommandState == command.Pending {
			if _, err := r.q.CancelCommand(ctx, db.CancelCommandParams{TenantID: r.w.TenantID, ID: *n.CommandID}); err != nil && !isNoRows(err) {
				return fmt.Errorf("cancel command %s: %w", n.CommandID, err)
			}
		}
		if n.Cordoned && n.NodeState == fleet.StateCordoned && n.RevokedAt == nil {
			if err := r.moveNode(ctx, n, fleet.StateReady); err != nil {
				return err
			}
		}
		if err := r.q.SetWorkflowNodeStep(ctx, db.SetWorkflowNodeStepParams{
			WorkflowID: r.w.ID, NodeID: n.NodeID, Step: workflow.StepSkipped, CommandID: n.CommandID,
			Message: fmt.Sprintf("the workflow was cancelled during the %s step", n.Step),
		}); err != nil {
			return fmt.Errorf("skip node %s of workflow %s: %w", n.NodeID, r.w.ID, err)
		}
	}
	return r.q.ReleaseWorkflowNodes(ctx, r.w.ID)
}
