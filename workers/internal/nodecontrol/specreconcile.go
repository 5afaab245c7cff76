package nodecontrol

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/better-compute/better-compute/gen/db"
	daemonv1 "github.com/better-compute/better-compute/gen/go/bettercompute/daemon/v1"
	workflowsv1 "github.com/better-compute/better-compute/gen/go/bettercompute/workflows/v1"
	"github.com/better-compute/better-compute/internal/command"
	"github.com/better-compute/better-compute/internal/event"
	"github.com/better-compute/better-compute/internal/fleet"
	"github.com/better-compute/better-compute/internal/workflow"
)

// specReconciler brings a node to its NodeSpec. Labels and taints are written to the node row
// at once. A daemon version other than the one the node reports puts the node into the tenant's
// upgrade workflow for that version (done when the daemon reports it); a config the node has not
// applied becomes a "configure" command carrying it, done when it succeeds. Commands carry the idempotency key
// "<type>-<spec generation>", so a spec generation sends each command once; a failed one is
// sent again (key "<type>-<generation>-retry-<failed command id>") after RetryFailedAfter.
//
// When nothing is left in progress the spec generation is recorded as observed, and the
// SpecApplied condition says how it went: True (applied), False (a step failed) or Unknown
// (commands in progress). Transitions to True and False emit node.spec.applied and
// node.spec.failed.
type specReconciler struct {
	pool *pgxpool.Pool
	opts Options
}

func (r *specReconciler) Kind() string { return fleet.KindSpec }

// Progress of one step of a spec.
const (
	stepDone = iota
	stepWaiting
	stepFailed
)

type step struct {
	state           int
	reason, message string
	// again is when to look again: while waiting, or before retrying a failure.
	again time.Duration
}

