package gpustate

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/better-compute/better-compute/gen/db"
	"github.com/better-compute/better-compute/internal/gpuhealth"
)

// Operated is the GPU an operator's Quarantine or Clear acted on, and what Apply did after.
type Operated struct {
	DeviceID int64
	NodeID   uuid.UUID
	Outcome  Outcome
}

// Quarantine takes the tenant's GPU gpuUUID out of service for principal, with reason, until a
// Clear: it becomes unhealthy at once, with the announcements Apply makes. Quarantining a GPU
// under an operator's quarantine changes nothing (the first quarantine's reason stays).
func Quarantine(ctx context.Context, tx db.DBTX, tenant uuid.UUID, gpuUUID string, principal uuid.UUID, reason string, policy gpuhealth.Policy, now time.Time) (Operated, error) {
	return operate(ctx, tx, tenant, gpuUUID, func(q *db.Queries, n *node, d db.LockGPUHealthDevicesRow) error {
		if d.ManualQuarantine != nil {
			return nil
		}
		b, err := json.Marshal(gpuhealth.Manual{PrincipalID: principal, Reason: reason, At: now})
		if err != nil {
			return fmt.Errorf("encode a manual quarantine: %w", err)
		}
		return q.SetDeviceManualQuarantine(ctx, db.SetDeviceManualQuarantineParams{ID: d.ID, Manual: b})
	}, policy, now, principal)
}

// Clear puts the tenant's GPU gpuUUID back in service for principal: an operator's quarantine
// ends, its reasons go, and the signals its daemon reports now are acknowledged, so only a new
// occurrence counts again.
func Clear(ctx context.Context, tx db.DBTX, tenant uuid.UUID, gpuUUID string, principal uuid.UUID, policy gpuhealth.Policy, now time.Time) (Operated, error) {
	return operate(ctx, tx, tenant, gpuUUID, func(q *db.Queries, n *node, d db.LockGPUHealthDevicesRow) error {
		b, err := json.Marshal(gpuhealth.Acknowledge(n.gpuSignals(d)))
		if err != nil {
			return fmt.Errorf("encode acknowledged signals: %w", err)
		}
		return q.ClearDevice(ctx, db.ClearDeviceParams{ID: d.ID, Acknowledged: b})
	}, policy, now, principal)
}

// operate finds the tenant's GPU, locks its node's GPUs, changes the GPU with change, and applies
// the policy to the node again.
func operate(ctx context.Context, tx db.DBTX, tenant uuid.UUID, gpuUUID string,
	change func(*db.Queries, *node, db.LockGPUHealthDevicesRow) error, policy gpuhealth.Policy, now time.Time, principal uuid.UUID,
) (Operated, error) {
	q := db.New(tx)
	row, err := q.GetGPU(ctx, db.GetGPUParams{TenantID: tenant, Uuid: gpuUUID})
	if errors.Is(err, pgx.ErrNoRows) {
		return Operated{}, ErrNotFound
	}
	if err != nil {
		return Operated{}, fmt.Errorf("find GPU %s: %w", gpuUUID, err)
	}
	gpu := row.Device
	n, err := load(ctx, q, gpu.NodeID)
	if err != nil {
		return Operated{}, err
	}
	if n == nil {
		return Operated{}, ErrNotFound
	}
	for _, d := range n.devices {
		if d.ID != gpu.ID {
			continue
		}
		if err := change(q, n, d); err != nil {
			return Operated{}, err
		}
		// Apply reads the GPU again, as changed.
		out, err := Apply(ctx, tx, gpu.NodeID, policy, now, &principal)
		return Operated{DeviceID: gpu.ID, NodeID: gpu.NodeID, Outcome: out}, err
	}
	return Operated{}, ErrNotFound
}

// Acknowledge puts every GPU of node back under the policy's judgement from now, as Clear does
// for one: an operator's quarantine ends and the signals its daemon reports now are acknowledged,
// so only a new occurrence counts; the node's own reasons are dropped, and what its daemon
// reports now decides again. The remediation controller calls it when a repair is done and its
// verification starts; the changes carry no principal.
func Acknowledge(ctx context.Context, tx db.DBTX, node uuid.UUID, policy gpuhealth.Policy, now time.Time) (Outcome, error) {
	q := db.New(tx)
	n, err := load(ctx, q, node)
	if err != nil || n == nil {
		return Outcome{}, err
	}
	for _, d := range n.devices {
		b, err := json.Marshal(gpuhealth.Acknowledge(n.gpuSignals(d)))
		if err != nil {
			return Outcome{}, fmt.Errorf("encode acknowledged signals: %w", err)
		}
		if err := q.ClearDevice(ctx, db.ClearDeviceParams{ID: d.ID, Acknowledged: b}); err != nil {
			return Outcome{}, fmt.Errorf("acknowledge GPU %s: %w", d.Uuid, err)
		}
	}
	// The node-wide reasons go too (a driver that did not answer before the reboot): what the
	// daemon reports now decides.
	if err := q.SetNodeGPUHealth(ctx, db.SetNodeGPUHealthParams{NodeID: node, Reasons: []byte("[]"), Quarantined: n.row.Quarantined}); err != nil {
		return Outcome{}, fmt.Errorf("acknowledge node %s: %w", node, err)
	}
	return Apply(ctx, tx, node, policy, now, nil)
}
