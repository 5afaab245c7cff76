package remediator

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/better-compute/better-compute/gen/db"
	daemonv1 "github.com/better-compute/better-compute/gen/go/bettercompute/daemon/v1"
	"github.com/better-compute/better-compute/internal/event"
	"github.com/better-compute/better-compute/internal/remediation"
)

// work is one reconcile of one remediation, in its transaction.
type work struct {
	c   *controller
	q   *db.Queries
	tx  pgx.Tx
	r   db.Remediation
	now time.Time
	out *effects

	steps   []remediation.Step
	history []remediation.Entry
}

// maxStepsPerReconcile bounds how many steps one reconcile takes (each ends or waits).
const maxStepsPerReconcile = 32

func (w *work) run(ctx context.Context) error {
	if w.r.State != remediation.StateWaiting && w.r.State != remediation.StateRunning {
		return nil
	}
	var err error
	if w.steps, err = remediation.Steps(w.r); err != nil {
		return err
	}
	if w.history, err = remediation.History(w.r); err != nil {
		return err
	}
	if w.r.State == remediation.StateWaiting {
		started, err := w.take(ctx)
		if err != nil || !started {
			return err
		}
	}
	for range maxStepsPerReconcile {
		if w.r.State != remediation.StateRunning {
			return nil
		}
		res, err := w.step(ctx)
		if err != nil {
			return err
		}
		if res.wait > 0 {
			w.out.recheck = res.wait
			return w.save(ctx)
		}
		if err := w.finish(ctx, res); err != nil {
			return err
		}
	}
	w.out.recheck = time.Millisecond // more to do: come back at once
	return nil
}

// take starts a waiting remediation when its pools' budgets allow, at the step the GPU's record
// calls for: a repeat offender goes straight to service.
func (w *work) take(ctx context.Context) (bool, error) {
	if err := w.q.LockRemediationBudget(ctx, w.r.TenantID); err != nil {
		return false, fmt.Errorf("lock the budget: %w", err)
	}
	blocked, err := w.q.RemediationBlocked(ctx, db.RemediationBlockedParams{NodeID: w.r.NodeID, ID: w.r.ID})
	if err != nil || blocked {
		return false, err // woken when a remediation of its pools ends
	}
	w.r.State, w.r.Step, w.r.StepStartedAt, w.r.StepCommandID = remediation.StateRunning, 0, nil, nil
	if w.r.GpuSerial != "" {
		p := remediation.DefaultPolicy()
		n, err := w.repeats(ctx)
		if err != nil {
			return false, err
		}
		if n+1 >= int64(p.Repeat.Count) {
			w.record(0, remediation.ActionDrain, remediation.OutcomeSkipped,
				fmt.Sprintf("GPU %s was remediated %d times within %v: to service", w.r.GpuSerial, n, time.Duration(p.Repeat.Within)))
			w.r.Step = int32(len(w.steps) - 1)
			if err := w.drainNow(ctx); err != nil {
				return false, err
			}
		}
	}
	return true, w.save(ctx)
}

// repeats is how many earlier remediations the GPU (by serial) had within the policy's repeat
// window; 0 for a node-wide remediation.
func (w *work) repeats(ctx context.Context) (int64, error) {
	if w.r.GpuSerial == "" {
		return 0, nil
	}
	n, err := w.q.RemediationRepeats(ctx, db.RemediationRepeatsParams{
		GpuSerial: w.r.GpuSerial, Since: w.now.Add(-time.Duration(remediation.DefaultPolicy().Repeat.Within)), ID: w.r.ID,
	})
	if err != nil {
		return 0, fmt.Errorf("count the GPU's remediations: %w", err)
	}
	return n, nil
}

// result is what a step did, or how long to wait before looking again.
type result struct {
	outcome, detail string
	wait            time.Duration
}

func passed() result              { return result{outcome: remediation.OutcomePassed} }
func failed(detail string) result { return result{outcome: remediation.OutcomeFailed, detail: detail} }
func skipped(detail string) result {
	return result{outcome: remediation.OutcomeSkipped, detail: detail}
}
func waitFor(d time.Duration) result { return result{wait: max(d, time.Millisecond)} }

