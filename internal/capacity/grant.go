package capacity

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"time"

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
	// MaxAmount bounds each amount of a grant.
	MaxAmount = 1_000_000
	// MaxModels bounds the GPU models a grant names.
	MaxModels = 64
)

// Resources is an amount of a pool's capacity: GPUs by model, CPUs and memory. It is how
// pool_grants stores nominal quotas and borrowing limits, and its JSON is the protojson of
// bettercompute.pools.v1.Resources. The zero value is nothing.
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
