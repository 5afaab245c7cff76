package remediator

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"
	"google.golang.org/protobuf/proto"

	"github.com/better-compute/better-compute/gen/db"
	daemonv1 "github.com/better-compute/better-compute/gen/go/bettercompute/daemon/v1"
	"github.com/better-compute/better-compute/internal/capacity"
	"github.com/better-compute/better-compute/internal/command"
	"github.com/better-compute/better-compute/internal/event"
	"github.com/better-compute/better-compute/internal/fleet"
	"github.com/better-compute/better-compute/internal/gpustate"
	"github.com/better-compute/better-compute/internal/remediation"
)

// drain takes the node out of service: no new leases; the leases on it are told, and end once
// their pool's grace period from the drain has passed. It passes when none is left.
func (w *work) drain(ctx context.Context, first bool) (result, error) {
	leases, err := w.q.RemediationNodeLeases(ctx, w.r.NodeID)
	if err != nil {
		return result{}, fmt.Errorf("read the node's leases: %w", err)
	}
	why := "remediation: " + remediation.Reason{Check: w.r.ReasonCheck, Code: w.r.ReasonCode}.String()
	if first {
		if err := w.drainNow(ctx); err != nil {
			return result{}, err
		}
		for _, l := range leases {
			if err := event.Emit(ctx, w.q, l.TenantID, event.LeaseNodeRemediation{
				ID: l.ID, PoolID: l.PoolID, NodeID: w.r.NodeID, Reason: why,
				EndsAt: w.now.Add(time.Duration(l.PreemptionGraceMs) * time.Millisecond),
			}); err != nil {
				return result{}, err
			}
		}
	}
	var due []db.RemediationNodeLeasesRow
	wait := time.Duration(0)
	for _, l := range leases {
		left := w.r.StepStartedAt.Add(time.Duration(l.PreemptionGraceMs) * time.Millisecond).Sub(w.now)
		if left <= 0 {
			due = append(due, l)
			continue
		}
		if wait == 0 || left < wait {
			wait = left
		}
	}
	if len(due) > 0 {
		ids := make([]uuid.UUID, len(due))
		for i, l := range due {
			ids[i] = l.ID
		}
		now := w.now
		if _, err := capacity.EndLeases(ctx, w.q, ids, capacity.LeaseFailed, why, &now, func(t uuid.UUID, ev event.Event) error {
			return event.Emit(ctx, w.q, t, ev)
		}); err != nil {
			return result{}, err
		}
		pools := make([]uuid.UUID, 0, len(due))
		for _, l := range due {
			if !slices.Contains(pools, l.PoolID) {
				pools = append(pools, l.PoolID)
			}
		}
		if err := capacity.EnqueuePlacer(ctx, w.q, pools...); err != nil {
			return result{}, err
		}
		w.out.wake = append(w.out.wake, capacity.PlacerKind)
	}
	if wait > 0 {
		return waitFor(min(wait, w.c.opts.Poll)), nil
	}
	return passed(), nil
}

// drainNow moves the node to draining, with its event, for the life cycle reconciler to tell
// its daemon.
func (w *work) drainNow(ctx context.Context) error {
	moved, err := remediation.DrainNode(ctx, w.q, w.r.TenantID, w.r.NodeID)
	if moved {
		w.out.wake = append(w.out.wake, fleet.KindLifecycle)
	}
	return err
}

// command sends the step's command the first time, and then reads how it ended.
func (w *work) command(ctx context.Context, first bool, typ string, payload proto.Message, timeout time.Duration) (result, error) {
	if first || w.r.StepCommandID == nil {
		b, err := command.Encode(payload)
		if err != nil {
			return result{}, err
		}
		key := fmt.Sprintf("remediation-%s-%d", w.r.ID, w.r.Step)
		c, _, err := command.Create(ctx, w.q, w.r.TenantID, w.r.NodeID, typ, key, b, timeout)
		if err != nil {
			return result{}, err
		}
		w.r.StepCommandID = &c.ID
		w.out.commands = append(w.out.commands, w.r.NodeID)
		return waitFor(w.c.opts.Poll), nil
	}
	c, err := w.q.RemediationCommand(ctx, *w.r.StepCommandID)
	if err != nil {
		return result{}, fmt.Errorf("read command %s: %w", *w.r.StepCommandID, err)
	}
	switch c.State {
	case db.CommandStateSucceeded:
		if typ == command.Reboot {
			return w.rebooted(ctx, c.FinishedAt)
		}
		if typ != command.Diagnose {
			return passed(), nil
		}
		d, err := decodeDiagnose(c.Result)
		if err != nil {
			return failed(fmt.Sprintf("the diagnostics' result does not read: %v", err)), nil
		}
		switch d.GetResult() {
		case "unavailable":
			return result{outcome: remediation.OutcomeUnavailable, detail: "DCGM is not installed on the node: the verify step decides"}, nil
		case "fail":
			return failed(diagnoseSummary(d)), nil
		}
		return passed(), nil
	case db.CommandStateFailed, db.CommandStateExpired, db.CommandStateCancelled:
		return failed(fmt.Sprintf("%s %s: %s", typ, c.State, cmp.Or(c.Error, commandError(c.Result)))), nil
	}
	return waitFor(w.c.opts.Poll), nil
}