// step starts the current step, or looks at it again.
func (w *work) step(ctx context.Context) (result, error) {
	s := w.steps[w.r.Step]
	first := w.r.StepStartedAt == nil
	if first {
		now := w.now
		w.r.StepStartedAt = &now
	}
	switch s.Action {
	case remediation.ActionDrain:
		return w.drain(ctx, first)
	case remediation.ActionGPUReset:
		if w.r.GpuUuid == "" {
			return skipped("the node as a whole is at fault"), nil
		}
		return w.command(ctx, first, "gpuReset", &daemonv1.GpuResetPayload{Uuid: w.r.GpuUuid}, 10*time.Minute)
	case remediation.ActionReboot:
		return w.command(ctx, first, "reboot", &daemonv1.RebootPayload{}, 15*time.Minute)
	case remediation.ActionPowerCycle:
		return w.powerCycle(ctx, first)
	case remediation.ActionDiagnose:
		return w.command(ctx, first, "diagnose", &daemonv1.DiagnosePayload{Level: s.Level}, diagnoseTimeout(s.Level))
	case remediation.ActionVerify:
		return w.verify(ctx, first, s)
	case remediation.ActionReplace:
		return w.replace(ctx)
	case remediation.ActionService:
		return result{outcome: remediation.ActionService}, nil
	}
	return failed(fmt.Sprintf("unknown action %q", s.Action)), nil
}

// finish records a step's end and moves on: to the next step, the next rung, back in service,
// or to service.
func (w *work) finish(ctx context.Context, res result) error {
	i := int(w.r.Step)
	s := w.steps[i]
	if res.outcome == remediation.ActionService {
		return w.service(ctx)
	}
	w.record(i, s.Action, res.outcome, res.detail)
	if err := w.emit(ctx, event.RemediationStep{RemediationChange: w.change(s.Action, res.outcome, res.detail)}); err != nil {
		return err
	}
	next := i + 1
	switch res.outcome {
	case remediation.OutcomePassed:
		if s.Action == remediation.ActionReplace {
			return w.replaced(ctx)
		}
		if remediation.RungPassed(w.steps, i) {
			return w.succeed(ctx)
		}
	case remediation.OutcomeFailed:
		next = remediation.NextRung(w.steps, i)
	case remediation.OutcomeUnavailable:
		if remediation.IsFix(s.Action) {
			next = remediation.NextRung(w.steps, i)
		}
	}
	if next >= len(w.steps) {
		next = len(w.steps) - 1 // the ladder ends in service
	}
	w.r.Step, w.r.StepStartedAt, w.r.StepCommandID = int32(next), nil, nil
	return w.save(ctx)
}

// record appends a step's end to the history.
func (w *work) record(step int, action, outcome, detail string) {
	started := w.now
	if w.r.StepStartedAt != nil {
		started = *w.r.StepStartedAt
	}
	w.history = append(w.history, remediation.Entry{
		Step: step, Action: action, Outcome: outcome, Detail: remediation.Bounded(detail),
		StartedAt: started.UTC().Format(time.RFC3339Nano), EndedAt: w.now.UTC().Format(time.RFC3339Nano),
	})
}

func (w *work) save(ctx context.Context) error {
	h, err := json.Marshal(w.history)
	if err != nil {
		return fmt.Errorf("encode the history: %w", err)
	}
	r, err := w.q.SaveRemediation(ctx, db.SaveRemediationParams{
		ID: w.r.ID, State: w.r.State, Step: w.r.Step, StepStartedAt: w.r.StepStartedAt, StepCommandID: w.r.StepCommandID, History: h,
	})
	if err != nil {
		return fmt.Errorf("save: %w", err)
	}
	w.r = r
	return nil
}

func (w *work) change(action, outcome, detail string) event.RemediationChange {
	c := remediation.Change(w.r)
	c.Action, c.Outcome, c.Detail = action, outcome, remediation.Bounded(detail)
	return c
}

func (w *work) emit(ctx context.Context, ev event.Event) error {
	return event.Emit(ctx, w.q, w.r.TenantID, ev)
}

// end finishes the remediation in state, and wakes the tenant's waiting ones: a budget freed.
func (w *work) end(ctx context.Context, state string) error {
	w.r.State = state
	if err := w.save(ctx); err != nil {
		return err
	}
	woke, err := remediation.WakeWaiting(ctx, w.q, w.r.TenantID)
	if err != nil {
		return err
	}
	if woke {
		w.out.wake = append(w.out.wake, remediation.Kind)
	}
	return nil
}

// diagnoseTimeout bounds a diagnose command by its level.
func diagnoseTimeout(level int32) time.Duration {
	switch level {
	case 1:
		return 5 * time.Minute
	case 2:
		return 15 * time.Minute
	case 3:
		return time.Hour
	}
	return 4 * time.Hour
}

// decodeDiagnose reads a diagnose command's result.
func decodeDiagnose(b []byte) (*daemonv1.DiagnoseResult, error) {
	r := &daemonv1.DiagnoseResult{}
	if len(b) == 0 {
		return r, nil
	}
	return r, protojson.UnmarshalOptions{DiscardUnknown: true}.Unmarshal(b, r)
}
