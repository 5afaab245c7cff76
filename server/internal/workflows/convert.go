package workflows

import (
	"context"
	"fmt"
	"time"

	"github.com/google/uuid"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/better-compute/better-compute/gen/db"
	workflowsv1 "github.com/better-compute/better-compute/gen/go/bettercompute/workflows/v1"
	"github.com/better-compute/better-compute/internal/workflow"
)

// describe is one workflow in the API's form, with its counts.
func describe(ctx context.Context, q *db.Queries, w db.Workflow) (*workflowsv1.Workflow, error) {
	out, err := describeAll(ctx, q, w.TenantID, []db.Workflow{w})
	if err != nil {
		return nil, err
	}
	return out[0], nil
}

// describeAll is workflows in the API's form, with their counts read in one statement.
func describeAll(ctx context.Context, q *db.Queries, tenant uuid.UUID, rows []db.Workflow) ([]*workflowsv1.Workflow, error) {
	ids := make([]uuid.UUID, len(rows))
	for i, w := range rows {
		ids[i] = w.ID
	}
	counts, err := countsOf(ctx, q, tenant, ids)
	if err != nil {
		return nil, err
	}
	out := make([]*workflowsv1.Workflow, len(rows))
	for i, w := range rows {
		if out[i], err = toProto(w, counts[w.ID]); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// countsOf reads the node counts of workflows.
func countsOf(ctx context.Context, q *db.Queries, tenant uuid.UUID, ids []uuid.UUID) (map[uuid.UUID]workflow.Counts, error) {
	out := make(map[uuid.UUID]workflow.Counts, len(ids))
	if len(ids) == 0 {
		return out, nil
	}
	rows, err := q.WorkflowStepCounts(ctx, db.WorkflowStepCountsParams{TenantID: tenant, Ids: ids})
	if err != nil {
		return nil, fmt.Errorf("count workflow nodes: %w", err)
	}
	for _, r := range rows {
		c := out[r.WorkflowID]
		c.Add(r.Step, r.Nodes)
		out[r.WorkflowID] = c
	}
	return out, nil
}

func toProto(w db.Workflow, c workflow.Counts) (*workflowsv1.Workflow, error) {
	action, err := workflow.DecodeAction(w.Action)
	if err != nil {
		return nil, fmt.Errorf("workflow %s: %w", w.ID, err)
	}
	target, err := workflow.DecodeTarget(w.Target)
	if err != nil {
		return nil, fmt.Errorf("workflow %s: %w", w.ID, err)
	}
	p := workflow.PolicyOf(w)
	return &workflowsv1.Workflow{
		Id: w.ID.String(), TenantId: w.TenantID.String(), Name: w.Name, Action: action, Target: target,
		Policy: &workflowsv1.Policy{
			MaxParallel: p.MaxParallel, MaxFailures: p.MaxFailures, MinHealthy: durationpb.New(p.MinHealthy),
			DrainDeadline: durationpb.New(p.DrainDeadline), StepTimeout: durationpb.New(p.StepTimeout),
		},
		State: string(w.State), Reason: w.Reason,
		Counts: &workflowsv1.Counts{
			Total: c.Total, Pending: c.Pending, InProgress: c.InProgress, Succeeded: c.Succeeded, Failed: c.Failed, Skipped: c.Skipped,
		},
		Origin: w.Origin, CreatedBy: w.CreatedBy,
		CreateTime: timestamppb.New(w.CreatedAt), UpdateTime: timestamppb.New(w.UpdatedAt), FinishTime: ts(w.FinishedAt),
	}, nil
}

func nodeToProto(r db.ListWorkflowNodesRow) *workflowsv1.NodeProgress {
	out := &workflowsv1.NodeProgress{
		NodeId: r.NodeID.String(), Hostname: r.Hostname, Position: r.Position, Step: string(r.Step), Attempt: r.Attempt,
		Message: r.Message, AdmitTime: ts(r.AdmittedAt), StepTime: ts(r.StepAt), FinishTime: ts(r.FinishedAt),
	}
	if r.CommandID != nil {
		out.CommandId = r.CommandID.String()
	}
	return out
}

func ts(t *time.Time) *timestamppb.Timestamp {
	if t == nil {
		return nil
	}
	return timestamppb.New(*t)
}
