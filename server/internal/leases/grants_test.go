package leases_test

import (
	"testing"

	"connectrpc.com/connect"
	"github.com/google/uuid"

	iamv1 "github.com/better-compute/better-compute/gen/go/bettercompute/iam/v1"
	leasesv1 "github.com/better-compute/better-compute/gen/go/bettercompute/leases/v1"
	"github.com/better-compute/better-compute/gen/go/bettercompute/leases/v1/leasesv1connect"
	"github.com/better-compute/better-compute/internal/capacity/capacitytest"
	"github.com/better-compute/better-compute/server/servertest"
)

// childTenant creates a tenant under the root and returns its id and its owner's API key.
func childTenant(t *testing.T, env *servertest.Env, name string) (uuid.UUID, string) {
	t.Helper()
	res, err := env.IAM(env.AdminKey).CreateTenant(ctx, &iamv1.CreateTenantRequest{Name: name})
	if err != nil {
		t.Fatal(err)
	}
	return uuid.MustParse(res.GetTenant().GetId()), res.GetOwnerApiKey()
}

func TestLeasesFromAGrantedPool(t *testing.T) {
	t.Parallel()
	env := servertest.New(t)
	poolID := fleet(t, env, 2, 4)
	owner := capacitytest.RootTenant(t, env.Pool)
	grantee, granteeKey := childTenant(t, env, "team-a")
	_, strangerKey := childTenant(t, env, "team-b")
	gid := capacitytest.Grant(t, env.Pool, uuid.MustParse(poolID), owner, grantee, capacitytest.GPUs("H100", 2), capacitytest.GPUs("H100", 1), 1)
	c := leasesv1connect.NewLeasesServiceClient(env.HTTPClient(granteeKey), env.URL)

	created, err := c.Create(ctx, &leasesv1.CreateRequest{PoolId: poolID, Gpus: 3, Duration: hour(), Priority: 5})
	if err != nil {
		t.Fatalf("a lease within nominal quota and borrowing limit: %v", err)
	}
	if l := created.GetLease(); l.GetTenantId() != grantee.String() || l.GetPriority() != 5 || l.GetState() != leasesv1.LeaseState_LEASE_STATE_PENDING {
		t.Fatalf("lease %v, want the grantee's, priority 5, pending", l)
	}
	_, err = c.Create(ctx, &leasesv1.CreateRequest{PoolId: poolID, Gpus: 4, Duration: hour()})
	wantField(t, err, connect.CodeFailedPrecondition, "gpus")
	_, err = c.Create(ctx, &leasesv1.CreateRequest{PoolId: poolID, Gpus: 1, Duration: hour(), ReservationId: uuid.NewString()})
	wantField(t, err, connect.CodeFailedPrecondition, "reservation_id")
	_, err = c.Create(ctx, &leasesv1.CreateRequest{PoolId: poolID, Gpus: 1, Duration: hour(), Priority: 1001})
	wantField(t, err, connect.CodeInvalidArgument, "priority")

	// A tenant with no grant does not see the pool.
	stranger := leasesv1connect.NewLeasesServiceClient(env.HTTPClient(strangerKey), env.URL)
	_, err = stranger.Create(ctx, &leasesv1.CreateRequest{PoolId: poolID, Gpus: 1, Duration: hour()})
	wantField(t, err, connect.CodeFailedPrecondition, "pool_id")
	// Nor does the grantee once the grant is revoked.
	if _, err := env.Pool.Exec(ctx, `UPDATE pool_grants SET revoked_at = now() WHERE id = $1`, gid); err != nil {
		t.Fatal(err)
	}
	_, err = c.Create(ctx, &leasesv1.CreateRequest{PoolId: poolID, Gpus: 1, Duration: hour()})
	wantField(t, err, connect.CodeFailedPrecondition, "pool_id")
	if n := count(t, env, `SELECT count(*) FROM pool_leases`); n != 1 {
		t.Fatalf("%d leases, want only the admitted one", n)
	}
}
