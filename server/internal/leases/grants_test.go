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

// TestCachedShapeKeepsAccess: once a lease of the pool's owner has cached the pool's shape, a
// lease asked of the pool by another tenant still goes through its grant, and a tenant without
// one still does not see the pool (leases/create inserts into a pool of its own tenant in the
// same statement that looks the pool up, and falls back to the grant's checks when it is not).
func TestCachedShapeKeepsAccess(t *testing.T) {
	t.Parallel()
	env := servertest.New(t)
	poolID := fleet(t, env, 2, 4)
	owner := capacitytest.RootTenant(t, env.Pool)
	grantee, granteeKey := childTenant(t, env, "team-a")
	_, strangerKey := childTenant(t, env, "team-b")
	capacitytest.Grant(t, env.Pool, uuid.MustParse(poolID), owner, grantee, capacitytest.GPUs("H100", 1), capacitytest.GPUs("H100", 1), 1)
	c := leasesv1connect.NewLeasesServiceClient(env.HTTPClient(granteeKey), env.URL)
	stranger := leasesv1connect.NewLeasesServiceClient(env.HTTPClient(strangerKey), env.URL)
	for i := range 2 { // the owner's first create reads the shape, the second uses it
		if _, err := leases(env).Create(ctx, &leasesv1.CreateRequest{PoolId: poolID, Gpus: 1, Duration: hour()}); err != nil {
			t.Fatalf("owner's lease %d: %v", i, err)
		}
	}
	created, err := c.Create(ctx, &leasesv1.CreateRequest{PoolId: poolID, Gpus: 2, Duration: hour()})
	if err != nil || created.GetLease().GetTenantId() != grantee.String() {
		t.Fatalf("grantee's lease %v, %v; want the grantee's", created, err)
	}
	_, err = c.Create(ctx, &leasesv1.CreateRequest{PoolId: poolID, Gpus: 3, Duration: hour()})
	wantField(t, err, connect.CodeFailedPrecondition, "gpus")
	_, err = stranger.Create(ctx, &leasesv1.CreateRequest{PoolId: poolID, Gpus: 1, Duration: hour()})
	wantField(t, err, connect.CodeFailedPrecondition, "pool_id")
	if n := count(t, env, `SELECT count(*) FROM pool_leases`); n != 3 {
		t.Fatalf("%d leases, want the owner's two and the grantee's one", n)
	}
	if n := count(t, env, `SELECT count(*) FROM outbox WHERE type = 'lease.created'`); n != 3 {
		t.Fatalf("%d lease.created events, want 3", n)
	}
	if n := count(t, env, `SELECT count(*) FROM audit_events WHERE method = 'leases/create' AND outcome = 'ok'`); n != 3 {
		t.Fatalf("%d audited creates, want 3", n)
	}
}
