// Package gpustate applies the GPU health policy (package gpuhealth) to a node in PostgreSQL: it
// reads what the node's daemon last pushed and what was decided before, evaluates each GPU and
// the node, and writes only what changed — each GPU's health and reasons, the history, the
// node's quarantine, a drain — with the events that announce it, in the caller's transaction.
// The health reconciler (workers) calls Apply when a node's report or GPUs change; the API's
// quarantine and clear (server) call Quarantine and Clear, which end in the same Apply, so there
// is one way health is decided.
package gpustate

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/better-compute/better-compute/gen/db"
	daemonv1 "github.com/better-compute/better-compute/gen/go/bettercompute/daemon/v1"
	"github.com/better-compute/better-compute/internal/capacity"
	"github.com/better-compute/better-compute/internal/event"
	"github.com/better-compute/better-compute/internal/fleet"
	"github.com/better-compute/better-compute/internal/gpuhealth"
	"github.com/better-compute/better-compute/internal/remediation"
)

// ErrNotFound is returned by Quarantine and Clear for a GPU the tenant has no node with.
var ErrNotFound = errors.New("no such GPU")

// Outcome is what Apply did that its caller acts on after the commit.
type Outcome struct {
	// Recheck, when not zero, is when the verdict may change without a new signal (a clean
	// period or a window ends): the reconciler looks at the node again then.
	Recheck time.Time
	// Wake lists the reconciler kinds to wake after the commit: the placer when a GPU or the
	// node became placeable again, the node life cycle when a drain started.
	Wake []string
	// Changed counts the GPUs whose health changed.
	Changed int
}

func (o *Outcome) recheck(t time.Time) {
	if !t.IsZero() && (o.Recheck.IsZero() || t.Before(o.Recheck)) {
		o.Recheck = t
	}
}

func (o *Outcome) wake(kind string) {
	if !slices.Contains(o.Wake, kind) {
		o.Wake = append(o.Wake, kind)
	}
}

// node is a node's health state as loaded, under the lock of its GPUs.
type node struct {
	row db.GPUHealthNodeRow
	// devices are locked (FOR UPDATE) for the transaction.
	devices []db.LockGPUHealthDevicesRow
	// signals are the daemon's per-GPU signals by device id; nodeSignals those of no GPU it
	// knows (node-wide, or a PCI id no device has).
	signals     map[int64][]gpuhealth.Signal
	nodeSignals []gpuhealth.Signal
}

// load reads a node and locks its GPUs; nil when the node does not exist.
func load(ctx context.Context, q *db.Queries, id uuid.UUID) (*node, error) {
	row, err := q.GPUHealthNode(ctx, id)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read node %s: %w", id, err)
	}
	devices, err := q.LockGPUHealthDevices(ctx, id)
	if err != nil {
		return nil, fmt.Errorf("lock the GPUs of node %s: %w", id, err)
	}
	n := &node{row: row, devices: devices, signals: map[int64][]gpuhealth.Signal{}}
	report := &daemonv1.GpuHealth{}
	if err := (protojson.UnmarshalOptions{DiscardUnknown: true}).Unmarshal(row.Report, report); err != nil {
		return nil, fmt.Errorf("read the GPU health report of node %s: %w", id, err)
	}
	byUUID, byPCI := map[string]int64{}, map[string]int64{}
	for _, d := range devices {
		if d.Uuid != "" {
			byUUID[d.Uuid] = d.ID
		}
		if d.PciBusID != "" {
			byPCI[PCIKey(d.PciBusID)] = d.ID
		}
	}
	for _, s := range report.GetSignals() {
		sig := gpuhealth.Signal{
			Check: s.GetCheck(), Code: s.GetCode(), Count: s.GetCount(),
			FirstSeen: s.GetFirstSeen().AsTime(), LastSeen: s.GetLastSeen().AsTime(), Detail: s.GetDetail(),
		}
		id, ok := byUUID[s.GetGpuUuid()]
		if !ok && s.GetPciBusId() != "" {
			id, ok = byPCI[PCIKey(s.GetPciBusId())]
		}
		if ok {
			n.signals[id] = append(n.signals[id], sig)
		} else {
			n.nodeSignals = append(n.nodeSignals, sig)
		}
	}
	return n, nil
}

