// Package workflows runs the workflow controller on the worker runtime: the reconciler of kind
// workflow.Kind, whose keys are workflow ids. Each run locks the workflow row, advances each
// admitted node through cordon → drain → act → verify → uncordon as far as what is recorded
// allows, admits pending nodes up to max_parallel, pauses the workflow when more nodes failed
// than it tolerates, and finishes it when every node is done.
//
// Everything a run decides is written in its one transaction, and every command it sends carries
// the idempotency key of the node's attempt (workflow.CommandKey), so a controller killed at any
// point is replaced by one that goes on where it stopped, and each attempt sends each node one
// command. Command results and hellos wake it (the statements that record them enqueue the
// workflow), the API wakes it after create, pause, resume and cancel, and a run that waits on a
// clock (a drain deadline, min_healthy, a step timeout, a poll) asks to be run again then.
package workflows

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/better-compute/better-compute/gen/db"
	workflowsv1 "github.com/better-compute/better-compute/gen/go/bettercompute/workflows/v1"
	"github.com/better-compute/better-compute/internal/reconcile"
	"github.com/better-compute/better-compute/internal/workflow"
)

// CommandNotifier tells gateways that nodes have new commands; gateways also find them within a
// second without it.
type CommandNotifier interface {
	CommandsCreated(ctx context.Context, nodeIDs []uuid.UUID)
}

// Defaults of Options.
const (
	DefaultPoll = 2 * time.Second
)

// Options configure the controller.
type Options struct {
	// Notifier, when set, is told of the commands the controller creates, after commit.
	Notifier CommandNotifier
	// Poll is how often a node waiting on something that does not wake the controller (leases
	// ending, a node coming back online) is looked at again; DefaultPoll when zero.
	Poll time.Duration
	// ResyncEvery is how often every unfinished workflow is enqueued again; the runtime's default
	// when zero.
	ResyncEvery time.Duration
	Logger      *slog.Logger
}

// Reconciler returns the workflow controller, for the controllers role.
func Reconciler(pool *pgxpool.Pool, opts Options) reconcile.Registration {
	if opts.Poll <= 0 {
		opts.Poll = DefaultPoll
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	return reconcile.Registration{
		Reconciler:  &controller{pool: pool, opts: opts},
		Role:        reconcile.RoleControllers,
		Resync:      func(ctx context.Context) ([]string, error) { return db.New(pool).WorkflowsToResync(ctx) },
		ResyncEvery: opts.ResyncEvery,
	}
}

type controller struct {
	pool *pgxpool.Pool
	opts Options
}

func (c *controller) Kind() string { return workflow.Kind }

func (c *controller) Reconcile(ctx context.Context, key string) error {
	id, err := uuid.Parse(key)
	if err != nil {
		return nil // not a workflow: nothing to do
	}
	var r *run
	err = pgx.BeginFunc(ctx, c.pool, func(tx pgx.Tx) error {
		q := db.New(tx)
		w, err := q.LockWorkflow(ctx, id)
		if errors.Is(err, pgx.ErrNoRows) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("read workflow %s: %w", id, err)
		}
		action, err := workflow.DecodeAction(w.Action)
		if err != nil {
			return fmt.Errorf("workflow %s: %w", id, err)
		}
		r = &run{q: q, w: w, action: action, policy: workflow.PolicyOf(w), now: time.Now(), poll: c.opts.Poll}
		return r.do(ctx)
	})
	if err != nil || r == nil {
		return err
	}
	if len(r.commanded) > 0 && c.opts.Notifier != nil {
		c.opts.Notifier.CommandsCreated(context.WithoutCancel(ctx), r.commanded)
	}
	if r.again > 0 {
		if err := db.New(c.pool).DeferReconcile(ctx, db.DeferReconcileParams{Kind: workflow.Kind, Key: key, DelayMs: r.again.Milliseconds()}); err != nil {
			return fmt.Errorf("look at workflow %s again later: %w", id, err)
		}
	}
	return nil
}

// run is one reconcile of one workflow, inside its transaction.
type run struct {
	q      *db.Queries
	w      db.Workflow
	action *workflowsv1.Action
	policy workflow.Policy
	now    time.Time
	poll   time.Duration

	// commanded are the nodes sent a command, to tell their gateways after commit.
	commanded []uuid.UUID
	// again is when to run again (0: only when woken).
	again time.Duration
}

// wait asks for another run after d at the latest.
func (r *run) wait(d time.Duration) {
	d = max(d, 50*time.Millisecond)
	if r.again == 0 || d < r.again {
		r.again = d
	}
}

