package gpus

import (
	"fmt"
	"time"

	"github.com/google/uuid"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/better-compute/better-compute/gen/db"
	gpusv1 "github.com/better-compute/better-compute/gen/go/bettercompute/gpus/v1"
	"github.com/better-compute/better-compute/internal/gpuhealth"
)

// healthStates maps the stored health (devices.health) to the API's enum; anything else is
// HEALTH_STATE_UNSPECIFIED.
var healthStates = map[gpuhealth.Health]gpusv1.HealthState{
	gpuhealth.Healthy:   gpusv1.HealthState_HEALTH_STATE_HEALTHY,
	gpuhealth.Degraded:  gpusv1.HealthState_HEALTH_STATE_DEGRADED,
	gpuhealth.Unhealthy: gpusv1.HealthState_HEALTH_STATE_UNHEALTHY,
}

// HealthState is the API's name for a stored health (devices.health, gpu_health_changes); an
// unknown one is HEALTH_STATE_UNSPECIFIED. nodes/get uses it for its GPUs too, so a GPU's health
// reads the same in both services.
func HealthState(h string) gpusv1.HealthState { return healthStates[gpuhealth.Health(h)] }

// healthOf is the stored health an API state filters on; false for HEALTH_STATE_UNSPECIFIED and
// numbers the enum does not have.
func healthOf(s gpusv1.HealthState) (gpuhealth.Health, bool) {
	for h, v := range healthStates {
		if v == s {
			return h, true
		}
	}
	return "", false
}

// Reasons decodes a stored reasons column (devices.health_reasons, gpu_health_changes.reasons)
// into the API's reasons, in their stored order. nodes/get uses it for its GPUs too.
func Reasons(b []byte) ([]*gpusv1.HealthReason, error) {
	rs, err := gpuhealth.DecodeReasons(b)
	if err != nil {
		return nil, err
	}
	out := make([]*gpusv1.HealthReason, 0, len(rs))
	for _, r := range rs {
		out = append(out, &gpusv1.HealthReason{
			Check: r.Check, Code: r.Code, Count: r.Count, FirstSeenTime: timestamp(r.FirstSeen),
			LastSeenTime: timestamp(r.LastSeen), Effect: string(r.Effect), Detail: r.Detail, Description: r.Description,
		})
	}
	return out, nil
}

// timestamp is t for the API, unset for the zero time (a reason or quarantine stored without it).
func timestamp(t time.Time) *timestamppb.Timestamp {
	if t.IsZero() {
		return nil
	}
	return timestamppb.New(t)
}

// gpuToProto describes a stored GPU with its node's hostname and the lease holding it.
func gpuToProto(d db.Device, hostname string, lease *uuid.UUID) (*gpusv1.Gpu, error) {
	out := &gpusv1.Gpu{
		Uuid: d.Uuid, NodeId: d.NodeID.String(), Hostname: hostname, Index: d.Idx, Model: d.Model,
		Serial: d.Serial, PciBusId: d.PciBusID, MemoryBytes: d.MemoryBytes, Present: d.Present,
		Health: HealthState(d.Health),
	}
	var err error
	if out.Reasons, err = Reasons(d.HealthReasons); err != nil {
		return nil, fmt.Errorf("GPU %s of node %s: %w", d.Uuid, d.NodeID, err)
	}
	if d.HealthChangedAt != nil {
		out.HealthChangeTime = timestamppb.New(*d.HealthChangedAt)
	}
	if d.ClearedAt != nil {
		out.ClearTime = timestamppb.New(*d.ClearedAt)
	}
	m, err := gpuhealth.DecodeManual(d.ManualQuarantine)
	if err != nil {
		return nil, fmt.Errorf("GPU %s of node %s: %w", d.Uuid, d.NodeID, err)
	}
	if m != nil {
		out.ManualQuarantine = &gpusv1.ManualQuarantine{PrincipalId: m.PrincipalID.String(), Reason: m.Reason, Time: timestamp(m.At)}
	}
	if lease != nil {
		out.LeaseId = lease.String()
	}
	return out, nil
}

// changeToProto describes one entry of a GPU's history.
func changeToProto(c db.GpuHealthChange) (*gpusv1.HealthChange, error) {
	reasons, err := Reasons(c.Reasons)
	if err != nil {
		return nil, fmt.Errorf("health change %d: %w", c.ID, err)
	}
	out := &gpusv1.HealthChange{
		Time: timestamppb.New(c.At), From: HealthState(c.FromHealth), To: HealthState(c.ToHealth), Reasons: reasons,
	}
	if c.PrincipalID != nil {
		out.PrincipalId = c.PrincipalID.String()
	}
	return out, nil
}
