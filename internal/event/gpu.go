package event

import (
	"cmp"

	"github.com/google/uuid"

	"github.com/better-compute/better-compute/internal/gpuhealth"
)

// gpuSubject is the subject of a GPU's events, "gpu/<uuid>"; the catalog's zero value, with no
// UUID, reads "gpu/<id>" as other subjects do.
func gpuSubject(uuid string) string { return "gpu/" + cmp.Or(uuid, "<id>") }

// GPUHealthChange is the payload of a GPU's change of health.
type GPUHealthChange struct {
	// UUID is the GPU's UUID, its identity.
	UUID string `json:"uuid"`
	// NodeID is the node the GPU is in.
	NodeID uuid.UUID `json:"nodeId"`
	// Hostname is the node's hostname.
	Hostname string `json:"hostname"`
	// Index is the GPU's index on the node as last reported.
	Index int32 `json:"index"`
	// Model is the GPU's model.
	Model string `json:"model"`
	// Health is its health after the change: healthy, degraded or unhealthy.
	Health string `json:"health"`
	// PreviousHealth is the health it left.
	PreviousHealth string `json:"previousHealth"`
	// Reasons are why it is degraded or unhealthy (check, code, count, first and last seen,
	// effect, detail, description); none when healthy.
	Reasons []gpuhealth.Reason `json:"reasons,omitempty"`
	// LeaseID is the lease that holds the GPU, if one does.
	LeaseID *uuid.UUID `json:"leaseId,omitempty"`
	// PrincipalID is the operator whose quarantine or clear made the change; unset for the
	// health reconciler.
	PrincipalID *uuid.UUID `json:"principalId,omitempty"`
}

// Subject is "gpu/<uuid>".
func (e GPUHealthChange) Subject() string { return gpuSubject(e.UUID) }

// GPUHealthy is emitted when a degraded or unhealthy GPU is healthy again: its signals were gone
// for the policy's clean period, or an operator cleared it.
type GPUHealthy struct{ GPUHealthChange }

// Type is "gpu.healthy".
func (GPUHealthy) Type() string { return "gpu.healthy" }

// GPUDegraded is emitted when a GPU becomes degraded: watched, still placed.
type GPUDegraded struct{ GPUHealthChange }

// Type is "gpu.degraded".
func (GPUDegraded) Type() string { return "gpu.degraded" }

// GPUUnhealthy is emitted when a GPU becomes unhealthy: quarantined, no new lease is placed on
// it (a signal the policy quarantines on, a missing GPU, or an operator's quarantine).
type GPUUnhealthy struct{ GPUHealthChange }

// Type is "gpu.unhealthy".
func (GPUUnhealthy) Type() string { return "gpu.unhealthy" }

// NodeGPUChange is the payload of a node's GPU-wide quarantine changing.
type NodeGPUChange struct {
	// ID is the node's id.
	ID uuid.UUID `json:"id"`
	// Hostname is the node's hostname.
	Hostname string `json:"hostname"`
	// Reasons are the node-wide reasons (a driver that does not answer, a GPU whose signal asks
	// for the node); none when released.
	Reasons []gpuhealth.Reason `json:"reasons,omitempty"`
}

// Subject is "node/<id>".
func (e NodeGPUChange) Subject() string { return nodeSubject(e.ID) }

// NodeGPUQuarantined is emitted when a GPU health signal quarantines a whole node: no new leases
// are placed on any of its GPUs.
type NodeGPUQuarantined struct{ NodeGPUChange }

// Type is "node.gpu_quarantined".
func (NodeGPUQuarantined) Type() string { return "node.gpu_quarantined" }

// NodeGPUReleased is emitted when no GPU health signal quarantines the node any more.
type NodeGPUReleased struct{ NodeGPUChange }

// Type is "node.gpu_released".
func (NodeGPUReleased) Type() string { return "node.gpu_released" }

// LeaseGPUUnhealthy is emitted, to the lease's tenant, when a GPU a lease holds becomes
// unhealthy. The lease keeps running: its holder decides what to do (the GPU-time held on the
// unhealthy GPU is marked in usage).
type LeaseGPUUnhealthy struct {
	// ID is the lease's id.
	ID uuid.UUID `json:"id"`
	// PoolID is the pool the lease is in.
	PoolID uuid.UUID `json:"poolId"`
	// GPUUUID is the GPU's UUID.
	GPUUUID string `json:"gpuUuid"`
	// NodeID is the node the GPU is in.
	NodeID uuid.UUID `json:"nodeId"`
	// Index is the GPU's index on the node.
	Index int32 `json:"index"`
	// Reasons are why the GPU is unhealthy.
	Reasons []gpuhealth.Reason `json:"reasons"`
}

// Type is "lease.gpu_unhealthy".
func (LeaseGPUUnhealthy) Type() string { return "lease.gpu_unhealthy" }

// Subject is "lease/<id>".
func (e LeaseGPUUnhealthy) Subject() string { return "lease/" + e.ID.String() }
