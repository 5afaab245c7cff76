package server_test

import (
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/google/uuid"
	"google.golang.org/protobuf/types/known/durationpb"

	auditv1 "github.com/better-compute/better-compute/gen/go/bettercompute/audit/v1"
	iamv1 "github.com/better-compute/better-compute/gen/go/bettercompute/iam/v1"
	leasesv1 "github.com/better-compute/better-compute/gen/go/bettercompute/leases/v1"
	"github.com/better-compute/better-compute/gen/go/bettercompute/leases/v1/leasesv1connect"
	poolsv1 "github.com/better-compute/better-compute/gen/go/bettercompute/pools/v1"
	"github.com/better-compute/better-compute/gen/go/bettercompute/pools/v1/poolsv1connect"
	"github.com/better-compute/better-compute/internal/capacity/capacitytest"
	"github.com/better-compute/better-compute/server/servertest"
)

// TestRootSuspendsAndResumesAChild: a suspension refuses every key of the tenant at once, saying
// why, and a resume restores them; only the root tenant's owners and admins may, and only on
// tenants below it.
func TestRootSuspendsAndResumesAChild(t *testing.T) {
	t.Parallel()
	env := servertest.New(t)
	root := env.IAM(env.AdminKey)
	acme, err := root.CreateTenant(ctx, &iamv1.CreateTenantRequest{Name: "acme"})
	if err != nil {
		t.Fatal(err)
	}
	globex, err := root.CreateTenant(ctx, &iamv1.CreateTenantRequest{Name: "globex"})
	if err != nil {
		t.Fatal(err)
	}
	acmeID, globexID := acme.GetTenant().GetId(), globex.GetTenant().GetId()
	rootID := whoAmI(t, env, env.AdminKey).GetTenant().GetId()
	_, acmeViewer := newPrincipal(t, env, acme.GetOwnerApiKey(), "viewer", iamv1.Role_ROLE_VIEWER)
	_, rootAdmin := newPrincipal(t, env, env.AdminKey, "root-admin", iamv1.Role_ROLE_ADMIN)
	_, rootOperator := newPrincipal(t, env, env.AdminKey, "root-operator", iamv1.Role_ROLE_OPERATOR)

	// A child tenant cannot suspend its sibling, its parent or itself; a root operator cannot.
	g := env.IAM(globex.GetOwnerApiKey())
	for _, id := range []string{acmeID, rootID, globexID} {
		_, err := g.SuspendTenant(ctx, &iamv1.SuspendTenantRequest{Id: id})
		wantDenied(t, err, "only principals of the root tenant may suspend or resume tenants")
		_, err = g.DeleteTenant(ctx, &iamv1.DeleteTenantRequest{Id: id, Force: true})
		wantDenied(t, err, "only principals of the root tenant may delete tenants")
	}
	_, err = env.IAM(rootOperator).SuspendTenant(ctx, &iamv1.SuspendTenantRequest{Id: acmeID})
	wantCode(t, err, connect.CodePermissionDenied)
	// The root tenant is not below itself.
	_, err = root.SuspendTenant(ctx, &iamv1.SuspendTenantRequest{Id: rootID})
	wantCode(t, err, connect.CodeNotFound)
	_, err = root.SuspendTenant(ctx, &iamv1.SuspendTenantRequest{Id: "nope"})
	wantCode(t, err, connect.CodeInvalidArgument)

	res, err := env.IAM(rootAdmin).SuspendTenant(ctx, &iamv1.SuspendTenantRequest{Id: acmeID})
	if err != nil {
		t.Fatal(err)
	}
	if res.GetTenant().GetSuspendTime() == nil {
		t.Errorf("suspended tenant %v has no suspend time", res.GetTenant())
	}
	for _, k := range []string{acme.GetOwnerApiKey(), acmeViewer} {
		_, err := env.IAM(k).WhoAmI(ctx, &iamv1.WhoAmIRequest{})
		wantDenied(t, err, "tenant acme is suspended")
	}
	whoAmI(t, env, globex.GetOwnerApiKey())
	// Suspending again changes nothing.
	again, err := root.SuspendTenant(ctx, &iamv1.SuspendTenantRequest{Id: acmeID})
	if err != nil || !again.GetTenant().GetSuspendTime().AsTime().Equal(res.GetTenant().GetSuspendTime().AsTime()) {
		t.Fatalf("suspending again: %v, %v", again.GetTenant(), err)
	}

	resumed, err := root.ResumeTenant(ctx, &iamv1.ResumeTenantRequest{Id: acmeID})
	if err != nil || resumed.GetTenant().GetSuspendTime() != nil {
		t.Fatalf("resume: %v, %v", resumed.GetTenant(), err)
	}
	for _, k := range []string{acme.GetOwnerApiKey(), acmeViewer} {
		whoAmI(t, env, k)
	}
	var events int
	if err := env.Pool.QueryRow(ctx, `SELECT count(*) FROM outbox WHERE subject = $1 AND type IN ('tenant.suspended', 'tenant.resumed')`,
		"tenant/"+acmeID).Scan(&events); err != nil || events != 2 {
		t.Errorf("%d tenant.suspended/resumed events (%v), want 2", events, err)
	}
}