// PCIKey is a PCI address as domain:bus:device, lower case with the domain's leading zeros
// dropped, so that nvidia-smi's "00000000:18:00.0" and the kernel log's "0000:18:00" match.
func PCIKey(addr string) string {
	addr = strings.ToLower(strings.TrimSpace(addr))
	if i := strings.LastIndexByte(addr, '.'); i >= 0 {
		addr = addr[:i]
	}
	parts := strings.Split(addr, ":")
	if len(parts) == 3 {
		parts[0] = strings.TrimLeft(parts[0], "0")
	}
	return strings.Join(parts, ":")
}

// gpuSignals are the signals of device d: the daemon's, and gpu_missing while it is missing.
func (n *node) gpuSignals(d db.LockGPUHealthDevicesRow) []gpuhealth.Signal {
	sigs := n.signals[d.ID]
	if !d.Present {
		sigs = append(slices.Clip(sigs), gpuhealth.Signal{Check: gpuhealth.CheckGPUMissing, Count: 1, FirstSeen: d.UpdatedAt, LastSeen: d.UpdatedAt})
	}
	return sigs
}

// Apply evaluates the GPUs of node id and the node itself at now under policy as the pools the
// node is a member of override it (gpuhealth.Combine), and writes what changed in tx: a lease
// whose GPU becomes unhealthy ends there when its pool says so. actor is the operator behind it
// (Quarantine, Clear), nil for the reconciler. A node that does not exist is no error.
func Apply(ctx context.Context, tx db.DBTX, id uuid.UUID, policy gpuhealth.Policy, now time.Time, actor *uuid.UUID) (Outcome, error) {
	q := db.New(tx)
	n, err := load(ctx, q, id)
	if err != nil || n == nil {
		return Outcome{}, err
	}
	pools, err := loadPools(ctx, q, id, policy)
	if err != nil {
		return Outcome{}, err
	}
	return n.apply(ctx, q, pools, now, actor)
}

// nodePools are the pools that bear on a node's health: the policy it is judged by, the pools it is
// a member of, and what each pool of a lease on its GPUs does with a lease whose GPU becomes
// unhealthy.
type nodePools struct {
	policy  gpuhealth.Policies
	members []uuid.UUID
	actions map[uuid.UUID]gpuhealth.LeaseAction
}

// loadPools reads the overrides of node id's pools (and of its leases' pools) on top of policy.
// An override's rules carry, as their description, the pool they come from.
func loadPools(ctx context.Context, q *db.Queries, id uuid.UUID, policy gpuhealth.Policy) (nodePools, error) {
	rows, err := q.GPUHealthPoolPolicies(ctx, id)
	if err != nil {
		return nodePools{}, fmt.Errorf("read the GPU health policies of the pools of node %s: %w", id, err)
	}
	out := nodePools{actions: map[uuid.UUID]gpuhealth.LeaseAction{}}
	var overrides [][]gpuhealth.Rule
	for _, r := range rows {
		o, err := gpuhealth.DecodeOverride(r.GpuHealthPolicy)
		if err != nil {
			return nodePools{}, fmt.Errorf("pool %s: %w", r.ID, err)
		}
		out.actions[r.ID] = o.OnUnhealthyLease
		if !r.Member {
			continue
		}
		out.members = append(out.members, r.ID)
		for i := range o.Rules {
			o.Rules[i].Description = fmt.Sprintf("rule %d of the GPU health policy of pool %s", i+1, r.Name)
		}
		overrides = append(overrides, o.Rules)
	}
	out.policy = gpuhealth.Combine(policy, overrides...)
	return out, nil
}

