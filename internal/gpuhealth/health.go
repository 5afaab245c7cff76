package gpuhealth

import (
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/google/uuid"
)

// Health is a GPU's health state (devices.health).
type Health string

// Health states, from best to worst.
const (
	// Healthy: nothing the policy acts on.
	Healthy Health = "healthy"
	// Degraded: watched, still placed.
	Degraded Health = "degraded"
	// Unhealthy: quarantined; the placer allocates it to no new lease.
	Unhealthy Health = "unhealthy"
)

// Effect is what a policy does with a signal.
type Effect string

// Effects, from weakest to strongest (Stronger orders them).
const (
	// EffectIgnore: the signal is shown with the GPU's signals and changes nothing.
	EffectIgnore Effect = "ignore"
	// EffectDegrade: the GPU is degraded.
	EffectDegrade Effect = "degrade"
	// EffectQuarantineGPU: the GPU is unhealthy; the node's other GPUs stay leasable.
	EffectQuarantineGPU Effect = "quarantine_gpu"
	// EffectQuarantineNode: the GPU is unhealthy and the whole node gets no new leases.
	EffectQuarantineNode Effect = "quarantine_node"
	// EffectDrainNode: as EffectQuarantineNode, and the node is drained (its leases run to their
	// end; it becomes drained once none is left).
	EffectDrainNode Effect = "drain_node"
)

var effectRank = map[Effect]int{EffectIgnore: 0, EffectDegrade: 1, EffectQuarantineGPU: 2, EffectQuarantineNode: 3, EffectDrainNode: 4}

// Valid reports whether e is one of the effects.
func (e Effect) Valid() bool { _, ok := effectRank[e]; return ok }

// Stronger reports whether e does more than o.
func (e Effect) Stronger(o Effect) bool { return effectRank[e] > effectRank[o] }

// Health is the GPU health an effect gives.
func (e Effect) Health() Health {
	switch {
	case e == EffectDegrade:
		return Degraded
	case e.Stronger(EffectDegrade):
		return Unhealthy
	default:
		return Healthy
	}
}

// NodeWide reports whether the effect reaches the whole node.
func (e Effect) NodeWide() bool { return e == EffectQuarantineNode || e == EffectDrainNode }

// Reason is one signal the policy acts on, as devices.health_reasons, node_gpu_health.reasons
// and the history keep it (JSON).
type Reason struct {
	Check     string    `json:"check"`
	Code      int64     `json:"code,omitempty"`
	Count     int64     `json:"count,omitempty"`
	FirstSeen time.Time `json:"firstSeen"`
	LastSeen  time.Time `json:"lastSeen"`
	Effect    Effect    `json:"effect"`
	// Detail is what the daemon's source said, or an operator's reason.
	Detail string `json:"detail,omitempty"`
	// Description is the policy's words for the signal.
	Description string `json:"description,omitempty"`
	// GoneSince is when the signal stopped (left the daemon's snapshot, or its window passed):
	// the reason stays for the policy's clean period after it.
	GoneSince *time.Time `json:"goneSince,omitempty"`
}

// Acknowledged is a signal an operator's Clear acknowledged (devices.acknowledged, JSON): the
// same signal with no higher count is no new occurrence.
type Acknowledged struct {
	Check string `json:"check"`
	Code  int64  `json:"code,omitempty"`
	Count int64  `json:"count,omitempty"`
}

// Manual is an operator's quarantine (devices.manual_quarantine, JSON).
type Manual struct {
	PrincipalID uuid.UUID `json:"principalId"`
	Reason      string    `json:"reason"`
	At          time.Time `json:"at"`
}

// DecodeReasons reads a reasons column; empty is none.
func DecodeReasons(b []byte) ([]Reason, error) {
	if len(b) == 0 {
		return nil, nil
	}
	var rs []Reason
	if err := json.Unmarshal(b, &rs); err != nil {
		return nil, fmt.Errorf("decode GPU health reasons: %w", err)
	}
	return rs, nil
}

// EncodeReasons writes a reasons column: "[]" for none.
func EncodeReasons(rs []Reason) ([]byte, error) {
	if rs == nil {
		rs = []Reason{}
	}
	b, err := json.Marshal(rs)
	if err != nil {
		return nil, fmt.Errorf("encode GPU health reasons: %w", err)
	}
	return b, nil
}

// DecodeManual reads a manual_quarantine column; nil when NULL.
func DecodeManual(b []byte) (*Manual, error) {
	if len(b) == 0 {
		return nil, nil
	}
	var m Manual
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, fmt.Errorf("decode a manual quarantine: %w", err)
	}
	return &m, nil
}

// DecodeAcknowledged reads devices.acknowledged; empty is none.
func DecodeAcknowledged(b []byte) ([]Acknowledged, error) {
	if len(b) == 0 {
		return nil, nil
	}
	var as []Acknowledged
	if err := json.Unmarshal(b, &as); err != nil {
		return nil, fmt.Errorf("decode acknowledged GPU signals: %w", err)
	}
	return as, nil
}

// SameReasons reports whether two lists of reasons say the same, times compared as instants (a
// list read back from the database has lost its times' locations).
func SameReasons(a, b []Reason) bool {
	return slices.EqualFunc(a, b, func(x, y Reason) bool {
		if (x.GoneSince == nil) != (y.GoneSince == nil) || (x.GoneSince != nil && !x.GoneSince.Equal(*y.GoneSince)) {
			return false
		}
		return x.Check == y.Check && x.Code == y.Code && x.Count == y.Count && x.FirstSeen.Equal(y.FirstSeen) &&
			x.LastSeen.Equal(y.LastSeen) && x.Effect == y.Effect && x.Detail == y.Detail && x.Description == y.Description
	})
}
