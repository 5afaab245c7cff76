package event

import "github.com/google/uuid"

// TenantRef is the payload of a tenant's events: which tenant.
type TenantRef struct {
	// ID is the tenant's id.
	ID uuid.UUID `json:"id"`
	// Name is the tenant's name.
	Name string `json:"name"`
}

// Subject is "tenant/<id>".
func (e TenantRef) Subject() string { return "tenant/" + e.ID.String() }

// TenantCreated is emitted by iam/createTenant, in the parent tenant's events.
type TenantCreated struct{ TenantRef }

// Type is "tenant.created".
func (TenantCreated) Type() string { return "tenant.created" }

// TenantSuspended is emitted by iam/suspendTenant, in the parent tenant's events: the tenant's
// keys are refused until it is resumed.
type TenantSuspended struct{ TenantRef }

// Type is "tenant.suspended".
func (TenantSuspended) Type() string { return "tenant.suspended" }

// TenantResumed is emitted by iam/resumeTenant, in the parent tenant's events.
type TenantResumed struct{ TenantRef }

// Type is "tenant.resumed".
func (TenantResumed) Type() string { return "tenant.resumed" }

// TenantDeleted is emitted by iam/deleteTenant, in the parent tenant's events, with what the
// deletion ended.
type TenantDeleted struct {
	TenantRef
	// RevokedApiKeys is how many API keys were revoked.
	RevokedApiKeys int64 `json:"revokedApiKeys"`
	// RevokedNodes is how many nodes were revoked.
	RevokedNodes int64 `json:"revokedNodes"`
	// EndedLeases is how many leases were ended (as failed).
	EndedLeases int64 `json:"endedLeases"`
}

// Type is "tenant.deleted".
func (TenantDeleted) Type() string { return "tenant.deleted" }