func (n *node) apply(ctx context.Context, q *db.Queries, pools nodePools, now time.Time, actor *uuid.UUID) (Outcome, error) {
	policy := pools.policy
	var out Outcome
	// end lists the leases whose pools end them, with the reason, once each, in the order their
	// GPUs became unhealthy.
	var end []uuid.UUID
	endReason := map[uuid.UUID]string{}
	// repair is what turned unhealthy here, for a remediation: the first GPU, else the node.
	var repair *remediation.Subject
	var repairWhy remediation.Reason
	var nodeWide []gpuhealth.Reason
	drain, placeable := false, false
	for _, d := range n.devices {
		prev, err := gpuhealth.DecodeReasons(d.HealthReasons)
		if err != nil {
			return out, fmt.Errorf("GPU %s: %w", d.Uuid, err)
		}
		manual, err := gpuhealth.DecodeManual(d.ManualQuarantine)
		if err != nil {
			return out, fmt.Errorf("GPU %s: %w", d.Uuid, err)
		}
		acks, err := gpuhealth.DecodeAcknowledged(d.Acknowledged)
		if err != nil {
			return out, fmt.Errorf("GPU %s: %w", d.Uuid, err)
		}
		in := gpuhealth.Input{Signals: n.gpuSignals(d), Previous: prev, Manual: manual, Acknowledged: acks}
		if d.ClearedAt != nil {
			in.ClearedAt = *d.ClearedAt
		}
		res := policy.Evaluate(in, now)
		out.recheck(res.Recheck)
		if e := res.Effect(); e.NodeWide() {
			nodeWide = append(nodeWide, res.Reasons...)
			drain = drain || e == gpuhealth.EffectDrainNode
		}
		from := gpuhealth.Health(d.Health)
		if from == res.Health && gpuhealth.SameReasons(prev, res.Reasons) {
			continue
		}
		reasons, err := gpuhealth.EncodeReasons(res.Reasons)
		if err != nil {
			return out, err
		}
		if err := q.SetDeviceHealth(ctx, db.SetDeviceHealthParams{ID: d.ID, Health: string(res.Health), Reasons: reasons}); err != nil {
			return out, fmt.Errorf("set the health of GPU %s: %w", d.Uuid, err)
		}
		if from == res.Health {
			continue // the reasons changed, not the health: no history, no event
		}
		if err := markUsage(ctx, q, d, res.Health, now); err != nil {
			return out, err
		}
		out.Changed++
		if err := q.InsertGPUHealthChange(ctx, db.InsertGPUHealthChangeParams{
			TenantID: n.row.TenantID, DeviceID: d.ID, FromHealth: string(from), ToHealth: string(res.Health), Reasons: reasons, PrincipalID: actor,
		}); err != nil {
			return out, fmt.Errorf("record the health change of GPU %s: %w", d.Uuid, err)
		}
		if err := n.announce(ctx, q, d, from, res, actor); err != nil {
			return out, err
		}
		placeable = placeable || (from == gpuhealth.Unhealthy && d.Present)
		if res.Health == gpuhealth.Unhealthy && repair == nil && len(res.Reasons) > 0 && res.Reasons[0].Check != gpuhealth.CheckManual {
			repair = &remediation.Subject{Tenant: n.row.TenantID, Node: n.row.ID, GPUUUID: d.Uuid, GPUSerial: d.Serial}
			repairWhy = remediation.Reason{Check: res.Reasons[0].Check, Code: res.Reasons[0].Code}
		}
		if l := d.LeaseID; res.Health == gpuhealth.Unhealthy && l != nil && d.LeasePoolID != nil &&
			leaseAction(d, pools.actions[*d.LeasePoolID]) == gpuhealth.LeaseEnd && endReason[*l] == "" {
			end, endReason[*l] = append(end, *l), unhealthyReason(res.Reasons)
		}
	}
	if err := endLeases(ctx, q, end, endReason, now, &out); err != nil {
		return out, err
	}

	nodeRes := policy.Evaluate(gpuhealth.Input{Signals: n.nodeSignals, Previous: nodeOnly(n.row.Reasons)}, now)
	out.recheck(nodeRes.Recheck)
	e := nodeRes.Effect()
	quarantined := e.NodeWide() || len(nodeWide) > 0
	drain = drain || e == gpuhealth.EffectDrainNode
	if err := n.setNode(ctx, q, nodeRes.Reasons, quarantined, drain, now, &out); err != nil {
		return out, err
	}
	if n.row.Quarantined && !quarantined {
		placeable = true
	}
	if quarantined != n.row.Quarantined {
		change := event.NodeGPUChange{ID: n.row.ID, Hostname: n.row.Hostname, Reasons: append(slices.Clip(nodeRes.Reasons), nodeWide...)}
		var ev event.Event = event.NodeGPUReleased{NodeGPUChange: change}
		if quarantined {
			ev = event.NodeGPUQuarantined{NodeGPUChange: change}
		}
		if err := event.Emit(ctx, q, n.row.TenantID, ev); err != nil {
			return out, err
		}
	}
	if placeable {
		if err := capacity.EnqueuePlacer(ctx, q, pools.members...); err != nil {
			return out, err
		}
		if len(pools.members) > 0 {
			out.wake(capacity.PlacerKind)
		}
	}
	if why := append(slices.Clip(nodeRes.Reasons), nodeWide...); repair == nil && quarantined && !n.row.Quarantined && len(why) > 0 {
		repair = &remediation.Subject{Tenant: n.row.TenantID, Node: n.row.ID}
		repairWhy = remediation.Reason{Check: why[0].Check, Code: why[0].Code}
	}
	if repair != nil {
		if err := openRemediation(ctx, q, *repair, repairWhy, &out); err != nil {
			return out, err
		}
	}
	// A GPU sent to service and replaced since (a new serial at its index) ends its service.
	switch moved, err := remediation.ReturnReplaced(ctx, q, n.row.ID, now); {
	case err != nil:
		return out, err
	case moved:
		out.wake(fleet.KindLifecycle)
	}
	return out, nil
}