// TestRootDeletesAChild: deletion revokes every key of the tenant, is refused while the tenant
// has live nodes or leases unless forced, and then revokes the nodes and ends the leases.
func TestRootDeletesAChild(t *testing.T) {
	t.Parallel()
	env := servertest.New(t)
	root := env.IAM(env.AdminKey)
	acme, err := root.CreateTenant(ctx, &iamv1.CreateTenantRequest{Name: "acme"})
	if err != nil {
		t.Fatal(err)
	}
	acmeID := acme.GetTenant().GetId()
	_, acmeAdmin := newPrincipal(t, env, acme.GetOwnerApiKey(), "an-admin", iamv1.Role_ROLE_ADMIN)
	nodes := capacitytest.Nodes(t, env.Pool, uuid.MustParse(acmeID), 2, capacitytest.NodeSpec{GPUs: 2, Model: "H100", CPUs: 8, MemoryBytes: 1 << 30, Labels: map[string]string{"gpu": "h100"}})
	acmeHTTP := env.HTTPClient(acme.GetOwnerApiKey())
	pool, err := poolsv1connect.NewPoolsServiceClient(acmeHTTP, env.URL).Create(ctx, &poolsv1.CreateRequest{Name: "h100", NodeSelector: map[string]string{"gpu": "h100"}})
	if err != nil {
		t.Fatal(err)
	}
	lease, err := leasesv1connect.NewLeasesServiceClient(acmeHTTP, env.URL).Create(ctx, &leasesv1.CreateRequest{PoolId: pool.GetPool().GetId(), Gpus: 1, Duration: durationpb.New(time.Hour)})
	if err != nil {
		t.Fatal(err)
	}

	_, err = root.DeleteTenant(ctx, &iamv1.DeleteTenantRequest{Id: acmeID})
	wantCode(t, err, connect.CodeFailedPrecondition)
	if !strings.Contains(err.Error(), "force") || !strings.Contains(err.Error(), "2 nodes") {
		t.Errorf("refusal %q does not name force and the nodes", err)
	}
	whoAmI(t, env, acme.GetOwnerApiKey()) // nothing happened

	res, err := root.DeleteTenant(ctx, &iamv1.DeleteTenantRequest{Id: acmeID, Force: true})
	if err != nil {
		t.Fatal(err)
	}
	if res.GetRevokedApiKeys() != 2 || res.GetRevokedNodes() != 2 || res.GetEndedLeases() != 1 || res.GetTenant().GetDeleteTime() == nil {
		t.Errorf("delete: %v", res)
	}
	for _, k := range []string{acme.GetOwnerApiKey(), acmeAdmin} {
		_, err := env.IAM(k).WhoAmI(ctx, &iamv1.WhoAmIRequest{})
		wantCode(t, err, connect.CodeUnauthenticated)
	}
	var live, active int
	if err := env.Pool.QueryRow(ctx, `SELECT count(*) FROM nodes WHERE id = ANY($1) AND revoked_at IS NULL`, nodes).Scan(&live); err != nil || live != 0 {
		t.Errorf("%d of the deleted tenant's nodes are not revoked (%v)", live, err)
	}
	if err := env.Pool.QueryRow(ctx, `SELECT count(*) FROM pool_leases WHERE id = $1 AND state = 'failed'`, lease.GetLease().GetId()).Scan(&active); err != nil || active != 1 {
		t.Errorf("the deleted tenant's lease did not fail (%v)", err)
	}
	// Deleting again changes nothing; a deleted tenant cannot be suspended; its name stays taken.
	if again, err := root.DeleteTenant(ctx, &iamv1.DeleteTenantRequest{Id: acmeID}); err != nil || again.GetRevokedApiKeys() != 0 {
		t.Fatalf("deleting again: %v, %v", again, err)
	}
	_, err = root.SuspendTenant(ctx, &iamv1.SuspendTenantRequest{Id: acmeID})
	wantCode(t, err, connect.CodeFailedPrecondition)
	_, err = root.CreateTenant(ctx, &iamv1.CreateTenantRequest{Name: "acme"})
	wantCode(t, err, connect.CodeAlreadyExists)
	got, err := root.GetTenant(ctx, &iamv1.GetTenantRequest{Id: acmeID})
	if err != nil || got.GetTenant().GetDeleteTime() == nil {
		t.Errorf("tombstone: %v, %v", got.GetTenant(), err)
	}
	// The root's audit log has the deletions, refused and done.
	audit, err := env.Audit(env.AdminKey).List(ctx, &auditv1.ListRequest{})
	if err != nil {
		t.Fatal(err)
	}
	var seen []string
	for _, e := range audit.GetEvents() {
		if e.GetMethod() == "iam/deleteTenant" {
			seen = append(seen, e.GetOutcome())
		}
	}
	if strings.Join(seen, ",") != "ok,ok,failed_precondition" {
		t.Errorf("deleteTenant audit outcomes %v (newest first)", seen)
	}
}
