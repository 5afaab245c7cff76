package leases_test

import (
	"strings"
	"sync"
	"testing"

	"connectrpc.com/connect"

	leasesv1 "github.com/better-compute/better-compute/gen/go/bettercompute/leases/v1"
	poolsv1 "github.com/better-compute/better-compute/gen/go/bettercompute/pools/v1"
	"github.com/better-compute/better-compute/server/servertest"
)

// TestConcurrentCreatesNeverOvercommit races many creates of mixed sizes, and releases, against
// a small quota: the admitted leases never exceed it, every refusal names the quota, and the
// usage counters admission reads (pool_lease_usage, tenant_lease_usage) equal what the leases
// themselves add up to.
func TestConcurrentCreatesNeverOvercommit(t *testing.T) {
	t.Parallel()
	env := servertest.New(t)
	poolID := fleet(t, env, 4, 8)
	const maxGPUs, maxLeases = 10, 6
	gpusQuota, leasesQuota := int32(maxGPUs), int32(maxLeases)
	if _, err := pools(env).SetQuota(ctx, &poolsv1.SetQuotaRequest{PoolId: poolID, Quota: &poolsv1.Quota{MaxGpus: &gpusQuota, MaxLeases: &leasesQuota}}); err != nil {
		t.Fatal(err)
	}
	c := leases(env)
	var mu sync.Mutex
	var admitted []*leasesv1.Lease
	create := func(gpus int32) {
		res, err := c.Create(ctx, &leasesv1.CreateRequest{PoolId: poolID, Gpus: gpus, Duration: hour()})
		switch {
		case err == nil:
			mu.Lock()
			admitted = append(admitted, res.GetLease())
			mu.Unlock()
		case connect.CodeOf(err) == connect.CodeFailedPrecondition && strings.Contains(err.Error(), "the tenant's quota in the pool"):
		default:
			t.Errorf("create %d GPUs: %v", gpus, err)
		}
	}
	held := func() (leases, gpus int) {
		for _, l := range admitted {
			leases++
			gpus += int(l.GetGpus())
		}
		return leases, gpus
	}

	var wg sync.WaitGroup
	for i := range 48 {
		wg.Go(func() { create(int32(i%3 + 1)) })
	}
	wg.Wait()
	n, gpus := held()
	if n == 0 || n > maxLeases || gpus > maxGPUs {
		t.Fatalf("%d leases of %d GPUs admitted against a quota of %d leases and %d GPUs", n, gpus, maxLeases, maxGPUs)
	}
	checkUsage(t, env, poolID)

	// Releases and creates at once: what is released makes room, and never more than that.
	wg = sync.WaitGroup{}
	for _, l := range admitted[:n/2] {
		wg.Go(func() {
			if _, err := c.Release(ctx, &leasesv1.ReleaseRequest{Id: l.GetId()}); err != nil {
				t.Errorf("release: %v", err)
			}
		})
	}
	admitted = admitted[n/2:]
	for i := range 48 {
		wg.Go(func() { create(int32(i%2 + 1)) })
	}
	wg.Wait()
	n, gpus = held()
	if n > maxLeases || gpus > maxGPUs {
		t.Fatalf("after releases: %d leases of %d GPUs held against a quota of %d leases and %d GPUs", n, gpus, maxLeases, maxGPUs)
	}
	if got := count(t, env, `SELECT count(*) FROM pool_leases WHERE state = 'pending'`); got != n {
		t.Fatalf("%d pending leases, %d admitted and not released", got, n)
	}
	checkUsage(t, env, poolID)
}

// checkUsage compares the usage counters with the leases they count.
func checkUsage(t *testing.T, env *servertest.Env, poolID string) {
	t.Helper()
	if n := count(t, env, `
		SELECT count(*) FROM (
			SELECT tenant_id, pool_id, count(*)::bigint AS leases, sum(gpus)::bigint AS gpus, sum(cpus)::bigint AS cpus, sum(memory_bytes)::bigint AS memory_bytes
			FROM pool_leases WHERE pool_id = $1 AND state IN ('pending', 'placed', 'at_risk') GROUP BY 1, 2
			EXCEPT
			SELECT tenant_id, pool_id, sum(leases), sum(gpus), sum(cpus), sum(memory_bytes) FROM pool_lease_usage
			WHERE pool_id = $1 GROUP BY 1, 2 HAVING sum(leases) > 0
		) d`, poolID); n != 0 {
		t.Errorf("pool_lease_usage differs from the leases in %d rows", n)
	}
	if n := count(t, env, `
		SELECT count(*) FROM (SELECT tenant_id, sum(pending) AS pending FROM tenant_lease_usage GROUP BY 1) u
		WHERE u.pending <> (SELECT count(*) FROM pool_leases l WHERE l.tenant_id = u.tenant_id AND l.state = 'pending')`); n != 0 {
		t.Errorf("tenant_lease_usage differs from the pending leases in %d rows", n)
	}
}
