package event

import (
	"time"

	"github.com/google/uuid"
)

// RemediationChange is the payload of a remediation's events.
type RemediationChange struct {
	// ID is the remediation's id.
	ID uuid.UUID `json:"id"`
	// NodeID is the node being repaired.
	NodeID uuid.UUID `json:"nodeId"`
	// GPUUUID is the GPU at fault; empty when the node is.
	GPUUUID string `json:"gpuUuid,omitempty"`
	// Reason is the health reason it repairs, as "check code" ("xid 79").
	Reason string `json:"reason"`
	// Ladder is the policy's ladder it climbs ("reset", "reboot", "service").
	Ladder string `json:"ladder"`
	// State is its state after the change: waiting, running, succeeded, service, cancelled or
	// failed.
	State string `json:"state"`
	// Step is the index of the step the change is about (the current one for other events).
	Step int32 `json:"step"`
	// Action is the step's action (drain, gpuReset, reboot, powerCycle, diagnose, verify,
	// service); for a step event.
	Action string `json:"action,omitempty"`
	// Outcome is what the step did: passed, failed, skipped or unavailable; for a step event.
	Outcome string `json:"outcome,omitempty"`
	// Detail is what the step said: a command's error, a diagnostic's failing tests.
	Detail string `json:"detail,omitempty"`
}

// Subject is "remediation/<id>".
func (e RemediationChange) Subject() string { return "remediation/" + e.ID.String() }

// RemediationStarted is emitted when a remediation is opened, by a GPU or node turning unhealthy
// or by hand (remediations/create); it waits for its turn within its pools' budgets.
type RemediationStarted struct{ RemediationChange }

// Type is "remediation.started".
func (RemediationStarted) Type() string { return "remediation.started" }

// RemediationStep is emitted when a step of a remediation ends.
type RemediationStep struct{ RemediationChange }

// Type is "remediation.step".
func (RemediationStep) Type() string { return "remediation.step" }

// RemediationSucceeded is emitted when a remediation's checks passed: the node is back in service.
type RemediationSucceeded struct{ RemediationChange }

// Type is "remediation.succeeded".
func (RemediationSucceeded) Type() string { return "remediation.succeeded" }

// RemediationCancelled is emitted when an operator cancels a remediation (the node stays as it
// is: drained, if the remediation drained it).
type RemediationCancelled struct{ RemediationChange }

// Type is "remediation.cancelled".
func (RemediationCancelled) Type() string { return "remediation.cancelled" }

// GPUServiceRequired is emitted when a remediation ends in service: the hardware needs people.
// It carries what a replacement ticket needs; a webhook on it can open one.
type GPUServiceRequired struct {
	RemediationChange
	// Hostname is the node's hostname.
	Hostname string `json:"hostname"`
	// Serial is the GPU's serial number; empty when the node as a whole is at fault.
	Serial string `json:"serial,omitempty"`
	// PCIBusID is the GPU's PCI bus id.
	PCIBusID string `json:"pciBusId,omitempty"`
	// Model is the GPU's model.
	Model string `json:"model,omitempty"`
	// Repeats is how many earlier remediations the GPU had within the policy's window.
	Repeats int64 `json:"repeats"`
	// Tried is what each step did, in order ("gpuReset: failed: …").
	Tried []string `json:"tried"`
}

// Type is "remediation.service_required".
func (GPUServiceRequired) Type() string { return "remediation.service_required" }

// LeaseNodeRemediation is emitted, to a lease's tenant, when a node the lease holds is drained
// for a remediation: the lease ends at EndsAt (the pool's grace period) unless released first.
type LeaseNodeRemediation struct {
	// ID is the lease's id.
	ID uuid.UUID `json:"id"`
	// PoolID is the pool the lease is in.
	PoolID uuid.UUID `json:"poolId"`
	// NodeID is the node being repaired.
	NodeID uuid.UUID `json:"nodeId"`
	// Reason is the health reason ("xid 79").
	Reason string `json:"reason"`
	// EndsAt is when the lease ends.
	EndsAt time.Time `json:"endsAt"`
}

// Type is "lease.node_remediation".
func (LeaseNodeRemediation) Type() string { return "lease.node_remediation" }

// Subject is "lease/<id>".
func (e LeaseNodeRemediation) Subject() string { return "lease/" + e.ID.String() }

// LeaseIdle is emitted, to a lease's tenant, when the mean utilisation of the lease's GPUs stayed
// under its pool's idle policy's threshold for the policy's window; with the release action the
// lease is released at ReleaseAt unless its GPUs get busy first.
type LeaseIdle struct {
	// ID is the lease's id.
	ID uuid.UUID `json:"id"`
	// PoolID is the pool the lease is in.
	PoolID uuid.UUID `json:"poolId"`
	// MeanUtilization is the GPUs' mean utilisation (percent) over the window.
	MeanUtilization float64 `json:"meanUtilization"`
	// MinUtilization is the policy's threshold (percent).
	MinUtilization float64 `json:"minUtilization"`
	// Window is the policy's window, as Go writes durations ("30m0s").
	Window string `json:"window"`
	// Action is the policy's: notify, release or lend.
	Action string `json:"action"`
	// ReleaseAt is when the lease is released if still idle; unset for notify and lend.
	ReleaseAt *time.Time `json:"releaseAt,omitempty"`
	// LendAt is when the lease's GPUs are lent if still idle; unset unless lend.
	LendAt *time.Time `json:"lendAt,omitempty"`
}

// Type is "lease.idle".
func (LeaseIdle) Type() string { return "lease.idle" }

// Subject is "lease/<id>".
func (e LeaseIdle) Subject() string { return "lease/" + e.ID.String() }

// LeaseLent is emitted, to a lease's tenant, when its idle GPUs were lent under its pool's idle
// policy (action lend): the lease holds none of them, and is not billed for them, until it wakes
// (leases/wake, or tunnel activity where the policy counts it).
type LeaseLent struct {
	// ID is the lease's id.
	ID uuid.UUID `json:"id"`
	// PoolID is the pool the lease is in.
	PoolID uuid.UUID `json:"poolId"`
	// GPUs is how many GPUs were lent.
	GPUs int32 `json:"gpus"`
	// Since is when they were lent.
	Since time.Time `json:"since"`
}

// Type is "lease.lent".
func (LeaseLent) Type() string { return "lease.lent" }

// Subject is "lease/<id>".
func (e LeaseLent) Subject() string { return "lease/" + e.ID.String() }

// LeaseWoke is emitted, to a lease's tenant, when a lent lease holds its GPUs again, the same
// ones, once the leases that borrowed them were preempted and ended.
type LeaseWoke struct {
	// ID is the lease's id.
	ID uuid.UUID `json:"id"`
	// PoolID is the pool the lease is in.
	PoolID uuid.UUID `json:"poolId"`
	// GPUs is how many GPUs it got back.
	GPUs int32 `json:"gpus"`
	// LentSince is when they had been lent.
	LentSince time.Time `json:"lentSince"`
	// WakeRequestedAt is when the lease asked for them back.
	WakeRequestedAt time.Time `json:"wakeRequestedAt"`
}

// Type is "lease.woke".
func (LeaseWoke) Type() string { return "lease.woke" }

// Subject is "lease/<id>".
func (e LeaseWoke) Subject() string { return "lease/" + e.ID.String() }
