// Package workflows implements bettercompute.workflows.v1.WorkflowsService: creating rolling
// operations over a tenant's nodes, reading their progress, and pausing, resuming and cancelling
// them. The API only records intent (in one admission transaction with its audit row and event)
// and wakes the controller (workers/internal/workflows), which does every step on the nodes.
package workflows

import (
	"context"
	"fmt"
	"slices"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"google.golang.org/protobuf/proto"

	"github.com/better-compute/better-compute/gen/db"
	workflowsv1 "github.com/better-compute/better-compute/gen/go/bettercompute/workflows/v1"
	"github.com/better-compute/better-compute/gen/go/bettercompute/workflows/v1/workflowsv1connect"
	"github.com/better-compute/better-compute/internal/admission"
	"github.com/better-compute/better-compute/internal/apierr"
	"github.com/better-compute/better-compute/internal/auth"
	"github.com/better-compute/better-compute/internal/event"
	"github.com/better-compute/better-compute/internal/page"
	"github.com/better-compute/better-compute/internal/quota"
	"github.com/better-compute/better-compute/internal/scrub"
	"github.com/better-compute/better-compute/internal/workflow"
)

// Service answers WorkflowsService calls.
type Service struct {
	pool  *pgxpool.Pool
	admit *admission.Admitter
}

var _ workflowsv1connect.WorkflowsServiceHandler = (*Service)(nil)

// New returns the service.
func New(pool *pgxpool.Pool, admit *admission.Admitter) *Service {
	return &Service{pool: pool, admit: admit}
}

// Create takes the target's nodes and starts a workflow over them.
func (s *Service) Create(ctx context.Context, req *workflowsv1.CreateRequest) (*workflowsv1.CreateResponse, error) {
	if len(req.GetName()) > workflow.MaxName {
		return nil, apierr.InvalidArgument("name", "at most %d bytes", workflow.MaxName)
	}
	if err := validateAction(req.GetAction()); err != nil {
		return nil, err
	}
	policy, err := parsePolicy(req.GetPolicy())
	if err != nil {
		return nil, err
	}
	ids, err := parseTarget(req.GetTarget())
	if err != nil {
		return nil, err
	}
	if err := validateTarget(req.GetAction(), req.GetTarget()); err != nil {
		return nil, err
	}
	p := auth.Caller(ctx)
	return admission.Do(ctx, s.admit, req, func(ctx context.Context, tx *admission.Tx) (*workflowsv1.CreateResponse, error) {
		if err := quota.Check(ctx, tx.Q, p.TenantID, quota.Workflows, 1); err != nil {
			return nil, err
		}
		nodes, err := resolveTarget(ctx, tx.Q, p.TenantID, req.GetTarget(), ids)
		if err != nil {
			return nil, err
		}
		busy, err := tx.Q.OpenWorkflowOfNodes(ctx, db.OpenWorkflowOfNodesParams{TenantID: p.TenantID, NodeIds: nodes})
		if err != nil {
			return nil, fmt.Errorf("find nodes in other workflows: %w", err)
		}
		if len(busy) > 0 {
			return nil, apierr.FailedPreconditionField("target", "node %s is in workflow %s, which has not finished (and %d more nodes are in unfinished workflows); cancel it or wait",
				busy[0].NodeID, busy[0].WorkflowID, len(busy)-1)
		}
		w, err := workflow.Create(ctx, tx.Q, workflow.New{
			TenantID: p.TenantID, Name: scrub.Truncate(req.GetName(), workflow.MaxName), Action: req.GetAction(), Target: req.GetTarget(),
			Policy: policy, Paused: req.GetPaused(), Origin: workflow.OriginAPI, CreatedBy: p.Name, NodeIDs: nodes,
		})
		if err != nil {
			return nil, err
		}
		tx.Wake(workflow.Kind)
		tx.Target("workflow", w.ID)
		pw, err := describe(ctx, tx.Q, w)
		if err != nil {
			return nil, err
		}
		return &workflowsv1.CreateResponse{Workflow: pw}, nil
	})
}

