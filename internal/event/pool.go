package event

import (
	"encoding/json"

	"github.com/google/uuid"
)

// poolSubject is the subject of a pool's events.
func poolSubject(id uuid.UUID) string { return "pool/" + id.String() }

// PoolDefinition is the payload of a pool's creation or change: its name and membership.
type PoolDefinition struct {
	// ID is the pool's id.
	ID uuid.UUID `json:"id"`
	// Name is the pool's name.
	Name string `json:"name"`
	// NodeSelector is the labels that make a node a member; null when none.
	NodeSelector map[string]string `json:"nodeSelector"`
	// NodeIDs are the nodes named as members.
	NodeIDs []uuid.UUID `json:"nodeIds"`
}

// Subject is "pool/<id>".
func (e PoolDefinition) Subject() string { return poolSubject(e.ID) }

// PoolCreated is emitted by pools/create.
type PoolCreated struct{ PoolDefinition }

// Type is "pool.created".
func (PoolCreated) Type() string { return "pool.created" }

// PoolUpdated is emitted by pools/update.
type PoolUpdated struct{ PoolDefinition }

// Type is "pool.updated".
func (PoolUpdated) Type() string { return "pool.updated" }

// PoolDeleted is emitted by pools/delete.
type PoolDeleted struct {
	// ID is the pool's id.
	ID uuid.UUID `json:"id"`
	// Name is the pool's name.
	Name string `json:"name"`
}

// Type is "pool.deleted".
func (PoolDeleted) Type() string { return "pool.deleted" }

// Subject is "pool/<id>".
func (e PoolDeleted) Subject() string { return poolSubject(e.ID) }

// PoolQuotaSet is emitted by pools/setQuota.
type PoolQuotaSet struct {
	// ID is the pool's id.
	ID uuid.UUID `json:"id"`
	// TenantID is the tenant the quota applies to.
	TenantID uuid.UUID `json:"tenantId"`
	// Quota is the new quota; a limit left out is unlimited.
	Quota PoolQuota `json:"quota"`
}

// Type is "pool.quota_set".
func (PoolQuotaSet) Type() string { return "pool.quota_set" }

// Subject is "pool/<id>".
func (e PoolQuotaSet) Subject() string { return poolSubject(e.ID) }

// PoolQuota is a tenant's limits in a pool.
type PoolQuota struct {
	// MaxGpus bounds the GPUs the tenant's leases hold.
	MaxGpus *int32 `json:"maxGpus,omitempty"`
	// MaxCpus bounds their CPUs.
	MaxCpus *int32 `json:"maxCpus,omitempty"`
	// MaxMemoryBytes bounds their memory.
	MaxMemoryBytes *int64 `json:"maxMemoryBytes,omitempty"`
	// MaxLeases bounds how many leases the tenant holds at once.
	MaxLeases *int32 `json:"maxLeases,omitempty"`
}

// PoolGrantChange is the payload of a grant's events.
type PoolGrantChange struct {
	// ID is the granted pool's id.
	ID uuid.UUID `json:"id"`
	// GrantID is the grant's id.
	GrantID uuid.UUID `json:"grantId"`
	// TenantID is the grantee.
	TenantID uuid.UUID `json:"tenantId"`
	// Nominal is what the grantee may always lease, as capacity.Resources JSON.
	Nominal json.RawMessage `json:"nominal,omitempty"`
	// BorrowingLimit is how much beyond nominal it may borrow, as capacity.Resources JSON.
	BorrowingLimit json.RawMessage `json:"borrowingLimit,omitempty"`
	// Weight is the grantee's fair-share weight.
	Weight int32 `json:"weight,omitempty"`
}

// Subject is "pool/<pool id>".
func (e PoolGrantChange) Subject() string { return poolSubject(e.ID) }

// PoolGranted is emitted by pools/grant, to the owner and to the grantee.
type PoolGranted struct{ PoolGrantChange }

// Type is "pool.granted".
func (PoolGranted) Type() string { return "pool.granted" }

// PoolGrantRevoked is emitted by pools/revokeGrant, to the owner and to the grantee.
type PoolGrantRevoked struct{ PoolGrantChange }

// Type is "pool.grant_revoked".
func (PoolGrantRevoked) Type() string { return "pool.grant_revoked" }