// openRemediation starts a remediation of what turned unhealthy, unless the node's pools turned
// automatic remediation off or one is in progress.
func openRemediation(ctx context.Context, q *db.Queries, s remediation.Subject, why remediation.Reason, out *Outcome) error {
	auto, err := remediation.Automatic(ctx, q, s.Node)
	if err != nil || !auto {
		return err
	}
	switch _, err := remediation.Open(ctx, q, s, why, remediation.DefaultPolicy()); {
	case errors.Is(err, remediation.ErrInProgress):
		return nil
	case err != nil:
		return err
	}
	out.wake(remediation.Kind)
	return nil
}

// unhealthyReason is why a lease ends with its GPU: "gpu_unhealthy: " and the strongest reason's
// check and code ("gpu_unhealthy: xid 79").
func unhealthyReason(reasons []gpuhealth.Reason) string {
	if len(reasons) == 0 {
		return "gpu_unhealthy"
	}
	r := reasons[0]
	if r.Code == 0 {
		return "gpu_unhealthy: " + r.Check
	}
	return fmt.Sprintf("gpu_unhealthy: %s %d", r.Check, r.Code)
}

// endLeases ends (fails) the leases whose pools end a lease on an unhealthy GPU, each with its
// reason, with the events capacity.EndLeases emits, and queues their pools for the placer: what
// the leases held elsewhere is free, and their work may be placed again.
func endLeases(ctx context.Context, q *db.Queries, ids []uuid.UUID, reasons map[uuid.UUID]string, now time.Time, out *Outcome) error {
	emit := func(tenant uuid.UUID, ev event.Event) error { return event.Emit(ctx, q, tenant, ev) }
	var poolIDs []uuid.UUID
	for _, id := range ids {
		rows, err := capacity.EndLeases(ctx, q, []uuid.UUID{id}, capacity.LeaseFailed, reasons[id], &now, emit)
		if err != nil {
			return fmt.Errorf("end lease %s on an unhealthy GPU: %w", id, err)
		}
		for _, r := range rows {
			if !slices.Contains(poolIDs, r.PoolID) {
				poolIDs = append(poolIDs, r.PoolID)
			}
		}
	}
	if len(poolIDs) == 0 {
		return nil
	}
	if err := capacity.EnqueuePlacer(ctx, q, poolIDs...); err != nil {
		return err
	}
	out.wake(capacity.PlacerKind)
	return nil
}

