package nodes_test

import (
	"strings"
	"testing"

	"connectrpc.com/connect"
	"github.com/google/uuid"
	"google.golang.org/protobuf/proto"

	"github.com/better-compute/better-compute/gen/db"
	iamv1 "github.com/better-compute/better-compute/gen/go/bettercompute/iam/v1"
	nodesv1 "github.com/better-compute/better-compute/gen/go/bettercompute/nodes/v1"
	"github.com/better-compute/better-compute/gen/go/bettercompute/nodes/v1/nodesv1connect"
	"github.com/better-compute/better-compute/internal/capacity/capacitytest"
	"github.com/better-compute/better-compute/internal/fleet"
	"github.com/better-compute/better-compute/server/servertest"
)

// wantHidden checks that c gets NotFound for id, with the very answer it gets for an id that
// does not exist.
func wantHidden(t *testing.T, what string, c nodesv1connect.NodesServiceClient, id uuid.UUID) {
	t.Helper()
	_, err := c.Get(ctx, &nodesv1.GetRequest{Id: id.String()})
	unknown := uuid.New()
	_, want := c.Get(ctx, &nodesv1.GetRequest{Id: unknown.String()})
	if connect.CodeOf(err) != connect.CodeNotFound || connect.CodeOf(want) != connect.CodeNotFound ||
		strings.ReplaceAll(err.Error(), id.String(), "ID") != strings.ReplaceAll(want.Error(), unknown.String(), "ID") {
		t.Fatalf("%s: %v, want the answer for an unknown node: %v", what, err, want)
	}
}

// TestReducedViewOfLeasedNode: a tenant whose placed lease (in a pool granted to it) holds
// devices on another tenant's node gets the node's reduced view, only while the lease holds it.
func TestReducedViewOfLeasedNode(t *testing.T) {
	t.Parallel()
	env := servertest.New(t)
	root := capacitytest.RootTenant(t, env.Pool)
	spec := capacitytest.NodeSpec{
		GPUs: 2, Model: "H100", CPUs: 64, MemoryBytes: 256 << 30, Labels: map[string]string{"rack": "r1"},
		Taints: []fleet.Taint{{Key: "dedicated", Value: "ml", Effect: "NoSchedule"}},
	}
	nodes := capacitytest.Nodes(t, env.Pool, root, 2, spec)
	leased, other := nodes[0], nodes[1]
	q := db.New(env.Pool)
	if err := q.UpsertGateway(ctx, db.UpsertGatewayParams{ID: "gw-1", Region: "eu"}); err != nil {
		t.Fatal(err)
	}
	if err := q.ClaimSession(ctx, db.ClaimSessionParams{NodeID: leased, GatewayID: "gw-1", SessionID: "s-1", Transport: "h2"}); err != nil {
		t.Fatal(err)
	}
	pool := capacitytest.Pool(t, env.Pool, root, "gpus", nil, nodes...)
	acmeRes, err := env.IAM(env.AdminKey).CreateTenant(ctx, &iamv1.CreateTenantRequest{Name: "acme"})
	if err != nil {
		t.Fatal(err)
	}
	globexRes, err := env.IAM(env.AdminKey).CreateTenant(ctx, &iamv1.CreateTenantRequest{Name: "globex"})
	if err != nil {
		t.Fatal(err)
	}
	acme := uuid.MustParse(acmeRes.GetTenant().GetId())
	acmeC, globexC := client(env, acmeRes.GetOwnerApiKey()), client(env, globexRes.GetOwnerApiKey())

	wantHidden(t, "without a lease", acmeC, leased)
	lease := capacitytest.Leases(t, env.Pool, acme, pool, 1, capacitytest.LeaseSpec{GPUs: 1, Model: "H100"})[0]
	wantHidden(t, "with a pending lease", acmeC, leased)
	capacitytest.PlaceOn(t, env.Pool, lease, leased)

	full, err := client(env, env.AdminKey).Get(ctx, &nodesv1.GetRequest{Id: leased.String()})
	if err != nil {
		t.Fatal(err)
	}
	inv := full.GetNode().GetInventory()
	// The GPUs as the daemon reported them: their health is the owner's view, not the grantee's.
	var gpus []*nodesv1.Gpu
	for _, g := range inv.GetGpus() {
		g = proto.CloneOf(g)
		g.Health, g.HealthReasons = 0, nil
		gpus = append(gpus, g)
	}
	want := &nodesv1.Node{
		Id: leased.String(), Hostname: full.GetNode().GetHostname(), State: "ready", Online: true, Connected: true, Reduced: true,
		Inventory: &nodesv1.Inventory{Gpus: gpus, Cpus: 64, MemoryBytes: 256 << 30},
	}
	for _, state := range []string{"placed", "at_risk"} {
		if _, err := env.Pool.Exec(ctx, `UPDATE pool_leases SET state = $2 WHERE id = $1`, lease, state); err != nil {
			t.Fatal(err)
		}
		res, err := acmeC.Get(ctx, &nodesv1.GetRequest{Id: leased.String()})
		if err != nil {
			t.Fatalf("%s lease: %v", state, err)
		}
		if !proto.Equal(res.GetNode(), want) {
			t.Fatalf("%s lease: the grantee sees %v, want only %v", state, res.GetNode(), want)
		}
	}
	if len(inv.GetGpus()) != 2 || inv.GetHostname() == "" || len(full.GetNode().GetLabels()) == 0 || len(full.GetNode().GetTaints()) == 0 {
		t.Fatalf("the owner's view %v lacks what the reduced view must leave out", full.GetNode())
	}
	// Not the owner's other node, not for another tenant, and never in the grantee's list.
	wantHidden(t, "a node the lease does not hold", acmeC, other)
	wantHidden(t, "another tenant", globexC, leased)
	list, err := acmeC.List(ctx, &nodesv1.ListRequest{})
	if err != nil || len(list.GetNodes()) != 0 {
		t.Fatalf("the grantee lists %v (%v)", list.GetNodes(), err)
	}
	// Once the lease ends, the node is hidden again.
	if _, err := env.Pool.Exec(ctx, `
		WITH a AS (UPDATE allocations SET ended_at = now() WHERE lease_id = $1)
		UPDATE pool_leases SET state = 'released', ended_at = now() WHERE id = $1`, lease); err != nil {
		t.Fatal(err)
	}
	wantHidden(t, "after the lease ended", acmeC, leased)
}
