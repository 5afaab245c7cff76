package event

import "github.com/google/uuid"

// PoolScaling is the payload of an autoscaling decision about a pool (the provision module's
// autoscaler), emitted in the transaction that records the decision and acts on it.
type PoolScaling struct {
	// ID is the pool's id.
	ID uuid.UUID `json:"id"`
	// Class is the machine class the pool scales with.
	Class string `json:"class"`
	// Count is how many machines the decision creates or deletes; 0 when blocked.
	Count int32 `json:"count"`
	// MachineIDs are the machines created or deleted.
	MachineIDs []uuid.UUID `json:"machineIds"`
	// Machines is how many machines the pool has, neither gone nor failed, after the decision.
	Machines int32 `json:"machines"`
	// Reason says why: the leases provisioned for, the idle time, the limit in the way.
	Reason string `json:"reason"`
}

// Subject is "pool/<id>".
func (e PoolScaling) Subject() string { return poolSubject(e.ID) }

// PoolScaledUp is emitted when the autoscaler creates machines for a pool: pending leases that
// could not fit for longer than the scale-up delay, or fewer machines than the pool's min.
type PoolScaledUp struct{ PoolScaling }

// Type is "pool.scaled_up".
func (PoolScaledUp) Type() string { return "pool.scaled_up" }

// PoolScaledDown is emitted when the autoscaler deletes a machine of a pool whose node held no
// lease for the scale-down idle time, or a failed machine it replaces.
type PoolScaledDown struct{ PoolScaling }

// Type is "pool.scaled_down".
func (PoolScaledDown) Type() string { return "pool.scaled_down" }

// PoolScaleBlocked is emitted when pending leases cannot fit and the autoscaler cannot help:
// the pool is at its max, the tenant at its machine cap, or no machine of the class would fit
// them. A reason is emitted once until it changes.
type PoolScaleBlocked struct{ PoolScaling }

// Type is "pool.scale_blocked".
func (PoolScaleBlocked) Type() string { return "pool.scale_blocked" }