// nodeOnly reads the node's stored reasons; they are its node-wide signals' only (the GPUs'
// reasons that reach the node are the GPUs' own, evaluated with them).
func nodeOnly(b []byte) []gpuhealth.Reason {
	rs, err := gpuhealth.DecodeReasons(b)
	if err != nil {
		return nil // written by this package; unreadable means start again from the signals
	}
	return rs
}

// setNode writes the node's verdict when it changed, and starts a drain the first time a signal
// asks for one (an operator who uncordons the node afterwards is not overruled until the signal
// goes and comes back).
func (n *node) setNode(ctx context.Context, q *db.Queries, reasons []gpuhealth.Reason, quarantined, drain bool, now time.Time, out *Outcome) error {
	prev := nodeOnly(n.row.Reasons)
	drainAt := n.row.DrainRequestedAt
	startDrain := drain && drainAt == nil
	switch {
	case startDrain:
		drainAt = &now
	case !drain:
		drainAt = nil
	}
	if quarantined == n.row.Quarantined && gpuhealth.SameReasons(prev, reasons) && (drainAt == nil) == (n.row.DrainRequestedAt == nil) {
		return nil
	}
	b, err := gpuhealth.EncodeReasons(reasons)
	if err != nil {
		return err
	}
	if err := q.SetNodeGPUHealth(ctx, db.SetNodeGPUHealthParams{NodeID: n.row.ID, Reasons: b, Quarantined: quarantined, DrainRequestedAt: drainAt}); err != nil {
		return fmt.Errorf("set the GPU health of node %s: %w", n.row.ID, err)
	}
	if !startDrain {
		return nil
	}
	moved, err := remediation.DrainNode(ctx, q, n.row.TenantID, n.row.ID)
	if moved {
		out.wake(fleet.KindLifecycle)
	}
	return err
}

// announce emits the GPU's change of health, and, when it became unhealthy under a lease, the
// lease's event to the lease's tenant.
func (n *node) announce(ctx context.Context, q *db.Queries, d db.LockGPUHealthDevicesRow, from gpuhealth.Health, res gpuhealth.Result, actor *uuid.UUID) error {
	change := event.GPUHealthChange{
		UUID: d.Uuid, NodeID: n.row.ID, Hostname: n.row.Hostname, Index: d.Idx, Model: d.Model,
		Health: string(res.Health), PreviousHealth: string(from), Reasons: res.Reasons, LeaseID: d.LeaseID, PrincipalID: actor,
	}
	var ev event.Event
	switch res.Health {
	case gpuhealth.Healthy:
		ev = event.GPUHealthy{GPUHealthChange: change}
	case gpuhealth.Degraded:
		ev = event.GPUDegraded{GPUHealthChange: change}
	default:
		ev = event.GPUUnhealthy{GPUHealthChange: change}
	}
	if err := event.Emit(ctx, q, n.row.TenantID, ev); err != nil {
		return err
	}
	if res.Health != gpuhealth.Unhealthy || d.LeaseID == nil || d.LeaseTenantID == nil || d.LeasePoolID == nil {
		return nil
	}
	return event.Emit(ctx, q, *d.LeaseTenantID, event.LeaseGPUUnhealthy{
		ID: *d.LeaseID, PoolID: *d.LeasePoolID, GPUUUID: d.Uuid, NodeID: n.row.ID, Index: d.Idx, Reasons: res.Reasons,
	})
}

// leaseAction is what happens to the lease holding d when it becomes unhealthy: the gang's own
// choice (on_unhealthy_member) where it made one, else its pool's.
func leaseAction(d db.LockGPUHealthDevicesRow, pool gpuhealth.LeaseAction) gpuhealth.LeaseAction {
	if a := gpuhealth.LeaseAction(d.LeaseOnUnhealthy); a != "" {
		return a
	}
	return pool
}
