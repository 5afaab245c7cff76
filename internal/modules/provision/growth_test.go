package provision

import (
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/google/uuid"
	"google.golang.org/protobuf/types/known/durationpb"

	leasesv1 "github.com/better-compute/better-compute/gen/go/bettercompute/leases/v1"
	"github.com/better-compute/better-compute/gen/go/bettercompute/leases/v1/leasesv1connect"
	provisionmodulev1 "github.com/better-compute/better-compute/gen/go/bettercompute/modules/provision/v1"
)

// TestEmptyScaledPoolTakesALease: a pool with no members that scales from zero takes, through
// leases/create, a lease larger than anything it holds, grows a machine for it and places it;
// a lease larger than its machines are is still refused; once the scaling is removed, the
// empty pool refuses the lease again.
func TestEmptyScaledPoolTakesALease(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	e := newScaleEnv(t)
	e.setScaling(t, 0, 2, 0, time.Hour)
	e.run(t)
	leases := leasesv1connect.NewLeasesServiceClient(e.HTTPClient(e.AdminKey), e.URL)
	create := func(cpus int32) (*leasesv1.CreateResponse, error) {
		return leases.Create(ctx, &leasesv1.CreateRequest{
			PoolId: e.pool.String(), Cpus: cpus, MemoryBytes: 1 << 30, Duration: durationpb.New(time.Hour),
		})
	}

	res, err := create(6)
	if err != nil {
		t.Fatalf("a 6-CPU lease on an empty pool that grows 8-CPU machines: %v", err)
	}
	id := uuid.MustParse(res.GetLease().GetId())
	e.awaitPlaced(t, id)
	if n := e.everMade(t); n != 1 {
		t.Fatalf("%d machines made for one lease that fits one", n)
	}
	if _, err := create(16); connect.CodeOf(err) != connect.CodeFailedPrecondition {
		t.Fatalf("a 16-CPU lease on a pool of 8-CPU machines = %v, want failed_precondition", err)
	}

	if _, err := e.client.DeletePoolScaling(ctx, &provisionmodulev1.DeletePoolScalingRequest{PoolId: e.pool.String()}); err != nil {
		t.Fatal(err)
	}
	// The pool now has one 8-CPU member: a 12-CPU lease, which growth would have taken as two
	// machines' worth only for GPUs, is refused.
	if _, err := create(12); connect.CodeOf(err) != connect.CodeFailedPrecondition {
		t.Fatalf("a 12-CPU lease once the pool no longer scales = %v, want failed_precondition", err)
	}
}
