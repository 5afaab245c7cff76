package event

import (
	"time"

	"github.com/google/uuid"
)

// LeaseChange is the payload of a pool lease's events.
type LeaseChange struct {
	// ID is the lease's id.
	ID uuid.UUID `json:"id"`
	// PoolID is the pool the lease is in.
	PoolID uuid.UUID `json:"poolId"`
	// State is the lease's state after the change.
	State string `json:"state"`
	// PreviousState is the state it left, when it changed state.
	PreviousState string `json:"previousState,omitempty"`
	// Reason says why, for at_risk, released and failed leases.
	Reason string `json:"reason,omitempty"`
	// NodeIDs are the nodes a placed lease holds devices or resources on; for a lease that ended,
	// those it held until then.
	NodeIDs []uuid.UUID `json:"nodeIds,omitempty"`
	// EndTime is when the lease ends (placed, extended) or ended.
	EndTime *time.Time `json:"endTime,omitempty"`
}

// Subject is "lease/<id>".
func (e LeaseChange) Subject() string { return "lease/" + e.ID.String() }

// LeaseCreated is emitted by leases/create: a pending lease waits for the placer.
type LeaseCreated struct{ LeaseChange }

// Type is "lease.created".
func (LeaseCreated) Type() string { return "lease.created" }

// LeasePlaced is emitted when the placer places a pending lease on nodes, or when every node of
// an at_risk lease is back online.
type LeasePlaced struct{ LeaseChange }

// Type is "lease.placed".
func (LeasePlaced) Type() string { return "lease.placed" }

// LeaseAtRisk is emitted by the liveness job when a node a placed lease holds goes offline; the
// lease keeps what it holds.
type LeaseAtRisk struct{ LeaseChange }

// Type is "lease.at_risk".
func (LeaseAtRisk) Type() string { return "lease.at_risk" }

// LeaseExtended is emitted by leases/extend, with the new end.
type LeaseExtended struct{ LeaseChange }

// Type is "lease.extended".
func (LeaseExtended) Type() string { return "lease.extended" }

// LeaseReleased is emitted by leases/release: the lease ended now and freed what it held.
type LeaseReleased struct{ LeaseChange }

// Type is "lease.released".
func (LeaseReleased) Type() string { return "lease.released" }

// LeaseExpired is emitted by the placer when a lease reaches its end.
type LeaseExpired struct{ LeaseChange }

// Type is "lease.expired".
func (LeaseExpired) Type() string { return "lease.expired" }

// LeasePreempted is emitted by the placer when it takes a lease's capacity back: for a tenant
// within its nominal quota in the pool (the lease was borrowing), or, where the pool allows it,
// for a higher-priority lease of the same tenant. EndTime is when the lease frees what it holds,
// after the pool's grace period. It goes to the lease's tenant and, when another tenant owns the
// pool, to the owner too.
type LeasePreempted struct {
	LeaseChange
	// TenantID is the tenant that held the lease.
	TenantID uuid.UUID `json:"tenantId"`
	// Priority is the lease's priority.
	Priority int32 `json:"priority"`
	// Borrowing is whether the lease ran beyond its tenant's nominal quota.
	Borrowing bool `json:"borrowing"`
	// ForLeaseID is the pending lease the capacity was taken back for: in the pool owner's
	// event, and in the lease tenant's when the lease is its own; another tenant's lease ids
	// are never shown to a grantee.
	ForLeaseID *uuid.UUID `json:"forLeaseId,omitempty"`
}

// Type is "lease.preempted".
func (LeasePreempted) Type() string { return "lease.preempted" }

// LeaseFailed is emitted when a lease ends without being released or expiring: the placer cannot
// place it, its reservation was cancelled, or its tenant was deleted.
type LeaseFailed struct{ LeaseChange }

// Type is "lease.failed".
func (LeaseFailed) Type() string { return "lease.failed" }

// ReservationChange is the payload of a reservation's events.
type ReservationChange struct {
	// ID is the reservation's id.
	ID uuid.UUID `json:"id"`
	// PoolID is the reserved pool.
	PoolID uuid.UUID `json:"poolId"`
	// StartTime is when the reservation starts.
	StartTime time.Time `json:"startTime"`
	// EndTime is when it ends.
	EndTime time.Time `json:"endTime"`
	// State is "active" or "cancelled".
	State string `json:"state"`
}

// Subject is "reservation/<id>".
func (e ReservationChange) Subject() string { return "reservation/" + e.ID.String() }

// ReservationCreated is emitted by reservations/create.
type ReservationCreated struct{ ReservationChange }

// Type is "reservation.created".
func (ReservationCreated) Type() string { return "reservation.created" }

// ReservationCancelled is emitted by reservations/cancel; its pending leases fail.
type ReservationCancelled struct{ ReservationChange }

// Type is "reservation.cancelled".
func (ReservationCancelled) Type() string { return "reservation.cancelled" }
