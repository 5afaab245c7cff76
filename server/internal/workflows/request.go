package workflows

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/google/uuid"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/better-compute/better-compute/gen/db"
	workflowsv1 "github.com/better-compute/better-compute/gen/go/bettercompute/workflows/v1"
	"github.com/better-compute/better-compute/internal/apierr"
	"github.com/better-compute/better-compute/internal/command"
	"github.com/better-compute/better-compute/internal/fleet"
	"github.com/better-compute/better-compute/internal/workflow"
)

// validateAction checks the action, naming the bad field under "action".
func validateAction(a *workflowsv1.Action) error {
	if a == nil {
		return apierr.InvalidArgument("action", "required: one of upgrade, reboot, drain, configure, exec, gpuReset and diagnose")
	}
	if err := workflow.ValidateAction(a); err != nil {
		if fe, ok := errors.AsType[*command.FieldError](err); ok {
			return apierr.InvalidArgument("action."+fe.Field, "%s", fe.Msg)
		}
		return apierr.InvalidArgument("action", "%v", err)
	}
	return nil
}

// validateTarget checks what of the action depends on the target (a gpuReset names one node's
// GPU), naming the field.
func validateTarget(a *workflowsv1.Action, t *workflowsv1.Target) error {
	err := workflow.ValidateTarget(a, t)
	if fe, ok := errors.AsType[*command.FieldError](err); ok {
		return apierr.InvalidArgument(fe.Field, "%s", fe.Msg)
	}
	return err
}

// parsePolicy applies the policy's defaults and checks its bounds.
func parsePolicy(p *workflowsv1.Policy) (workflow.Policy, error) {
	out := workflow.Policy{
		MaxParallel: max(p.GetMaxParallel(), 1), MaxFailures: p.GetMaxFailures(),
		DrainDeadline: workflow.DefaultDrainDeadline, StepTimeout: workflow.DefaultStepTimeout,
	}
	if p.GetMaxParallel() < 0 || p.GetMaxParallel() > workflow.MaxParallelLimit {
		return out, apierr.InvalidArgument("policy.max_parallel", "must be 1 to %d", workflow.MaxParallelLimit)
	}
	if p.GetMaxFailures() < 0 {
		return out, apierr.InvalidArgument("policy.max_failures", "must not be negative")
	}
	var errs []error
	dur := func(field string, d *durationpb.Duration, lo, hi time.Duration, into *time.Duration) {
		if d == nil {
			return
		}
		if err := d.CheckValid(); err != nil || d.AsDuration() < lo || d.AsDuration() > hi {
			errs = append(errs, apierr.InvalidArgument("policy."+field, "must be %s to %s", lo, hi))
			return
		}
		*into = d.AsDuration()
	}
	dur("min_healthy", p.GetMinHealthy(), 0, workflow.MaxMinHealthy, &out.MinHealthy)
	dur("drain_deadline", p.GetDrainDeadline(), 0, workflow.MaxDrainDeadline, &out.DrainDeadline)
	dur("step_timeout", p.GetStepTimeout(), workflow.MinStepTimeout, workflow.MaxStepTimeout, &out.StepTimeout)
	return out, apierr.Join(errs...)
}

// parseTarget checks that exactly one kind of target is set, and parses node ids.
func parseTarget(t *workflowsv1.Target) ([]uuid.UUID, error) {
	set := 0
	if t.GetPoolId() != "" {
		set++
		if _, err := apierr.ParseID("target.pool_id", t.GetPoolId()); err != nil {
			return nil, err
		}
	}
	if len(t.GetLabelSelector()) > 0 {
		set++
		if err := fleet.ValidateLabels("target.label_selector", t.GetLabelSelector()); err != nil {
			return nil, err
		}
	}
	var ids []uuid.UUID
	if len(t.GetNodeIds()) > 0 {
		set++
		if len(t.GetNodeIds()) > workflow.MaxNodes {
			return nil, apierr.InvalidArgument("target.node_ids", "at most %d nodes", workflow.MaxNodes)
		}
		for i, raw := range t.GetNodeIds() {
			id, err := apierr.ParseID(fmt.Sprintf("target.node_ids[%d]", i), raw)
			if err != nil {
				return nil, err
			}
			if slices.Contains(ids, id) {
				return nil, apierr.InvalidArgument(fmt.Sprintf("target.node_ids[%d]", i), "node %s is named twice", id)
			}
			ids = append(ids, id)
		}
	}
	if set != 1 {
		return nil, apierr.InvalidArgument("target", "set exactly one of pool_id, label_selector and node_ids")
	}
	return ids, nil
}

// resolveTarget takes the target's live nodes, in the workflow's order: node ids as given, a
// pool's members and a selector's matches oldest first.
func resolveTarget(ctx context.Context, q *db.Queries, tenant uuid.UUID, t *workflowsv1.Target, ids []uuid.UUID) ([]uuid.UUID, error) {
	var (
		nodes []uuid.UUID
		err   error
	)
	switch {
	case len(ids) > 0:
		live, err := q.WorkflowTargetIDs(ctx, db.WorkflowTargetIDsParams{TenantID: tenant, Ids: ids})
		if err != nil {
			return nil, fmt.Errorf("read target nodes: %w", err)
		}
		for i, id := range ids {
			if !slices.Contains(live, id) {
				return nil, apierr.FailedPreconditionField(fmt.Sprintf("target.node_ids[%d]", i), "node %s is not a live node of the tenant (it does not exist, or is retired or revoked)", id)
			}
		}
		return ids, nil
	case t.GetPoolId() != "":
		pool := uuid.MustParse(t.GetPoolId())
		if _, err := q.GetPool(ctx, db.GetPoolParams{TenantID: tenant, ID: pool}); err != nil {
			return nil, apierr.NotFoundIfNoRows(err, "pool %s not found", pool)
		}
		nodes, err = q.WorkflowTargetPool(ctx, db.WorkflowTargetPoolParams{TenantID: tenant, PoolID: pool, Lim: workflow.MaxNodes + 1})
	default:
		sel, _ := json.Marshal(t.GetLabelSelector())
		nodes, err = q.WorkflowTargetSelector(ctx, db.WorkflowTargetSelectorParams{TenantID: tenant, Selector: sel, Lim: workflow.MaxNodes + 1})
	}
	if err != nil {
		return nil, fmt.Errorf("read target nodes: %w", err)
	}
	switch {
	case len(nodes) == 0:
		return nil, apierr.FailedPreconditionField("target", "no live node matches the target")
	case len(nodes) > workflow.MaxNodes:
		return nil, apierr.FailedPreconditionField("target", "more than %d nodes match the target; split it", workflow.MaxNodes)
	}
	return nodes, nil
}

// parseReason bounds a pause's or cancel's reason.
func parseReason(s string) (string, error) {
	if len(s) > workflow.MaxReason {
		return "", apierr.InvalidArgument("reason", "at most %d bytes", workflow.MaxReason)
	}
	return s, nil
}
