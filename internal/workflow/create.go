package workflow

import (
	"context"
	"fmt"

	"github.com/google/uuid"

	"github.com/better-compute/better-compute/gen/db"
	workflowsv1 "github.com/better-compute/better-compute/gen/go/bettercompute/workflows/v1"
	"github.com/better-compute/better-compute/internal/event"
)

// New is a workflow to create.
type New struct {
	TenantID  uuid.UUID
	Name      string
	Action    *workflowsv1.Action
	Target    *workflowsv1.Target
	Policy    Policy
	Paused    bool
	Origin    string
	CreatedBy string
	// NodeIDs are the nodes, in order; the caller resolved the target and checked that none is
	// in an open workflow (OpenWorkflowOfNodes) in the same transaction.
	NodeIDs []uuid.UUID
}

// Create inserts a workflow with its nodes and its workflow.created event, and queues it for the
// controller, in q's transaction. The caller wakes the controller after commit.
func Create(ctx context.Context, q *db.Queries, n New) (db.Workflow, error) {
	action, err := EncodeAction(n.Action)
	if err != nil {
		return db.Workflow{}, err
	}
	target, err := EncodeTarget(n.Target)
	if err != nil {
		return db.Workflow{}, err
	}
	state := Running
	if n.Paused {
		state = Paused
	}
	w, err := q.CreateWorkflow(ctx, db.CreateWorkflowParams{
		ID: uuid.Must(uuid.NewV7()), TenantID: n.TenantID, Name: n.Name, ActionType: ActionType(n.Action),
		Action: action, Target: target, Version: n.Action.GetUpgrade().GetVersion(),
		MaxParallel: n.Policy.MaxParallel, MaxFailures: n.Policy.MaxFailures,
		MinHealthyMs: n.Policy.MinHealthy.Milliseconds(), DrainDeadlineMs: n.Policy.DrainDeadline.Milliseconds(),
		StepTimeoutMs: n.Policy.StepTimeout.Milliseconds(), State: state, Origin: n.Origin, CreatedBy: n.CreatedBy,
	})
	if err != nil {
		return db.Workflow{}, fmt.Errorf("create workflow: %w", err)
	}
	if err := AddNodes(ctx, q, w, n.NodeIDs); err != nil {
		return db.Workflow{}, err
	}
	if err := event.Emit(ctx, q, w.TenantID, event.WorkflowCreated{WorkflowChange: Change(w, int32(len(n.NodeIDs)), 0)}); err != nil {
		return db.Workflow{}, err
	}
	return w, nil
}

// AddNodes appends nodes to a workflow and queues it for the controller, in q's transaction.
func AddNodes(ctx context.Context, q *db.Queries, w db.Workflow, ids []uuid.UUID) error {
	if len(ids) == 0 {
		return nil
	}
	if _, err := q.AddWorkflowNodes(ctx, db.AddWorkflowNodesParams{WorkflowID: w.ID, TenantID: w.TenantID, NodeIds: ids}); err != nil {
		return fmt.Errorf("add nodes to workflow %s: %w", w.ID, err)
	}
	return Enqueue(ctx, q, w.ID)
}

// Enqueue queues a workflow for the controller in q's transaction.
func Enqueue(ctx context.Context, q *db.Queries, id uuid.UUID) error {
	if err := q.EnqueueReconcile(ctx, db.EnqueueReconcileParams{Kind: Kind, Keys: []string{id.String()}}); err != nil {
		return fmt.Errorf("enqueue workflow %s: %w", id, err)
	}
	return nil
}

// Change is the payload of a workflow's events.
func Change(w db.Workflow, nodes, failed int32) event.WorkflowChange {
	return event.WorkflowChange{
		ID: w.ID, Name: w.Name, Action: w.ActionType, State: string(w.State), Reason: w.Reason, Nodes: nodes, Failed: failed,
	}
}