// Get returns a workflow with its nodes.
func (s *Service) Get(ctx context.Context, req *workflowsv1.GetRequest) (*workflowsv1.GetResponse, error) {
	id, err := apierr.ParseID("id", req.GetId())
	if err != nil {
		return nil, err
	}
	p := auth.Caller(ctx)
	q := db.New(s.pool)
	w, err := q.GetWorkflow(ctx, db.GetWorkflowParams{TenantID: p.TenantID, ID: id})
	if err != nil {
		return nil, apierr.NotFoundIfNoRows(err, "workflow %s not found", id)
	}
	pw, err := describe(ctx, q, w)
	if err != nil {
		return nil, err
	}
	rows, err := q.ListWorkflowNodes(ctx, db.ListWorkflowNodesParams{TenantID: p.TenantID, WorkflowID: id, Lim: workflow.MaxNodes})
	if err != nil {
		return nil, fmt.Errorf("read nodes of workflow %s: %w", id, err)
	}
	nodes := make([]*workflowsv1.NodeProgress, len(rows))
	for i, r := range rows {
		nodes[i] = nodeToProto(r)
	}
	return &workflowsv1.GetResponse{Workflow: pw, Nodes: nodes}, nil
}

// List pages through the tenant's workflows, newest first.
func (s *Service) List(ctx context.Context, req *workflowsv1.ListRequest) (*workflowsv1.ListResponse, error) {
	size, err := page.Size(req.GetPageSize())
	if err != nil {
		return nil, err
	}
	before, err := page.Parse[*uuid.UUID](req.GetPageToken(), nil)
	if err != nil {
		return nil, err
	}
	states := req.GetStates()
	for i, st := range states {
		if !slices.Contains(db.AllWorkflowStateValues(), db.WorkflowState(st)) {
			return nil, apierr.InvalidArgument(fmt.Sprintf("states[%d]", i), "%q is not a state: running, paused, succeeded, failed or cancelled", st)
		}
	}
	if states == nil {
		states = []string{}
	}
	p := auth.Caller(ctx)
	q := db.New(s.pool)
	rows, err := q.ListWorkflows(ctx, db.ListWorkflowsParams{TenantID: p.TenantID, Before: before, States: states, Lim: size + 1})
	if err != nil {
		return nil, fmt.Errorf("list workflows: %w", err)
	}
	rows, next := page.Next(rows, size, func(w db.Workflow) *uuid.UUID { return &w.ID })
	out, err := describeAll(ctx, q, p.TenantID, rows)
	if err != nil {
		return nil, err
	}
	return &workflowsv1.ListResponse{Workflows: out, NextPageToken: next}, nil
}

// Pause stops admitting nodes.
func (s *Service) Pause(ctx context.Context, req *workflowsv1.PauseRequest) (*workflowsv1.PauseResponse, error) {
	reason, err := parseReason(req.GetReason())
	if err != nil {
		return nil, err
	}
	if reason == "" {
		reason = "paused by " + auth.Caller(ctx).Name
	}
	w, err := s.steer(ctx, req, req.GetId(), func(ctx context.Context, tx *admission.Tx, w db.Workflow) (db.Workflow, event.Event, error) {
		if w.State == workflow.Paused {
			return w, nil, nil
		}
		w, err := tx.Q.SetWorkflowState(ctx, db.SetWorkflowStateParams{TenantID: w.TenantID, ID: w.ID, State: workflow.Paused, Reason: reason})
		return w, event.WorkflowPaused{WorkflowChange: workflow.Change(w, 0, 0)}, err
	})
	if err != nil {
		return nil, err
	}
	return &workflowsv1.PauseResponse{Workflow: w}, nil
}

// Resume admits nodes again, optionally retrying failed ones or tolerating more failures.
func (s *Service) Resume(ctx context.Context, req *workflowsv1.ResumeRequest) (*workflowsv1.ResumeResponse, error) {
	if req.MaxFailures != nil && req.GetMaxFailures() < 0 {
		return nil, apierr.InvalidArgument("max_failures", "must not be negative")
	}
	w, err := s.steer(ctx, req, req.GetId(), func(ctx context.Context, tx *admission.Tx, w db.Workflow) (db.Workflow, event.Event, error) {
		changed := w.State != workflow.Running
		if req.MaxFailures != nil && req.GetMaxFailures() != w.MaxFailures {
			if err := tx.Q.SetWorkflowMaxFailures(ctx, db.SetWorkflowMaxFailuresParams{TenantID: w.TenantID, ID: w.ID, MaxFailures: req.GetMaxFailures()}); err != nil {
				return w, nil, fmt.Errorf("set max_failures of workflow %s: %w", w.ID, err)
			}
			changed = true
		}
		if req.GetRetryFailed() {
			n, err := tx.Q.RetryFailedWorkflowNodes(ctx, db.RetryFailedWorkflowNodesParams{TenantID: w.TenantID, WorkflowID: w.ID})
			if err != nil {
				return w, nil, fmt.Errorf("retry failed nodes of workflow %s: %w", w.ID, err)
			}
			changed = changed || n > 0
		}
		if !changed {
			return w, nil, nil
		}
		w, err := tx.Q.SetWorkflowState(ctx, db.SetWorkflowStateParams{TenantID: w.TenantID, ID: w.ID, State: workflow.Running, Reason: ""})
		return w, event.WorkflowResumed{WorkflowChange: workflow.Change(w, 0, 0)}, err
	})
	if err != nil {
		return nil, err
	}
	return &workflowsv1.ResumeResponse{Workflow: w}, nil
}