// rebooted passes a reboot once the node's daemon holds a session that started after the reboot
// command ended (it came back), and fails when none did within RebootWait.
func (w *work) rebooted(ctx context.Context, finished *time.Time) (result, error) {
	n, err := w.q.RemediationNodeHealth(ctx, w.r.NodeID)
	if err != nil {
		return result{}, fmt.Errorf("read the node: %w", err)
	}
	if n.Connected && finished != nil && n.ConnectedAt != nil && n.ConnectedAt.After(*finished) {
		return passed(), nil
	}
	if finished != nil && w.now.Sub(*finished) > w.c.opts.RebootWait {
		return failed(fmt.Sprintf("the node did not come back within %v of its reboot", w.c.opts.RebootWait)), nil
	}
	return waitFor(w.c.opts.Poll), nil
}

// powerCycle is skipped for a node that answers; one that does not is power-cycled through the
// provider of the machine behind it (the first time), then passes when it answers again within
// PowerCycleWait. Without a provider that holds it, it is unavailable. A transaction lost after
// the provider's reset resets it again on the retry: a second reset of a dark machine is
// harmless.
func (w *work) powerCycle(ctx context.Context, first bool) (result, error) {
	n, err := w.q.RemediationNodeHealth(ctx, w.r.NodeID)
	if err != nil {
		return result{}, fmt.Errorf("read the node: %w", err)
	}
	if first {
		if n.Connected {
			return skipped("the node answers: no power cycle"), nil
		}
		if w.c.opts.PowerCycle == nil {
			return result{outcome: remediation.OutcomeUnavailable, detail: "no provider power-cycles this node"}, nil
		}
		done, err := w.c.opts.PowerCycle(ctx, w.r.NodeID)
		switch {
		case err != nil:
			return failed(err.Error()), nil
		case !done:
			return result{outcome: remediation.OutcomeUnavailable, detail: "no provider holds the machine behind this node"}, nil
		}
		return waitFor(w.c.opts.Poll), nil
	}
	if n.Connected {
		return passed(), nil
	}
	if w.now.Sub(*w.r.StepStartedAt) > w.c.opts.PowerCycleWait {
		return failed(fmt.Sprintf("the node did not answer within %v of its power cycle", w.c.opts.PowerCycleWait)), nil
	}
	return waitFor(w.c.opts.Poll), nil
}

// verify acknowledges the node's GPU signals when it starts, then passes when, at the end of its
// window, the node answers, no signal quarantines it and none of its GPUs is unhealthy.
func (w *work) verify(ctx context.Context, first bool, s remediation.Step) (result, error) {
	window := time.Duration(s.Window)
	if w.c.opts.VerifyWindow > 0 {
		window = w.c.opts.VerifyWindow
	}
	if first {
		out, err := gpustate.Acknowledge(ctx, w.tx, w.r.NodeID, w.c.opts.Health, w.now)
		if err != nil {
			return result{}, err
		}
		w.out.wake = append(w.out.wake, out.Wake...)
		return waitFor(window), nil
	}
	if left := w.r.StepStartedAt.Add(window).Sub(w.now); left > 0 {
		return waitFor(left), nil
	}
	n, err := w.q.RemediationNodeHealth(ctx, w.r.NodeID)
	if err != nil {
		return result{}, fmt.Errorf("read the node: %w", err)
	}
	switch {
	case !n.Connected:
		return failed("the node does not answer"), nil
	case n.Quarantined:
		return failed("a GPU health signal quarantines the node"), nil
	case n.Unhealthy > 0:
		return failed(fmt.Sprintf("%d GPUs are unhealthy", n.Unhealthy)), nil
	}
	return passed(), nil
}