func (r *run) do(ctx context.Context) error {
	switch r.w.State {
	case workflow.Succeeded, workflow.Failed:
		return r.q.ReleaseWorkflowNodes(ctx, r.w.ID) // already released, unless a run died between the two
	case workflow.Cancelled:
		return r.cancel(ctx)
	}
	// Advance what is admitted, admit into the slots that frees, and advance what was admitted,
	// until nothing is admitted: a node that finishes in one run frees its slot in the same run.
	for range 3 {
		nodes, err := r.q.WorkflowNodesInFlight(ctx, r.w.ID)
		if err != nil {
			return fmt.Errorf("read nodes of workflow %s: %w", r.w.ID, err)
		}
		for _, n := range nodes {
			if err := r.advance(ctx, n); err != nil {
				return err
			}
		}
		counts, err := r.counts(ctx)
		if err != nil {
			return err
		}
		if r.w.State == workflow.Running && counts.Failed > r.w.MaxFailures {
			reason := fmt.Sprintf("%d of %d nodes failed and max_failures is %d: resume with retry_failed, or with a larger max_failures",
				counts.Failed, counts.Total, r.w.MaxFailures)
			if err := r.setState(ctx, workflow.Paused, reason, counts); err != nil {
				return err
			}
		}
		if counts.Pending == 0 && counts.InProgress == 0 {
			return r.finish(ctx, counts)
		}
		if r.w.State != workflow.Running {
			return nil
		}
		admitted, err := r.admit(ctx, r.w.MaxParallel-counts.InProgress)
		if err != nil || admitted == 0 {
			return err
		}
	}
	r.wait(0) // more to admit than three rounds took: go on at once
	return nil
}

// admit moves up to slots pending nodes, in order, to the cordon step; a node retired or
// revoked since the workflow took it is skipped instead.
func (r *run) admit(ctx context.Context, slots int32) (int, error) {
	if slots <= 0 {
		return 0, nil
	}
	pending, err := r.q.PendingWorkflowNodes(ctx, db.PendingWorkflowNodesParams{WorkflowID: r.w.ID, Lim: slots})
	if err != nil {
		return 0, fmt.Errorf("read pending nodes of workflow %s: %w", r.w.ID, err)
	}
	admitted := 0
	for _, p := range pending {
		step, msg := workflow.StepCordon, "admitted"
		if p.RevokedAt != nil || p.NodeState == db.NodeStateRetired {
			step, msg = workflow.StepSkipped, "the node was retired or revoked before its turn"
		}
		if err := r.q.SetWorkflowNodeStep(ctx, db.SetWorkflowNodeStepParams{
			WorkflowID: r.w.ID, NodeID: p.NodeID, Step: step, Message: msg, Cordoned: p.Cordoned,
		}); err != nil {
			return 0, fmt.Errorf("admit node %s to workflow %s: %w", p.NodeID, r.w.ID, err)
		}
		if step == workflow.StepCordon {
			admitted++
			if err := r.nodeEvent(ctx, nodeStarted, p.NodeID, p.Hostname, p.Attempt, ""); err != nil {
				return 0, err
			}
		}
	}
	return admitted, nil
}

// counts reads how many of the workflow's nodes are at each step.
func (r *run) counts(ctx context.Context) (workflow.Counts, error) {
	rows, err := r.q.WorkflowStepCounts(ctx, db.WorkflowStepCountsParams{TenantID: r.w.TenantID, Ids: []uuid.UUID{r.w.ID}})
	if err != nil {
		return workflow.Counts{}, fmt.Errorf("count nodes of workflow %s: %w", r.w.ID, err)
	}
	var c workflow.Counts
	for _, row := range rows {
		c.Add(row.Step, row.Nodes)
	}
	return c, nil
}

// finish ends a workflow whose nodes are all done: failed when any failed, else succeeded.
func (r *run) finish(ctx context.Context, c workflow.Counts) error {
	state, reason := workflow.Succeeded, fmt.Sprintf("%d nodes succeeded", c.Succeeded)
	if c.Skipped > 0 {
		reason += fmt.Sprintf(", %d skipped", c.Skipped)
	}
	if c.Failed > 0 {
		state, reason = workflow.Failed, fmt.Sprintf("%d of %d nodes failed", c.Failed, c.Total)
	}
	if r.w.State == workflow.Paused && c.Failed > 0 {
		return nil // paused with failures: the operator retries, resumes with a larger max_failures or cancels
	}
	if err := r.setState(ctx, state, reason, c); err != nil {
		return err
	}
	return r.q.ReleaseWorkflowNodes(ctx, r.w.ID)
}

func isNoRows(err error) bool { return errors.Is(err, pgx.ErrNoRows) }
