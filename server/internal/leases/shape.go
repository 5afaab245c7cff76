package leases

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/better-compute/better-compute/gen/db"
	leasesv1 "github.com/better-compute/better-compute/gen/go/bettercompute/leases/v1"
	"github.com/better-compute/better-compute/internal/apierr"
	"github.com/better-compute/better-compute/internal/capacity"
)

// What the members of a pool offer, the most a lease can ask of it: its GPUs by model, and its
// largest node's CPUs and memory. Reading it joins every member node with its resources (about
// 7 ms at 2,000 members), which every leases/create used to do, so the admission of a busy pool
// was bound by it; shapes keeps each pool's for shapeTTL instead.
//
// A cached shape only ever admits: a lease it would refuse is checked again against a fresh
// read, so a pool that just gained members takes leases at once, and a refusal is always the
// pool as it is. A lease admitted on a shape up to shapeTTL old that its pool can no longer hold
// waits for capacity in the placer, as any lease does when members leave after its admission.
const (
	shapeTTL = time.Second
	// maxShapes bounds the cache: past it, it starts over empty.
	maxShapes = 4096
)

type shape struct {
	models []db.PoolGPUModelsRow   // the GPU side; nil until a lease with GPUs reads it
	nodes  *db.PoolNodeCapacityRow // the CPU and memory side; nil until a lease without GPUs reads it
	at     time.Time
}

// has says whether the shape holds the side req is checked against.
func (p shape) has(req *leasesv1.CreateRequest) bool {
	if req.GetGpus() > 0 {
		return p.models != nil
	}
	return p.nodes != nil
}

// shapes caches pool shapes by pool id. Pool ids are global and the caller's access to the pool
// is checked before its shape is read, so the cache is shared by tenants.
type shapes struct {
	mu sync.Mutex
	m  map[uuid.UUID]shape
}

func (c *shapes) get(pool uuid.UUID) (shape, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	s, ok := c.m[pool]
	return s, ok && time.Since(s.at) < shapeTTL
}

func (c *shapes) put(pool uuid.UUID, s shape) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil || len(c.m) >= maxShapes {
		c.m = make(map[uuid.UUID]shape)
	}
	c.m[pool] = s
}

// admits says whether the pool's cached shape, fresh and with the side req is checked against,
// admits req, and on which GPU model. It reads nothing: a pool without such a shape, or whose
// shape refuses, is for admitShape.
func (c *shapes) admits(pool uuid.UUID, req *leasesv1.CreateRequest) (string, bool) {
	cached, ok := c.get(pool)
	if !ok || !cached.has(req) {
		return "", false
	}
	model, err := cached.admit(req)
	return model, err == nil
}

// admitShape checks that the pool's members could hold the lease at all, and returns the GPU
// model it will run on (the pool's only model when the request names none).
func (s *Service) admitShape(ctx context.Context, q *db.Queries, poolID uuid.UUID, req *leasesv1.CreateRequest) (string, error) {
	cached, ok := s.shapes.get(poolID)
	if ok && cached.has(req) {
		if model, err := cached.admit(req); err == nil {
			return model, nil
		}
	}
	fresh := shape{at: time.Now()}
	if ok { // keep the other side, as old as it was
		fresh = cached
	}
	if req.GetGpus() > 0 {
		models, err := q.PoolGPUModels(ctx, poolID)
		if err != nil {
			return "", fmt.Errorf("read the pool's GPUs: %w", err)
		}
		fresh.models = append(make([]db.PoolGPUModelsRow, 0, len(models)), models...) // never nil
	} else {
		caps, err := q.PoolNodeCapacity(ctx, []uuid.UUID{poolID})
		if err != nil {
			return "", fmt.Errorf("read the pool's nodes: %w", err)
		}
		fresh.nodes = &db.PoolNodeCapacityRow{}
		if len(caps) == 1 {
			fresh.nodes = &caps[0]
		}
	}
	s.shapes.put(poolID, fresh)
	model, err := fresh.admit(req)
	if err == nil {
		return model, nil
	}
	// The members cannot hold it; machines the pool can grow by may.
	g, gerr := q.GetPoolGrowth(ctx, poolID)
	switch {
	case errors.Is(gerr, pgx.ErrNoRows):
		return "", err
	case gerr != nil:
		return "", fmt.Errorf("read the pool's growth: %w", gerr)
	}
	if model, ok := capacity.GrowthFits(g, req.GetGpuModel(), req.GetGpus(), req.GetCpus(), req.GetMemoryBytes()); ok {
		return model, nil
	}
	return "", err
}

// admit is admitShape's check against this shape, which has the side req needs.
func (p shape) admit(req *leasesv1.CreateRequest) (string, error) {
	if req.GetGpus() == 0 {
		var c db.PoolNodeCapacityRow
		if p.nodes != nil {
			c = *p.nodes
		}
		if int64(req.GetCpus()) > c.MaxNodeCpus {
			return "", apierr.FailedPreconditionField("cpus", "no node of the pool has %d CPUs (the most is %d)", req.GetCpus(), c.MaxNodeCpus)
		}
		if req.GetMemoryBytes() > c.MaxNodeMemoryBytes {
			return "", apierr.FailedPreconditionField("memory_bytes", "no node of the pool has %d bytes of memory (the most is %d)", req.GetMemoryBytes(), c.MaxNodeMemoryBytes)
		}
		return "", nil
	}
	names := make([]string, len(p.models))
	for i, m := range p.models {
		names[i] = fmt.Sprintf("%q", m.Model)
	}
	model := req.GetGpuModel()
	switch {
	case len(p.models) == 0:
		return "", apierr.FailedPreconditionField("gpus", "the pool has no GPUs")
	case model == "" && len(p.models) > 1:
		return "", apierr.InvalidArgument("gpu_model", "is required: the pool has %s", strings.Join(names, ", "))
	case model == "":
		model = p.models[0].Model
	}
	i := slices.IndexFunc(p.models, func(m db.PoolGPUModelsRow) bool { return m.Model == model })
	if i < 0 {
		return "", apierr.FailedPreconditionField("gpu_model", "the pool has no %q GPUs (it has %s)", model, strings.Join(names, ", "))
	}
	if int64(req.GetGpus()) > p.models[i].Total {
		return "", apierr.FailedPreconditionField("gpus", "the pool has only %d %q GPUs", p.models[i].Total, model)
	}
	if int64(req.GetGpusPerNode()) > p.models[i].MaxPerNode {
		return "", apierr.FailedPreconditionField("gpus_per_node", "the pool's nodes have at most %d %q GPUs", p.models[i].MaxPerNode, model)
	}
	return model, nil
}
