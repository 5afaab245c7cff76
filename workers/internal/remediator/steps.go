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

// drainFrom are the states a remediation drains a node from; a draining or drained node stays.
var drainFrom = []string{string(fleet.StateJoining), string(fleet.StateReady), string(fleet.StateCordoned)}

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
	n, err := w.q.RemediationNodeHealth(ctx, w.r.NodeID)
	if err != nil {
		return fmt.Errorf("read the node: %w", err)
	}
	if !slices.Contains(drainFrom, string(n.State)) {
		return nil
	}
	if _, err := w.q.SetNodeState(ctx, db.SetNodeStateParams{TenantID: w.r.TenantID, ID: w.r.NodeID, State: db.NodeState(fleet.StateDraining), FromStates: drainFrom}); err != nil {
		return fmt.Errorf("drain the node: %w", err)
	}
	if err := w.emit(ctx, event.NodeDraining{NodeTransition: event.NodeTransition{
		ID: w.r.NodeID, Hostname: n.Hostname, From: string(n.State), To: string(fleet.StateDraining),
	}}); err != nil {
		return err
	}
	if err := fleet.Enqueue(ctx, w.q, fleet.KindLifecycle, w.r.NodeID); err != nil {
		return err
	}
	w.out.wake = append(w.out.wake, fleet.KindLifecycle)
	return nil
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
		if typ == command.Reboot && !c.SessionSince {
			// The daemon reports the reboot before the host goes down: the step ends when the
			// node is back with a new session, so that the next step's command is not sent to
			// the daemon that is going away (and lost there), nor run before the reboot.
			if w.now.Sub(*w.r.StepStartedAt) > timeout {
				return failed(fmt.Sprintf("the node did not come back within %v of the reboot", timeout)), nil
			}
			return waitFor(w.c.opts.Poll), nil
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

// powerCycle is skipped for a node that answers; for one that does not, the machine's provider
// would power-cycle it, which is not wired here yet.
func (w *work) powerCycle(ctx context.Context) (result, error) {
	n, err := w.q.RemediationNodeHealth(ctx, w.r.NodeID)
	if err != nil {
		return result{}, fmt.Errorf("read the node: %w", err)
	}
	if n.Online {
		return skipped("the node answers: no power cycle"), nil
	}
	return result{outcome: remediation.OutcomeUnavailable, detail: "no provider power-cycles this node"}, nil
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
	case !n.Online:
		return failed("the node does not answer"), nil
	case n.Quarantined:
		return failed("a GPU health signal quarantines the node"), nil
	case n.Unhealthy > 0:
		return failed(fmt.Sprintf("%d GPUs are unhealthy", n.Unhealthy)), nil
	}
	return passed(), nil
}

// succeed puts the node back in service: ready, its daemon told to undrain.
func (w *work) succeed(ctx context.Context) error {
	n, err := w.q.RemediationNodeHealth(ctx, w.r.NodeID)
	if err != nil {
		return fmt.Errorf("read the node: %w", err)
	}
	from := []string{string(fleet.StateCordoned), string(fleet.StateDraining), string(fleet.StateDrained)}
	if slices.Contains(from, string(n.State)) {
		moved, err := w.q.SetNodeState(ctx, db.SetNodeStateParams{TenantID: w.r.TenantID, ID: w.r.NodeID, State: db.NodeState(fleet.StateReady), FromStates: from})
		if err != nil {
			return fmt.Errorf("return the node to service: %w", err)
		}
		if _, _, err := command.Create(ctx, w.q, w.r.TenantID, w.r.NodeID, command.Undrain, fmt.Sprintf("undrain-%d", moved.StateGeneration), []byte("{}"), 10*time.Minute); err != nil {
			return err
		}
		w.out.commands = append(w.out.commands, w.r.NodeID)
		if err := w.emit(ctx, event.NodeUncordoned{NodeTransition: event.NodeTransition{
			ID: w.r.NodeID, Hostname: n.Hostname, From: string(n.State), To: string(fleet.StateReady),
		}}); err != nil {
			return err
		}
		if err := fleet.Enqueue(ctx, w.q, fleet.KindLifecycle, w.r.NodeID); err != nil {
			return err
		}
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
	if w.r.GpuSerial != "" {
		p := remediation.DefaultPolicy()
		if ev.Repeats, err = w.q.RemediationRepeats(ctx, db.RemediationRepeatsParams{
			GpuSerial: w.r.GpuSerial, Since: w.now.Add(-time.Duration(p.Repeat.Within)), ID: w.r.ID,
		}); err != nil {
			return fmt.Errorf("count the GPU's remediations: %w", err)
		}
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
