package capacity

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/google/uuid"

	"github.com/better-compute/better-compute/gen/db"
)

// LeasePreempted is the state of a lease whose capacity the placer took back. It keeps what it
// holds until its end (the pool's grace period after the preemption), then ends, staying
// preempted.
const LeasePreempted = db.LeaseStatePreempted

// Bounds of shared capacity.
const (
	// DefaultPreemptionGrace is a new pool's grace period.
	DefaultPreemptionGrace = 30 * time.Second
	// MaxPreemptionGrace is the longest grace period a pool may set.
	MaxPreemptionGrace = time.Hour
	// MinPriority and MaxPriority bound a lease's priority.
	MinPriority, MaxPriority = -1000, 1000
	// MaxWeight bounds a grant's fair-share weight (the least is 1).
	MaxWeight = 1000
	// MaxAmount bounds each amount of a grant but memory: GPUs of a model, CPUs.
	MaxAmount = 1_000_000
	// MaxMemoryBytes bounds a grant's memory: a million GiB.
	MaxMemoryBytes = int64(MaxAmount) << 30
	// MaxModels bounds the GPU models a grant names.
	MaxModels = 64
)

// Resources is an amount of a pool's capacity: GPUs by model, CPUs and memory. It is how
// pool_grants stores nominal quotas and borrowing limits: JSON with the field names of
// bettercompute.pools.v1.Resources, every amount a number (memoryBytes too, unlike protojson).
// The zero value is nothing.
type Resources struct {
	GPUs        map[string]int32 `json:"gpus,omitempty"`
	CPUs        int32            `json:"cpus,omitempty"`
	MemoryBytes int64            `json:"memoryBytes,omitempty"`
}

// IsZero reports whether r is nothing at all.
func (r Resources) IsZero() bool {
	for _, n := range r.GPUs {
		if n != 0 {
			return false
		}
	}
	return r.CPUs == 0 && r.MemoryBytes == 0
}

// Models lists the GPU models r names, sorted.
func (r Resources) Models() []string { return slices.Sorted(maps.Keys(r.GPUs)) }

// Encode is r's JSON, as pool_grants stores it.
func (r Resources) Encode() ([]byte, error) {
	b, err := json.Marshal(r)
	if err != nil {
		return nil, fmt.Errorf("encode resources: %w", err)
	}
	return b, nil
}

// DecodeResources reads resources as pool_grants stores them.
func DecodeResources(b []byte) (Resources, error) {
	var r Resources
	if len(b) == 0 {
		return r, nil
	}
	if err := json.Unmarshal(b, &r); err != nil {
		return r, fmt.Errorf("decode resources: %w", err)
	}
	return r, nil
}

// Grant is a pool shared with a tenant other than its owner: what the grantee may always lease
// (Nominal), how much beyond that it may borrow while the capacity sits idle (BorrowingLimit), and
// its share of borrowable capacity relative to other borrowers (Weight).
type Grant struct {
	ID, PoolID, Owner, Tenant uuid.UUID
	Nominal, BorrowingLimit   Resources
	Weight                    int32
}

// GrantFromRow reads a grant as pool_grants stores it.
func GrantFromRow(id, poolID, owner, tenant uuid.UUID, nominal, borrowingLimit []byte, weight int32) (Grant, error) {
	g := Grant{ID: id, PoolID: poolID, Owner: owner, Tenant: tenant, Weight: weight}
	var err error
	if g.Nominal, err = DecodeResources(nominal); err != nil {
		return g, fmt.Errorf("grant %s: nominal: %w", id, err)
	}
	if g.BorrowingLimit, err = DecodeResources(borrowingLimit); err != nil {
		return g, fmt.Errorf("grant %s: borrowing limit: %w", id, err)
	}
	return g, nil
}

// Most is the most the grantee may hold at once: nominal and borrowing limit together.
func (g Grant) Most() Resources {
	out := Resources{
		GPUs:        map[string]int32{},
		CPUs:        g.Nominal.CPUs + g.BorrowingLimit.CPUs,
		MemoryBytes: g.Nominal.MemoryBytes + g.BorrowingLimit.MemoryBytes,
	}
	for m, n := range g.Nominal.GPUs {
		out.GPUs[m] += n
	}
	for m, n := range g.BorrowingLimit.GPUs {
		out.GPUs[m] += n
	}
	return out
}
