package leases_test

import (
	"testing"

	"connectrpc.com/connect"

	leasesv1 "github.com/better-compute/better-compute/gen/go/bettercompute/leases/v1"
	"github.com/better-compute/better-compute/internal/capacity/capacitytest"
	"github.com/better-compute/better-compute/server/servertest"
)

// TestPoolShapeRefusalsAreFresh: admission keeps each pool's shape for a moment, but refuses
// only on the pool as it is: GPUs that joined the pool right after a refusal (and after a lease
// read the shape) are leased at once.
func TestPoolShapeRefusalsAreFresh(t *testing.T) {
	t.Parallel()
	env := servertest.New(t)
	poolID := fleet(t, env, 1, 4)
	c := leases(env)
	if _, err := c.Create(ctx, &leasesv1.CreateRequest{PoolId: poolID, Gpus: 2, Duration: hour()}); err != nil {
		t.Fatal(err)
	}
	_, err := c.Create(ctx, &leasesv1.CreateRequest{PoolId: poolID, Gpus: 8, Duration: hour()})
	wantField(t, err, connect.CodeFailedPrecondition, "gpus")
	_, err = c.Create(ctx, &leasesv1.CreateRequest{PoolId: poolID, Cpus: 128, Duration: hour()})
	wantField(t, err, connect.CodeFailedPrecondition, "cpus")

	tenant := capacitytest.RootTenant(t, env.Pool)
	capacitytest.Nodes(t, env.Pool, tenant, 1, capacitytest.NodeSpec{GPUs: 8, Model: "H100", CPUs: 128, MemoryBytes: 256 << 30, Labels: map[string]string{"gpu": "h100"}})
	if _, err := c.Create(ctx, &leasesv1.CreateRequest{PoolId: poolID, Gpus: 8, Duration: hour()}); err != nil {
		t.Errorf("8 GPUs of a pool that now has 12: %v", err)
	}
	if _, err := c.Create(ctx, &leasesv1.CreateRequest{PoolId: poolID, Cpus: 128, Duration: hour()}); err != nil {
		t.Errorf("128 CPUs of a pool that now has a node of 128: %v", err)
	}
}
