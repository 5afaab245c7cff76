package leases_test

import (
	"testing"
	"time"

	"github.com/google/uuid"

	leasesv1 "github.com/better-compute/better-compute/gen/go/bettercompute/leases/v1"
	"github.com/better-compute/better-compute/internal/capacity/capacitytest"
	"github.com/better-compute/better-compute/server/servertest"
)

// TestLeaseShowsIdleSince: leases/get and leases/list show when the idle job found a lease idle
// (pool_leases.idle_since), and nothing for a lease that is not idle.
func TestLeaseShowsIdleSince(t *testing.T) {
	t.Parallel()
	env := servertest.New(t)
	poolID := uuid.MustParse(fleet(t, env, 1, 2))
	tenant := capacitytest.RootTenant(t, env.Pool)
	ids := capacitytest.Leases(t, env.Pool, tenant, poolID, 2, capacitytest.LeaseSpec{GPUs: 1, Model: "H100"})
	since := time.Date(2031, 3, 1, 10, 0, 0, 0, time.UTC)
	if _, err := env.Pool.Exec(ctx, `UPDATE pool_leases SET idle_since = $2 WHERE id = $1`, ids[0], since); err != nil {
		t.Fatal(err)
	}
	c := leases(env)
	got, err := c.Get(ctx, &leasesv1.GetRequest{Id: ids[0].String()})
	if err != nil {
		t.Fatal(err)
	}
	if !got.GetLease().GetIdleSince().AsTime().Equal(since) {
		t.Errorf("idle since %v, want %v", got.GetLease().GetIdleSince(), since)
	}
	list, err := c.List(ctx, &leasesv1.ListRequest{})
	if err != nil {
		t.Fatal(err)
	}
	idle := map[string]bool{}
	for _, l := range list.GetLeases() {
		idle[l.GetId()] = l.GetIdleSince() != nil
	}
	if len(idle) != 2 || !idle[ids[0].String()] || idle[ids[1].String()] {
		t.Errorf("idle in the list: %v", idle)
	}
}