// replace has the node's machine replaced by a new one of its class.
func (w *work) replace(ctx context.Context) (result, error) {
	if w.c.opts.Replace == nil {
		return result{outcome: remediation.OutcomeUnavailable, detail: "no provider replaces this node's machine"}, nil
	}
	done, err := w.c.opts.Replace(ctx, w.r.NodeID)
	switch {
	case err != nil:
		return failed(err.Error()), nil
	case !done:
		return result{outcome: remediation.OutcomeUnavailable, detail: "no provider holds the machine behind this node"}, nil
	}
	return result{outcome: remediation.OutcomePassed, detail: "a new machine of its class is requested; this one is deleted"}, nil
}

// replaced ends a remediation whose node's machine was replaced: succeeded, the node left drained
// to go with its machine.
func (w *work) replaced(ctx context.Context) error {
	w.r.State = remediation.StateSucceeded
	if err := w.emit(ctx, event.RemediationSucceeded{RemediationChange: remediation.Change(w.r)}); err != nil {
		return err
	}
	return w.end(ctx, remediation.StateSucceeded)
}

// succeed puts the node back in service: ready, its daemon told to undrain.
func (w *work) succeed(ctx context.Context) error {
	moved, err := remediation.ReturnNode(ctx, w.q, w.r.TenantID, w.r.NodeID)
	if err != nil {
		return err
	}
	if moved {
		w.out.commands = append(w.out.commands, w.r.NodeID)
		w.out.wake = append(w.out.wake, fleet.KindLifecycle)
	}
	w.r.State = remediation.StateSucceeded
	if err := w.emit(ctx, event.RemediationSucceeded{RemediationChange: remediation.Change(w.r)}); err != nil {
		return err
	}
	return w.end(ctx, remediation.StateSucceeded)
}

// service ends the remediation in service, with the ticket's event: the node stays drained, the
// GPU quarantined, until people replace it.
func (w *work) service(ctx context.Context) error {
	w.record(int(w.r.Step), remediation.ActionService, remediation.OutcomePassed, "")
	n, err := w.q.RemediationNodeHealth(ctx, w.r.NodeID)
	if err != nil {
		return fmt.Errorf("read the node: %w", err)
	}
	ev := event.GPUServiceRequired{Hostname: n.Hostname}
	if w.r.GpuUuid != "" {
		if g, err := w.q.GetGPU(ctx, db.GetGPUParams{TenantID: w.r.TenantID, Uuid: w.r.GpuUuid}); err == nil {
			ev.Serial, ev.PCIBusID, ev.Model = g.Device.Serial, g.Device.PciBusID, g.Device.Model
		}
	}
	if ev.Repeats, err = w.repeats(ctx); err != nil {
		return err
	}
	ev.Tried = []string{}
	for _, h := range w.history {
		line := h.Action + ": " + h.Outcome
		if h.Detail != "" {
			line += ": " + h.Detail
		}
		ev.Tried = append(ev.Tried, line)
	}
	w.r.State = remediation.StateService
	ev.RemediationChange = w.change(remediation.ActionService, remediation.OutcomePassed, "")
	if err := w.emit(ctx, ev); err != nil {
		return err
	}
	return w.end(ctx, remediation.StateService)
}

// diagnoseSummary names a failed diagnostic's failing tests.
func diagnoseSummary(d *daemonv1.DiagnoseResult) string {
	var failing []string
	for _, t := range d.GetTests() {
		if t.GetResult() != "fail" {
			continue
		}
		s := t.GetName()
		if len(t.GetGpuIndexes()) > 0 {
			s += fmt.Sprintf(" (GPUs %v)", t.GetGpuIndexes())
		}
		if t.GetInfo() != "" {
			s += ": " + t.GetInfo()
		}
		failing = append(failing, s)
	}
	if len(failing) == 0 {
		return fmt.Sprintf("DCGM diagnostics level %d failed", d.GetLevel())
	}
	return fmt.Sprintf("DCGM diagnostics level %d failed: %s", d.GetLevel(), strings.Join(failing, "; "))
}

// commandError is the error a failed command's result carries, or its JSON.
func commandError(b []byte) string {
	var r struct {
		Error string `json:"error"`
	}
	if json.Unmarshal(b, &r) == nil && r.Error != "" {
		return r.Error
	}
	return strings.TrimSpace(string(b))
}