// Cancel ends a workflow; the controller cleans up after it.
func (s *Service) Cancel(ctx context.Context, req *workflowsv1.CancelRequest) (*workflowsv1.CancelResponse, error) {
	reason, err := parseReason(req.GetReason())
	if err != nil {
		return nil, err
	}
	if reason == "" {
		reason = "cancelled by " + auth.Caller(ctx).Name
	}
	w, err := s.steer(ctx, req, req.GetId(), func(ctx context.Context, tx *admission.Tx, w db.Workflow) (db.Workflow, event.Event, error) {
		w, err := tx.Q.SetWorkflowState(ctx, db.SetWorkflowStateParams{TenantID: w.TenantID, ID: w.ID, State: workflow.Cancelled, Reason: reason})
		return w, event.WorkflowCancelled{WorkflowChange: workflow.Change(w, 0, 0)}, err
	})
	if err != nil {
		return nil, err
	}
	return &workflowsv1.CancelResponse{Workflow: w}, nil
}

// steer runs change on a locked workflow of the caller's tenant in an admission transaction:
// change returns the workflow and the event of its change (nil when nothing changed). A
// finished workflow is left alone: cancelling it changes nothing, anything else fails.
func (s *Service) steer(ctx context.Context, req proto.Message, rawID string,
	change func(context.Context, *admission.Tx, db.Workflow) (db.Workflow, event.Event, error)) (*workflowsv1.Workflow, error) {
	id, err := apierr.ParseID("id", rawID)
	if err != nil {
		return nil, err
	}
	p := auth.Caller(ctx)
	return admission.Do(ctx, s.admit, req, func(ctx context.Context, tx *admission.Tx) (*workflowsv1.Workflow, error) {
		tx.Target("workflow", id)
		w, err := tx.Q.LockWorkflowOfTenant(ctx, db.LockWorkflowOfTenantParams{TenantID: p.TenantID, ID: id})
		if err != nil {
			return nil, apierr.NotFoundIfNoRows(err, "workflow %s not found", id)
		}
		if workflow.Finished(w.State) {
			if _, cancel := req.(*workflowsv1.CancelRequest); !cancel {
				return nil, apierr.FailedPrecondition("workflow %s is %s", id, w.State)
			}
		} else {
			var ev event.Event
			if w, ev, err = change(ctx, tx, w); err != nil {
				return nil, err
			}
			if ev != nil {
				counts, err := countsOf(ctx, tx.Q, w.TenantID, []uuid.UUID{w.ID})
				if err != nil {
					return nil, err
				}
				ev = withCounts(ev, counts[w.ID])
				if err := tx.Emit(w.TenantID, ev); err != nil {
					return nil, err
				}
				if err := workflow.Enqueue(ctx, tx.Q, w.ID); err != nil {
					return nil, err
				}
				tx.Wake(workflow.Kind)
			}
		}
		return describe(ctx, tx.Q, w)
	})
}

// withCounts fills the node counts of a workflow event.
func withCounts(ev event.Event, c workflow.Counts) event.Event {
	set := func(ch event.WorkflowChange) event.WorkflowChange {
		ch.Nodes, ch.Failed = c.Total, c.Failed
		return ch
	}
	switch e := ev.(type) {
	case event.WorkflowPaused:
		e.WorkflowChange = set(e.WorkflowChange)
		return e
	case event.WorkflowResumed:
		e.WorkflowChange = set(e.WorkflowChange)
		return e
	case event.WorkflowCancelled:
		e.WorkflowChange = set(e.WorkflowChange)
		return e
	}
	return ev
}
