// Package placertest runs the capacity placer as the scheduler role runs it, for tests and
// benchmarks of the placer; internal/capacity/capacitytest builds the fleets, pools and leases it
// places.
package placertest

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/better-compute/better-compute/internal/capacity/capacitytest"
	"github.com/better-compute/better-compute/internal/locks"
	"github.com/better-compute/better-compute/internal/reconcile"
	"github.com/better-compute/better-compute/internal/shard"
	"github.com/better-compute/better-compute/workers/internal/placer"
)

// Run runs the placer as the scheduler role runs it (a shard member and the reconcile runtime)
// until the test ends, and returns the runtime once it holds every shard.
func Run(t testing.TB, pool *pgxpool.Pool, opts placer.Options) *reconcile.Runtime {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	holder := locks.NewHolder(pool, "placertest-"+uuid.NewString()[:8], nil)
	member := shard.NewMember(pool, holder, reconcile.RoleScheduler, 0, nil)
	rt := reconcile.NewRuntime(pool, holder, nil)
	rt.Register(placer.Registration(pool, opts))
	var wg sync.WaitGroup
	wg.Go(func() { member.Run(ctx) })
	wg.Go(func() { rt.Run(ctx, map[string]*shard.Member{reconcile.RoleScheduler: member}) })
	t.Cleanup(func() { cancel(); wg.Wait() })
	capacitytest.Eventually(t, 30*time.Second, "the placer holds every shard", func() bool { return len(member.Owned()) == shard.Count })
	return rt
}