func (r *specReconciler) Reconcile(ctx context.Context, key string) error {
	id, err := uuid.Parse(key)
	if err != nil {
		return nil
	}
	var (
		created bool
		again   time.Duration
	)
	err = pgx.BeginFunc(ctx, r.pool, func(tx pgx.Tx) error {
		q := db.New(tx)
		n, ok, err := lockNode(ctx, q, id)
		if err != nil || !ok {
			return err
		}
		gen := n.SpecGeneration
		status := db.RecordNodeSpecStatusParams{ID: id, ObservedGeneration: n.ObservedGeneration}
		var steps []step

		spec, err := fleet.DecodeSpec(n.Spec)
		if err != nil {
			steps = append(steps, step{state: stepFailed, reason: "InvalidSpec", message: err.Error()})
		} else {
			if spec.Labels != nil {
				have, err := decodeLabels(n.Labels)
				if err != nil || !maps.Equal(have, spec.Labels) {
					status.Labels = encodeLabels(spec.Labels)
				}
			}
			if spec.Taints != nil {
				if want := fleet.EncodeTaints(spec.Taints); !jsonEqual(n.Taints, want) {
					status.Taints = want
				}
			}
			if v := spec.DaemonVersion; v != "" && v != n.DaemonVersion {
				s, isNew, err := r.upgrade(ctx, q, n, spec)
				if err != nil {
					return err
				}
				created = created || isNew
				steps = append(steps, s)
			}
			if spec.Config != nil && !jsonEqual(spec.Config, n.AppliedConfig) {
				cfg := &structpb.Struct{}
				if err := protojson.Unmarshal(spec.Config, cfg); err != nil {
					return fmt.Errorf("node %s: decode the spec's config: %w", id, err)
				}
				payload, err := command.Encode(&daemonv1.ConfigurePayload{Config: cfg})
				if err != nil {
					return fmt.Errorf("node %s: %w", id, err)
				}
				s, isNew, err := r.configure(ctx, q, n, payload)
				if err != nil {
					return err
				}
				created = created || isNew
				if s.state == stepDone {
					status.AppliedConfig = []byte(spec.Config)
				}
				steps = append(steps, s)
			}
		}

		cond := fleet.Condition{Type: fleet.ConditionSpecApplied, Status: fleet.StatusTrue, Reason: "Applied",
			Message: fmt.Sprintf("the node has caught up with spec generation %d", gen), ObservedGeneration: gen}
		var waiting, failed []step
		for _, s := range steps {
			switch s.state {
			case stepWaiting:
				waiting = append(waiting, s)
			case stepFailed:
				failed = append(failed, s)
			}
			if s.again > 0 && (again == 0 || s.again < again) {
				again = s.again
			}
		}
		switch {
		case len(failed) > 0:
			cond.Status, cond.Reason, cond.Message = fleet.StatusFalse, failed[0].reason, messages(failed)
		case len(waiting) > 0:
			cond.Status, cond.Reason, cond.Message = fleet.StatusUnknown, waiting[0].reason, messages(waiting)
		}
		if len(waiting) == 0 {
			status.ObservedGeneration = gen
		}
		cs, err := fleet.DecodeConditions(n.Conditions)
		if err != nil {
			cs = nil // rebuilt from scratch
		}
		prev, _ := fleet.FindCondition(cs, fleet.ConditionSpecApplied)
		cs, changed, transition := fleet.SetCondition(cs, cond, time.Now())
		if !changed && status.Labels == nil && status.Taints == nil && status.AppliedConfig == nil &&
			status.ObservedGeneration == n.ObservedGeneration {
			return nil
		}
		status.Conditions = fleet.EncodeConditions(cs)
		if err := q.RecordNodeSpecStatus(ctx, status); err != nil {
			return fmt.Errorf("record spec status of node %s: %w", id, err)
		}
		// An event when the outcome for a generation is known: applied, or failed (once per
		// attempt that fails, or when the reason changes).
		if (transition || prev.ObservedGeneration != gen) && cond.Status != fleet.StatusUnknown {
			outcome := event.NodeSpecOutcome{ID: id, Generation: gen, Reason: cond.Reason, Message: cond.Message}
			var ev event.Event = event.NodeSpecApplied{NodeSpecOutcome: outcome}
			if cond.Status == fleet.StatusFalse {
				ev = event.NodeSpecFailed{NodeSpecOutcome: outcome}
			}
			if err := event.Emit(ctx, q, n.TenantID, ev); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	if created && r.opts.Notifier != nil {
		r.opts.Notifier.CommandsCreated(context.WithoutCancel(ctx), []uuid.UUID{id})
	}
	if again > 0 {
		return lookAgain(ctx, r.pool, fleet.KindSpec, key, again)
	}
	return nil
}

func messages(steps []step) string {
	ms := make([]string, len(steps))
	for i, s := range steps {
		ms[i] = s.message
	}
	return strings.Join(ms, "; ")
}

// upgrade is the step for a node whose daemon reports another version than the spec's: the node
// goes into the tenant's upgrade workflow of that version (origin "spec", one node at a time,
// pausing at the first failure), made when there is none, and the step follows its progress
// there. A node in another unfinished workflow waits for it to finish.
func (r *specReconciler) upgrade(ctx context.Context, q *db.Queries, n db.Node, spec fleet.Spec) (step, bool, error) {
	want := spec.DaemonVersion
	if why := unreachable(n); why != "" {
		return step{state: stepFailed, reason: "NodeUnreachable", message: fmt.Sprintf("cannot upgrade the daemon to %s: %s", want, why)}, false, nil
	}
	p, err := q.NodeWorkflowProgress(ctx, n.ID)
	switch {
	case isNoRows(err):
	case err != nil:
		return step{}, false, fmt.Errorf("read the workflow of node %s: %w", n.ID, err)
	case p.Open && (p.Origin != workflow.OriginSpec || p.Version != want):
		return step{state: stepWaiting, reason: "InWorkflow", again: r.opts.CommandPoll,
			message: fmt.Sprintf("waiting for workflow %s to finish before upgrading the daemon to %s", p.ID, want)}, false, nil
	case p.Open && p.Step == workflow.StepFailed:
		return step{state: stepFailed, reason: "UpgradeFailed",
			message: fmt.Sprintf("upgrade to %s failed in workflow %s (%s): %s; resume it with retry_failed", want, p.ID, p.State, p.Message)}, false, nil
	case p.Open:
		return step{state: stepWaiting, reason: "Upgrading", again: r.opts.CommandPoll,
			message: fmt.Sprintf("upgrading the daemon from %s to %s in workflow %s (step %s)", orNone(n.DaemonVersion), want, p.ID, p.Step)}, false, nil
	}
	w, err := q.FindSpecWorkflow(ctx, db.FindSpecWorkflowParams{TenantID: n.TenantID, Version: want})
	switch {
	case isNoRows(err):
		w, err = workflow.Create(ctx, q, workflow.New{
			TenantID: n.TenantID, Name: "daemon " + want + " (node specs)",
			Action: &workflowsv1.Action{Kind: &workflowsv1.Action_Upgrade{Upgrade: &workflowsv1.UpgradeAction{Version: want}}},
			Target: &workflowsv1.Target{NodeIds: []string{n.ID.String()}},
			Policy: workflow.Policy{MaxParallel: 1, DrainDeadline: workflow.DefaultDrainDeadline, StepTimeout: r.opts.UpgradeTimeout},
			Origin: workflow.OriginSpec, CreatedBy: "node spec", NodeIDs: []uuid.UUID{n.ID},
		})
	case err == nil:
		err = workflow.AddNodes(ctx, q, w, []uuid.UUID{n.ID})
	}
	if err != nil {
		return step{}, false, fmt.Errorf("node %s: upgrade workflow to %s: %w", n.ID, want, err)
	}
	return step{state: stepWaiting, reason: "Upgrading", again: r.opts.CommandPoll,
		message: fmt.Sprintf("upgrading the daemon from %s to %s in workflow %s", orNone(n.DaemonVersion), want, w.ID)}, false, nil
}

// configure is the step for a node that has not applied the spec's config.
func (r *specReconciler) configure(ctx context.Context, q *db.Queries, n db.Node, payload []byte) (step, bool, error) {
	if why := unreachable(n); why != "" {
		return step{state: stepFailed, reason: "NodeUnreachable", message: "cannot configure the daemon: " + why}, false, nil
	}
	c, isNew, err := r.command(ctx, q, n, CommandConfigure, payload, r.opts.ConfigureTimeout)
	if err != nil {
		return step{}, false, err
	}
	switch c.state {
	case stepWaiting:
		return step{state: stepWaiting, reason: "Configuring", again: r.opts.CommandPoll,
			message: fmt.Sprintf("configuring the daemon (command %s is %s)", c.id, c.cmdState)}, isNew, nil
	case stepFailed:
		return step{state: stepFailed, reason: "ConfigureFailed", again: c.retryIn,
			message: fmt.Sprintf("configure: command %s %s: %s", c.id, c.cmdState, orNone(c.err))}, isNew, nil
	}
	return step{state: stepDone}, isNew, nil
}

// commandProgress is where the command of a step stands.
type commandProgress struct {
	state       int // stepWaiting (in flight), stepDone (succeeded) or stepFailed
	id          uuid.UUID
	cmdState    command.State
	err         string
	finishedAgo time.Duration
	// retryIn, for a failure, is when a new command will be sent.
	retryIn time.Duration
}

// command makes sure a command of typ with payload exists for the node's spec generation and
// reports its progress. The newest command of the type with the same payload counts, whoever
// sent it; a failed one is replaced after RetryFailedAfter.
func (r *specReconciler) command(ctx context.Context, q *db.Queries, n db.Node, typ string, payload []byte, timeout time.Duration) (commandProgress, bool, error) {
	key := fmt.Sprintf("%s-%d", typ, n.SpecGeneration)
	latest, err := q.LatestNodeCommand(ctx, db.LatestNodeCommandParams{TenantID: n.TenantID, NodeID: n.ID, Type: typ, Payload: payload})
	switch {
	case isNoRows(err):
	case err != nil:
		return commandProgress{}, false, fmt.Errorf("read %s commands of node %s: %w", typ, n.ID, err)
	case latest.SamePayload:
		p := progressOf(latest.ID, latest.State, latest.Error, time.Duration(latest.FinishedMsAgo)*time.Millisecond)
		if p.state != stepFailed {
			return p, false, nil
		}
		if p.retryIn = r.opts.RetryFailedAfter - p.finishedAgo; p.retryIn > 0 {
			return p, false, nil
		}
		key = fmt.Sprintf("%s-%d-retry-%s", typ, n.SpecGeneration, latest.ID)
	}
	c, isNew, err := newCommand(ctx, q, n, typ, key, payload, timeout)
	if err != nil {
		return commandProgress{}, false, err
	}
	var ago time.Duration
	if c.FinishedAt != nil {
		ago = time.Since(*c.FinishedAt)
	}
	p := progressOf(c.ID, c.State, c.Error, ago)
	if p.state == stepFailed {
		// Another command of the type came after this key's; this generation does not retry.
		p.retryIn = 0
	}
	return p, isNew, nil
}

func progressOf(id uuid.UUID, state command.State, errMsg string, finishedAgo time.Duration) commandProgress {
	p := commandProgress{id: id, cmdState: state, err: errMsg, finishedAgo: finishedAgo}
	switch state {
	case command.Pending, command.Sent, command.Acked:
		p.state = stepWaiting
	case command.Succeeded:
		p.state = stepDone
	default: // failed, expired, cancelled
		p.state = stepFailed
	}
	return p
}

// unreachable says why commands cannot reach the node, or "" when they can.
func unreachable(n db.Node) string {
	switch {
	case n.RevokedAt != nil:
		return "the node is revoked"
	case n.State == fleet.StateRetired:
		return "the node is retired"
	}
	return ""
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}

func decodeLabels(b []byte) (map[string]string, error) {
	m := map[string]string{}
	if len(b) == 0 {
		return m, nil
	}
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, fmt.Errorf("decode labels: %w", err)
	}
	return m, nil
}

func encodeLabels(m map[string]string) []byte {
	if len(m) == 0 {
		return []byte("{}")
	}
	b, _ := json.Marshal(m)
	return b
}
