package pools_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/google/uuid"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/fieldmaskpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	iamv1 "github.com/better-compute/better-compute/gen/go/bettercompute/iam/v1"
	poolsv1 "github.com/better-compute/better-compute/gen/go/bettercompute/pools/v1"
	"github.com/better-compute/better-compute/gen/go/bettercompute/pools/v1/poolsv1connect"
	"github.com/better-compute/better-compute/internal/capacity"
	"github.com/better-compute/better-compute/internal/capacity/capacitytest"
	"github.com/better-compute/better-compute/server/servertest"
)

// tenant makes a child tenant of the root and returns its id and a pools client of its owner.
func tenant(t *testing.T, env *servertest.Env, name string) (uuid.UUID, poolsv1connect.PoolsServiceClient) {
	t.Helper()
	res, err := env.IAM(env.AdminKey).CreateTenant(ctx, &iamv1.CreateTenantRequest{Name: name})
	if err != nil {
		t.Fatal(err)
	}
	return uuid.MustParse(res.GetTenant().GetId()), poolsv1connect.NewPoolsServiceClient(env.HTTPClient(res.GetOwnerApiKey()), env.URL)
}

// gpuPool makes nodes of the root tenant with H100 GPUs and a pool of the root selecting them.
func gpuPool(t *testing.T, env *servertest.Env, name string, nodes, gpus int) (string, []uuid.UUID) {
	t.Helper()
	ids := capacitytest.Nodes(t, env.Pool, capacitytest.RootTenant(t, env.Pool), nodes, capacitytest.NodeSpec{
		GPUs: gpus, Model: "H100", CPUs: 64, MemoryBytes: 256 << 30, Labels: map[string]string{"pool": name},
	})
	res, err := client(env).Create(ctx, &poolsv1.CreateRequest{Name: name, NodeSelector: map[string]string{"pool": name}})
	if err != nil {
		t.Fatal(err)
	}
	return res.GetPool().GetId(), ids
}

func h100(n int32) *poolsv1.Resources { return &poolsv1.Resources{Gpus: map[string]int32{"H100": n}} }

func grant(t *testing.T, c poolsv1connect.PoolsServiceClient, req *poolsv1.GrantRequest) *poolsv1.Grant {
	t.Helper()
	res, err := c.Grant(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	return res.GetGrant()
}

func count(t *testing.T, env *servertest.Env, sql string, args ...any) int {
	t.Helper()
	var n int
	if err := env.Pool.QueryRow(ctx, sql, args...).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// preempt marks a pending lease as placed, then preempted at at and ended.
func preempt(t *testing.T, env *servertest.Env, lease uuid.UUID, at time.Time) {
	t.Helper()
	if _, err := env.Pool.Exec(ctx, `
		UPDATE pool_leases
		SET state = 'preempted', placed_at = $2::timestamptz - interval '1 minute', ends_at = $2, ended_at = $2,
		    preempted_at = $2, reason = 'borrowed capacity taken back', updated_at = now()
		WHERE id = $1`, lease, at); err != nil {
		t.Fatal(err)
	}
}

func TestGrantBadInput(t *testing.T) {
	t.Parallel()
	env := servertest.New(t)
	poolID, _ := gpuPool(t, env, "gpus", 1, 2)
	acme, _ := tenant(t, env, "acme")
	gone, _ := tenant(t, env, "gone")
	if _, err := env.IAM(env.AdminKey).SuspendTenant(ctx, &iamv1.SuspendTenantRequest{Id: gone.String()}); err != nil {
		t.Fatal(err)
	}
	root := capacitytest.RootTenant(t, env.Pool)
	many := map[string]int32{}
	for i := range capacity.MaxModels + 1 {
		many[fmt.Sprintf("model-%d", i)] = 1
	}
	c := client(env)
	ok := func(r *poolsv1.GrantRequest) *poolsv1.GrantRequest {
		r.PoolId, r.TenantId = poolID, acme.String()
		return r
	}
	cases := []struct {
		name  string
		req   *poolsv1.GrantRequest
		code  connect.Code
		field string
	}{
		{"malformed pool", &poolsv1.GrantRequest{PoolId: "gpus", TenantId: acme.String()}, connect.CodeInvalidArgument, "pool_id"},
		{"malformed tenant", &poolsv1.GrantRequest{PoolId: poolID, TenantId: "acme"}, connect.CodeInvalidArgument, "tenant_id"},
		{"to itself", &poolsv1.GrantRequest{PoolId: poolID, TenantId: root.String()}, connect.CodeInvalidArgument, "tenant_id"},
		{"unknown tenant", &poolsv1.GrantRequest{PoolId: poolID, TenantId: uuid.NewString()}, connect.CodeFailedPrecondition, "tenant_id"},
		{"suspended tenant", &poolsv1.GrantRequest{PoolId: poolID, TenantId: gone.String()}, connect.CodeFailedPrecondition, "tenant_id"},
		{"negative GPUs", ok(&poolsv1.GrantRequest{Nominal: h100(-1)}), connect.CodeInvalidArgument, `nominal.gpus["H100"]`},
		{"too many GPUs", ok(&poolsv1.GrantRequest{BorrowingLimit: h100(capacity.MaxAmount + 1)}), connect.CodeInvalidArgument, `borrowing_limit.gpus["H100"]`},
		{"too many models", ok(&poolsv1.GrantRequest{Nominal: &poolsv1.Resources{Gpus: many}}), connect.CodeInvalidArgument, "nominal.gpus"},
		{"too many CPUs", ok(&poolsv1.GrantRequest{Nominal: &poolsv1.Resources{Cpus: capacity.MaxAmount + 1}}), connect.CodeInvalidArgument, "nominal.cpus"},
		{"negative memory", ok(&poolsv1.GrantRequest{BorrowingLimit: &poolsv1.Resources{MemoryBytes: -1}}), connect.CodeInvalidArgument, "borrowing_limit.memory_bytes"},
		{"unknown model", ok(&poolsv1.GrantRequest{Nominal: &poolsv1.Resources{Gpus: map[string]int32{"B200": 1}}}), connect.CodeFailedPrecondition, `nominal.gpus["B200"]`},
		{"unknown model in the limit", ok(&poolsv1.GrantRequest{Nominal: h100(1), BorrowingLimit: &poolsv1.Resources{Gpus: map[string]int32{"A100": 0}}}), connect.CodeFailedPrecondition, `borrowing_limit.gpus["A100"]`},
		{"negative weight", ok(&poolsv1.GrantRequest{Weight: -1}), connect.CodeInvalidArgument, "weight"},
		{"weight too high", ok(&poolsv1.GrantRequest{Weight: capacity.MaxWeight + 1}), connect.CodeInvalidArgument, "weight"},
	}
	// One after the other, so that the checks below follow every refused call.
	for _, tc := range cases {
		_, err := c.Grant(ctx, tc.req)
		if connect.CodeOf(err) != tc.code || !strings.Contains(err.Error(), ": "+tc.field+":") {
			t.Errorf("%s: error %v, want %v naming %s", tc.name, err, tc.code, tc.field)
		}
	}
	_, err := c.Grant(ctx, &poolsv1.GrantRequest{PoolId: uuid.NewString(), TenantId: acme.String()})
	if connect.CodeOf(err) != connect.CodeNotFound {
		t.Fatalf("grant of an unknown pool: %v", err)
	}
	if n := count(t, env, `SELECT count(*) FROM pool_grants`); n != 0 {
		t.Fatalf("%d grants after refused calls", n)
	}
	if n := count(t, env, `SELECT count(*) FROM outbox WHERE type LIKE 'pool.grant%'`); n != 0 {
		t.Fatalf("%d grant events after refused calls", n)
	}
	// At the bounds, the same grant is taken: weight 0 means 1.
	g := grant(t, c, ok(&poolsv1.GrantRequest{
		Nominal:        &poolsv1.Resources{Gpus: map[string]int32{"H100": capacity.MaxAmount}, Cpus: capacity.MaxAmount},
		BorrowingLimit: &poolsv1.Resources{Gpus: map[string]int32{"H100": 0}, MemoryBytes: 1 << 40},
	}))
	if g.GetWeight() != 1 || g.GetNominal().GetGpus()["H100"] != capacity.MaxAmount || g.GetBorrowingLimit().GetMemoryBytes() != 1<<40 {
		t.Fatalf("grant at the bounds: %v", g)
	}
}

func TestOnlyTheOwnerGrants(t *testing.T) {
	t.Parallel()
	env := servertest.New(t)
	poolID, _ := gpuPool(t, env, "gpus", 1, 2)
	acme, acmeC := tenant(t, env, "acme")
	_, globexC := tenant(t, env, "globex")
	initech, _ := tenant(t, env, "initech")
	grant(t, client(env), &poolsv1.GrantRequest{PoolId: poolID, TenantId: acme.String(), Nominal: h100(1)})

	// The grantee and a third tenant find no such pool to grant or revoke.
	for name, c := range map[string]poolsv1connect.PoolsServiceClient{"grantee": acmeC, "third tenant": globexC} {
		_, err := c.Grant(ctx, &poolsv1.GrantRequest{PoolId: poolID, TenantId: initech.String()})
		if connect.CodeOf(err) != connect.CodeNotFound {
			t.Errorf("%s grants the pool: %v", name, err)
		}
		_, err = c.RevokeGrant(ctx, &poolsv1.RevokeGrantRequest{PoolId: poolID, TenantId: acme.String()})
		if connect.CodeOf(err) != connect.CodeNotFound {
			t.Errorf("%s revokes the grant: %v", name, err)
		}
	}
	if n := count(t, env, `SELECT count(*) FROM pool_grants WHERE revoked_at IS NULL AND tenant_id = $1`, acme); n != 1 {
		t.Fatalf("%d active grants to acme, want the owner's one", n)
	}
	if n := count(t, env, `SELECT count(*) FROM pool_grants WHERE tenant_id <> $1`, acme); n != 0 {
		t.Fatalf("%d grants to others than acme", n)
	}
}

func TestGrantUpdateRevokeAndGrantAgain(t *testing.T) {
	t.Parallel()
	env := servertest.New(t)
	poolID, _ := gpuPool(t, env, "gpus", 1, 4)
	acme, acmeC := tenant(t, env, "acme")
	root := capacitytest.RootTenant(t, env.Pool)
	c := client(env)

	first := grant(t, c, &poolsv1.GrantRequest{PoolId: poolID, TenantId: acme.String(), Nominal: h100(1), BorrowingLimit: h100(2), Weight: 5})
	if first.GetPoolId() != poolID || first.GetTenantId() != acme.String() || first.GetWeight() != 5 || first.GetRevokeTime() != nil {
		t.Fatalf("grant: %v", first)
	}
	// Granting again changes the active grant.
	changed := grant(t, c, &poolsv1.GrantRequest{PoolId: poolID, TenantId: acme.String(), Nominal: h100(2)})
	if changed.GetId() != first.GetId() || changed.GetWeight() != 1 || changed.GetNominal().GetGpus()["H100"] != 2 ||
		len(changed.GetBorrowingLimit().GetGpus()) != 0 || !changed.GetUpdateTime().AsTime().After(first.GetUpdateTime().AsTime()) {
		t.Fatalf("re-grant: %v, first %v", changed, first)
	}
	for _, tn := range []uuid.UUID{root, acme} {
		if n := count(t, env, `SELECT count(*) FROM outbox WHERE type = 'pool.granted' AND tenant_id = $1`, tn); n != 2 {
			t.Errorf("tenant %s has %d pool.granted events, want 2", tn, n)
		}
	}
	if n := count(t, env, `SELECT count(*) FROM audit_events WHERE method = 'pools/grant' AND target = $1`, "grant/"+first.GetId()); n != 2 {
		t.Errorf("%d audit rows with the grant as target, want 2", n)
	}
	if n := count(t, env, `SELECT count(*) FROM reconcile_queue WHERE kind = $1 AND key = $2`, capacity.PlacerKind, poolID); n != 1 {
		t.Errorf("the placer is queued %d times for the pool, want once", n)
	}
	// The grantee sees the pool now.
	if _, err := acmeC.Get(ctx, &poolsv1.GetRequest{Id: poolID}); err != nil {
		t.Fatalf("grantee gets the pool: %v", err)
	}

	revoked, err := c.RevokeGrant(ctx, &poolsv1.RevokeGrantRequest{PoolId: poolID, TenantId: acme.String()})
	if err != nil {
		t.Fatal(err)
	}
	if revoked.GetGrant().GetId() != first.GetId() || revoked.GetGrant().GetRevokeTime() == nil {
		t.Fatalf("revoked: %v", revoked.GetGrant())
	}
	again, err := c.RevokeGrant(ctx, &poolsv1.RevokeGrantRequest{PoolId: poolID, TenantId: acme.String()})
	if err != nil {
		t.Fatal(err)
	}
	if again.GetGrant().GetId() != first.GetId() || !again.GetGrant().GetRevokeTime().AsTime().Equal(revoked.GetGrant().GetRevokeTime().AsTime()) {
		t.Fatalf("a second revoke changed the grant: %v, was %v", again.GetGrant(), revoked.GetGrant())
	}
	for _, tn := range []uuid.UUID{root, acme} {
		if n := count(t, env, `SELECT count(*) FROM outbox WHERE type = 'pool.grant_revoked' AND tenant_id = $1`, tn); n != 1 {
			t.Errorf("tenant %s has %d pool.grant_revoked events, want 1", tn, n)
		}
	}
	_, err = acmeC.Get(ctx, &poolsv1.GetRequest{Id: poolID})
	if connect.CodeOf(err) != connect.CodeNotFound {
		t.Fatalf("grantee gets the pool after the revoke: %v", err)
	}
	// Granting after a revoke makes a new grant; the revoked one stays.
	fresh := grant(t, c, &poolsv1.GrantRequest{PoolId: poolID, TenantId: acme.String(), Nominal: h100(1)})
	if fresh.GetId() == first.GetId() || fresh.GetRevokeTime() != nil {
		t.Fatalf("grant after a revoke: %v", fresh)
	}
	if n := count(t, env, `SELECT count(*) FROM pool_grants WHERE pool_id = $1`, poolID); n != 2 {
		t.Fatalf("%d grants of the pool, want the revoked one and the new one", n)
	}
	// A tenant the pool was never granted to has no grant to revoke.
	globex, _ := tenant(t, env, "globex")
	_, err = c.RevokeGrant(ctx, &poolsv1.RevokeGrantRequest{PoolId: poolID, TenantId: globex.String()})
	if connect.CodeOf(err) != connect.CodeNotFound {
		t.Fatalf("revoke of no grant: %v", err)
	}
	_, err = c.RevokeGrant(ctx, &poolsv1.RevokeGrantRequest{PoolId: poolID, TenantId: "globex"})
	wantField(t, err, connect.CodeInvalidArgument, "tenant_id")
}

func TestRevokeFailsPendingLeases(t *testing.T) {
	t.Parallel()
	env := servertest.New(t)
	poolStr, nodes := gpuPool(t, env, "gpus", 1, 8)
	poolID := uuid.MustParse(poolStr)
	acme, _ := tenant(t, env, "acme")
	globex, _ := tenant(t, env, "globex")
	root := capacitytest.RootTenant(t, env.Pool)
	c := client(env)
	for _, tn := range []uuid.UUID{acme, globex} {
		grant(t, c, &poolsv1.GrantRequest{PoolId: poolStr, TenantId: tn.String(), Nominal: h100(4)})
	}
	spec := capacitytest.LeaseSpec{GPUs: 1, Model: "H100"}
	pending := capacitytest.Leases(t, env.Pool, acme, poolID, 2, spec)
	running := capacitytest.Leases(t, env.Pool, acme, poolID, 1, spec)
	capacitytest.PlaceOn(t, env.Pool, running[0], nodes[0])
	others := append(capacitytest.Leases(t, env.Pool, globex, poolID, 1, spec), capacitytest.Leases(t, env.Pool, root, poolID, 1, spec)...)

	if _, err := c.RevokeGrant(ctx, &poolsv1.RevokeGrantRequest{PoolId: poolStr, TenantId: acme.String()}); err != nil {
		t.Fatal(err)
	}
	if got := capacitytest.States(t, env.Pool, pending); got[capacity.LeaseFailed] != 2 {
		t.Errorf("the grantee's pending leases are %v, want failed", got)
	}
	if n := count(t, env, `SELECT count(*) FROM pool_leases WHERE id = ANY($1) AND reason = $2 AND ended_at IS NOT NULL`,
		pending, "the pool's grant to the tenant was revoked"); n != 2 {
		t.Errorf("%d failed leases say why and ended", n)
	}
	if got := capacitytest.States(t, env.Pool, running); got[capacity.LeasePlaced] != 1 {
		t.Errorf("the grantee's placed lease is %v, want left to run", got)
	}
	if n := count(t, env, `SELECT count(*) FROM allocations WHERE lease_id = $1 AND ended_at IS NULL`, running[0]); n != 1 {
		t.Errorf("the placed lease holds %d GPUs, want 1", n)
	}
	if got := capacitytest.States(t, env.Pool, others); got[capacity.LeasePending] != 2 {
		t.Errorf("the other grantee's and the owner's leases are %v, want pending", got)
	}
	if n := count(t, env, `SELECT count(*) FROM outbox WHERE type = 'lease.failed' AND tenant_id = $1`, acme); n != 2 {
		t.Errorf("the grantee has %d lease.failed events, want 2", n)
	}
	if n := count(t, env, `SELECT count(*) FROM outbox WHERE type = 'lease.failed' AND tenant_id <> $1`, acme); n != 0 {
		t.Errorf("%d lease.failed events of other tenants", n)
	}
}

func TestListGrants(t *testing.T) {
	t.Parallel()
	env := servertest.New(t)
	p1Str, nodes := gpuPool(t, env, "one", 1, 8)
	p2Str, _ := gpuPool(t, env, "two", 1, 8)
	acme, acmeC := tenant(t, env, "acme")
	globex, globexC := tenant(t, env, "globex")
	_, initechC := tenant(t, env, "initech")
	c := client(env)
	a1 := grant(t, c, &poolsv1.GrantRequest{PoolId: p1Str, TenantId: acme.String(), Nominal: h100(2), BorrowingLimit: h100(3)})
	g1 := grant(t, c, &poolsv1.GrantRequest{PoolId: p1Str, TenantId: globex.String(), Nominal: h100(1)})
	a2 := grant(t, c, &poolsv1.GrantRequest{PoolId: p2Str, TenantId: acme.String(), Nominal: h100(1)})

	// acme holds 3 H100 in pool one (1 beyond its nominal 2), and has a pending lease too.
	p1 := uuid.MustParse(p1Str)
	for _, l := range capacitytest.Leases(t, env.Pool, acme, p1, 3, capacitytest.LeaseSpec{GPUs: 1, Model: "H100"}) {
		capacitytest.PlaceOn(t, env.Pool, l, nodes[0])
	}
	capacitytest.Leases(t, env.Pool, acme, p1, 1, capacitytest.LeaseSpec{GPUs: 4, Model: "H100"})

	list := func(c poolsv1connect.PoolsServiceClient, req *poolsv1.ListGrantsRequest) map[string]*poolsv1.Grant {
		t.Helper()
		out := map[string]*poolsv1.Grant{}
		for pages := 0; ; pages++ {
			res, err := c.ListGrants(ctx, req)
			if err != nil {
				t.Fatal(err)
			}
			for _, g := range res.GetGrants() {
				if out[g.GetId()] != nil {
					t.Fatalf("grant %s on two pages", g.GetId())
				}
				out[g.GetId()] = g
			}
			if res.GetNextPageToken() == "" {
				return out
			}
			if pages > 10 {
				t.Fatal("too many pages")
			}
			req.PageToken = res.GetNextPageToken()
		}
	}
	ids := func(gs map[string]*poolsv1.Grant) []string {
		var out []string
		for id := range gs {
			out = append(out, id)
		}
		slices.Sort(out)
		return out
	}
	sorted := func(s ...string) []string { slices.Sort(s); return s }

	owner := list(c, &poolsv1.ListGrantsRequest{PageSize: 1})
	if got := ids(owner); !slices.Equal(got, sorted(a1.GetId(), g1.GetId(), a2.GetId())) {
		t.Fatalf("the owner lists %v", got)
	}
	if got := ids(list(c, &poolsv1.ListGrantsRequest{PoolId: p1Str})); !slices.Equal(got, sorted(a1.GetId(), g1.GetId())) {
		t.Fatalf("the owner lists %v of pool one", got)
	}
	u := owner[a1.GetId()]
	if u.GetUsed().GetGpus()["H100"] != 3 || u.GetBorrowed().GetGpus()["H100"] != 1 || u.GetBorrowable().GetGpus()["H100"] != 2 {
		t.Errorf("acme's grant of pool one: used %v, borrowed %v, borrowable %v; want 3, 1, 2",
			u.GetUsed(), u.GetBorrowed(), u.GetBorrowable())
	}
	if g := owner[g1.GetId()]; len(g.GetUsed().GetGpus()) != 0 || len(g.GetBorrowed().GetGpus()) != 0 {
		t.Errorf("globex's grant uses %v", g.GetUsed())
	}
	// Each grantee sees its own grants only, with the same numbers.
	acmeSees := list(acmeC, &poolsv1.ListGrantsRequest{})
	if got := ids(acmeSees); !slices.Equal(got, sorted(a1.GetId(), a2.GetId())) {
		t.Fatalf("acme lists %v", got)
	}
	if acmeSees[a1.GetId()].GetUsed().GetGpus()["H100"] != 3 {
		t.Errorf("acme sees its use as %v", acmeSees[a1.GetId()].GetUsed())
	}
	if got := ids(list(acmeC, &poolsv1.ListGrantsRequest{PoolId: p1Str})); !slices.Equal(got, []string{a1.GetId()}) {
		t.Fatalf("acme lists %v of pool one, want only its own", got)
	}
	if got := ids(list(globexC, &poolsv1.ListGrantsRequest{})); !slices.Equal(got, []string{g1.GetId()}) {
		t.Fatalf("globex lists %v", got)
	}
	if got := ids(list(initechC, &poolsv1.ListGrantsRequest{})); len(got) != 0 {
		t.Fatalf("a tenant without grants lists %v", got)
	}
	// A pool not granted to the caller, or unknown, is not found.
	for name, req := range map[string]*poolsv1.ListGrantsRequest{
		"a pool not granted to it": {PoolId: p2Str}, "an unknown pool": {PoolId: uuid.NewString()},
	} {
		_, err := globexC.ListGrants(ctx, req)
		if connect.CodeOf(err) != connect.CodeNotFound {
			t.Errorf("globex lists the grants of %s: %v", name, err)
		}
	}
	_, err := c.ListGrants(ctx, &poolsv1.ListGrantsRequest{PoolId: "one"})
	wantField(t, err, connect.CodeInvalidArgument, "pool_id")
	// Revoked grants only when asked for.
	if _, err := c.RevokeGrant(ctx, &poolsv1.RevokeGrantRequest{PoolId: p1Str, TenantId: globex.String()}); err != nil {
		t.Fatal(err)
	}
	if got := ids(list(globexC, &poolsv1.ListGrantsRequest{})); len(got) != 0 {
		t.Fatalf("globex lists %v after the revoke", got)
	}
	if got := list(globexC, &poolsv1.ListGrantsRequest{IncludeRevoked: true, PoolId: p1Str}); len(got) != 1 || got[g1.GetId()].GetRevokeTime() == nil {
		t.Fatalf("globex lists %v with revoked grants", got)
	}
	if got := ids(list(c, &poolsv1.ListGrantsRequest{})); !slices.Equal(got, sorted(a1.GetId(), a2.GetId())) {
		t.Fatalf("the owner lists %v after the revoke", got)
	}
}

func TestListOwnAndGrantedPools(t *testing.T) {
	t.Parallel()
	env := servertest.New(t)
	acme, acmeC := tenant(t, env, "acme")
	globex, _ := tenant(t, env, "globex")
	c := client(env)
	var granted []string
	for i := range 3 {
		id, _ := gpuPool(t, env, fmt.Sprintf("granted-%d", i), 1, 2)
		grant(t, c, &poolsv1.GrantRequest{PoolId: id, TenantId: acme.String(), Nominal: h100(1)})
		granted = append(granted, id)
	}
	// The root's pools acme is not granted: one to nobody, one to globex only.
	hidden, _ := gpuPool(t, env, "hidden", 1, 2)
	other, _ := gpuPool(t, env, "other", 1, 2)
	grant(t, c, &poolsv1.GrantRequest{PoolId: other, TenantId: globex.String(), Nominal: h100(2)})
	maxGPUs := int32(5)
	if _, err := c.SetQuota(ctx, &poolsv1.SetQuotaRequest{PoolId: granted[0], Quota: &poolsv1.Quota{MaxGpus: &maxGPUs}}); err != nil {
		t.Fatal(err)
	}
	var own []string
	for _, name := range []string{"mine-a", "mine-b"} {
		res, err := acmeC.Create(ctx, &poolsv1.CreateRequest{Name: name})
		if err != nil {
			t.Fatal(err)
		}
		own = append(own, res.GetPool().GetId())
	}
	slices.Sort(own)
	slices.Sort(granted)
	want := append(slices.Clone(own), granted...)

	for _, size := range []int32{1, 2, 3, 5, 6} {
		var got []string
		req := &poolsv1.ListRequest{PageSize: size}
		for pages := 1; ; pages++ {
			res, err := acmeC.List(ctx, req)
			if err != nil {
				t.Fatal(err)
			}
			if int32(len(res.GetPools())) > size {
				t.Fatalf("page of %d pools, asked for %d", len(res.GetPools()), size)
			}
			for _, p := range res.GetPools() {
				got = append(got, p.GetId())
				mine := slices.Contains(own, p.GetId())
				switch {
				case mine && (p.GetGranted() || p.GetGrant() != nil):
					t.Errorf("acme's own pool %s is shown granted", p.GetName())
				case !mine && (!p.GetGranted() || p.GetGrant().GetTenantId() != acme.String() || p.GetGrant().GetPoolId() != p.GetId()):
					t.Errorf("granted pool %s: granted %v, grant %v", p.GetName(), p.GetGranted(), p.GetGrant())
				case !mine && (len(p.GetNodeSelector()) != 0 || len(p.GetNodeIds()) != 0 || p.GetQuota() != nil):
					t.Errorf("granted pool %s shows its membership or quota: %v", p.GetName(), p)
				case !mine && (p.GetCapacity().GetNodes() != 1 || len(p.GetCapacity().GetGpus()) != 1):
					t.Errorf("granted pool %s shows capacity %v", p.GetName(), p.GetCapacity())
				}
			}
			if res.GetNextPageToken() == "" {
				break
			}
			if pages > 10 {
				t.Fatal("too many pages")
			}
			req.PageToken = res.GetNextPageToken()
		}
		if !slices.Equal(got, want) {
			t.Errorf("pages of %d: %v, want own pools %v then granted %v", size, got, own, granted)
		}
	}

	res, err := acmeC.Get(ctx, &poolsv1.GetRequest{Id: granted[0]})
	if err != nil {
		t.Fatal(err)
	}
	if p := res.GetPool(); !p.GetGranted() || p.GetGrant().GetNominal().GetGpus()["H100"] != 1 || len(p.GetNodeSelector()) != 0 ||
		p.GetQuota() != nil || p.GetCapacity().GetGpus()[0].GetTotal() != 2 {
		t.Errorf("get a granted pool: %v", p)
	}
	for _, id := range []string{hidden, other} {
		_, err := acmeC.Get(ctx, &poolsv1.GetRequest{Id: id})
		if connect.CodeOf(err) != connect.CodeNotFound {
			t.Errorf("acme gets a pool not granted to it: %v", err)
		}
	}
	// The owner sees its pools as its own, with membership and quota.
	mine, err := c.Get(ctx, &poolsv1.GetRequest{Id: granted[0]})
	if err != nil || mine.GetPool().GetGranted() || len(mine.GetPool().GetNodeSelector()) != 1 || mine.GetPool().GetQuota().GetMaxGpus() != 5 {
		t.Errorf("the owner gets %v (%v)", mine.GetPool(), err)
	}
}

func TestPreemptionSettings(t *testing.T) {
	t.Parallel()
	env := servertest.New(t)
	c := client(env)
	res, err := c.Create(ctx, &poolsv1.CreateRequest{Name: "default"})
	if err != nil {
		t.Fatal(err)
	}
	if p := res.GetPool(); p.GetPreemptionGracePeriod().AsDuration() != capacity.DefaultPreemptionGrace || p.GetPriorityPreemption() {
		t.Fatalf("a new pool: grace %v, priority preemption %v", p.GetPreemptionGracePeriod().AsDuration(), p.GetPriorityPreemption())
	}
	res, err = c.Create(ctx, &poolsv1.CreateRequest{Name: "set", PreemptionGracePeriod: durationpb.New(5 * time.Minute), PriorityPreemption: true})
	if err != nil {
		t.Fatal(err)
	}
	if p := res.GetPool(); p.GetPreemptionGracePeriod().AsDuration() != 5*time.Minute || !p.GetPriorityPreemption() {
		t.Fatalf("a pool made with settings: %v", p)
	}
	for _, d := range []time.Duration{-time.Second, capacity.MaxPreemptionGrace + time.Second, time.Microsecond} {
		_, err := c.Create(ctx, &poolsv1.CreateRequest{Name: "bad", PreemptionGracePeriod: durationpb.New(d)})
		wantField(t, err, connect.CodeInvalidArgument, "preemption_grace_period")
	}
	id := res.GetPool().GetId()
	mask := func(paths ...string) *fieldmaskpb.FieldMask { return &fieldmaskpb.FieldMask{Paths: paths} }
	up, err := c.Update(ctx, &poolsv1.UpdateRequest{Id: id, UpdateMask: mask("preemption_grace_period", "priority_preemption"), PreemptionGracePeriod: durationpb.New(0)})
	if err != nil {
		t.Fatal(err)
	}
	if p := up.GetPool(); p.GetPreemptionGracePeriod().AsDuration() != 0 || p.GetPriorityPreemption() {
		t.Fatalf("updated: grace %v, priority preemption %v", p.GetPreemptionGracePeriod().AsDuration(), p.GetPriorityPreemption())
	}
	// Fields outside the mask stay.
	up, err = c.Update(ctx, &poolsv1.UpdateRequest{Id: id, UpdateMask: mask("priority_preemption"), PriorityPreemption: true, PreemptionGracePeriod: durationpb.New(time.Hour)})
	if err != nil || up.GetPool().GetPreemptionGracePeriod().AsDuration() != 0 || !up.GetPool().GetPriorityPreemption() {
		t.Fatalf("updated only priority_preemption: %v (%v)", up.GetPool(), err)
	}
	_, err = c.Update(ctx, &poolsv1.UpdateRequest{Id: id, UpdateMask: mask("preemption_grace_period")})
	wantField(t, err, connect.CodeInvalidArgument, "preemption_grace_period")
	_, err = c.Update(ctx, &poolsv1.UpdateRequest{Id: id, UpdateMask: mask("preemption_grace_period"), PreemptionGracePeriod: durationpb.New(2 * time.Hour)})
	wantField(t, err, connect.CodeInvalidArgument, "preemption_grace_period")
	got, err := c.Get(ctx, &poolsv1.GetRequest{Id: id})
	if err != nil || got.GetPool().GetPreemptionGracePeriod().AsDuration() != 0 {
		t.Fatalf("after refused updates: %v (%v)", got.GetPool(), err)
	}
}

func TestListPreemptions(t *testing.T) {
	t.Parallel()
	env := servertest.New(t)
	rootPoolStr, _ := gpuPool(t, env, "gpus", 1, 8)
	rootPool := uuid.MustParse(rootPoolStr)
	otherPoolStr, _ := gpuPool(t, env, "other", 1, 8)
	acme, acmeC := tenant(t, env, "acme")
	root := capacitytest.RootTenant(t, env.Pool)
	c := client(env)
	grant(t, c, &poolsv1.GrantRequest{PoolId: rootPoolStr, TenantId: acme.String(), Nominal: h100(1)})
	acmePoolRes, err := acmeC.Create(ctx, &poolsv1.CreateRequest{Name: "acme-own"})
	if err != nil {
		t.Fatal(err)
	}
	acmePool := uuid.MustParse(acmePoolRes.GetPool().GetId())
	now := time.Now()
	spec := capacitytest.LeaseSpec{GPUs: 1, Model: "H100"}
	// In the root's pool: acme's leases preempted 1, 2 and 3 hours ago and 2 days ago, the root's
	// own 30 minutes ago, and a lease still placed.
	acmeLeases := capacitytest.Leases(t, env.Pool, acme, rootPool, 4, spec)
	for i, ago := range []time.Duration{time.Hour, 2 * time.Hour, 3 * time.Hour, 48 * time.Hour} {
		preempt(t, env, acmeLeases[i], now.Add(-ago))
	}
	rootLease := capacitytest.Leases(t, env.Pool, root, rootPool, 1, spec)[0]
	preempt(t, env, rootLease, now.Add(-30*time.Minute))
	// In acme's own pool (no nodes needed for the rows): one preempted lease of acme.
	acmeOwn := capacitytest.Leases(t, env.Pool, acme, acmePool, 1, capacitytest.LeaseSpec{CPUs: 1})[0]
	preempt(t, env, acmeOwn, now.Add(-time.Minute))

	list := func(c poolsv1connect.PoolsServiceClient, req *poolsv1.ListPreemptionsRequest) []string {
		t.Helper()
		var out []string
		for pages := 0; ; pages++ {
			res, err := c.ListPreemptions(ctx, req)
			if err != nil {
				t.Fatal(err)
			}
			for _, p := range res.GetPreemptions() {
				out = append(out, p.GetLeaseId())
			}
			if res.GetNextPageToken() == "" {
				return out
			}
			if pages > 10 {
				t.Fatal("too many pages")
			}
			req.PageToken = res.GetNextPageToken()
		}
	}
	ids := func(ls ...uuid.UUID) []string {
		out := make([]string, len(ls))
		for i, l := range ls {
			out[i] = l.String()
		}
		return out
	}
	lastDay := ids(rootLease, acmeLeases[0], acmeLeases[1], acmeLeases[2])
	for _, size := range []int32{0, 1, 3} {
		if got := list(c, &poolsv1.ListPreemptionsRequest{PageSize: size}); !slices.Equal(got, lastDay) {
			t.Errorf("the owner lists %v in pages of %d, want %v, newest first", got, size, lastDay)
		}
	}
	all := append(slices.Clone(lastDay), acmeLeases[3].String())
	if got := list(c, &poolsv1.ListPreemptionsRequest{PageSize: 2, SinceTime: timestamppb.New(now.Add(-72 * time.Hour))}); !slices.Equal(got, all) {
		t.Errorf("the owner lists %v since 3 days ago, want %v", got, all)
	}
	if got := list(c, &poolsv1.ListPreemptionsRequest{PoolId: otherPoolStr}); len(got) != 0 {
		t.Errorf("the owner lists %v in a pool without preemptions", got)
	}
	res, err := c.ListPreemptions(ctx, &poolsv1.ListPreemptionsRequest{PageSize: 1})
	if err != nil {
		t.Fatal(err)
	}
	if p := res.GetPreemptions()[0]; p.GetTenantId() != root.String() || p.GetPoolId() != rootPoolStr || p.GetGpus() != 1 ||
		p.GetGpuModel() != "H100" || p.GetReason() != "borrowed capacity taken back" || p.GetPreemptTime() == nil {
		t.Errorf("preemption %v", p)
	}
	// acme, a grantee of the root's pool, sees only the preemptions in its own pool.
	if got := list(acmeC, &poolsv1.ListPreemptionsRequest{}); !slices.Equal(got, ids(acmeOwn)) {
		t.Errorf("acme lists %v, want only its own pool's", got)
	}
	_, err = acmeC.ListPreemptions(ctx, &poolsv1.ListPreemptionsRequest{PoolId: rootPoolStr})
	if connect.CodeOf(err) != connect.CodeNotFound {
		t.Errorf("acme lists the preemptions of a pool granted to it: %v", err)
	}
	_, err = c.ListPreemptions(ctx, &poolsv1.ListPreemptionsRequest{SinceTime: timestamppb.New(now.Add(-32 * 24 * time.Hour))})
	wantField(t, err, connect.CodeInvalidArgument, "since_time")
	_, err = c.ListPreemptions(ctx, &poolsv1.ListPreemptionsRequest{PageToken: "nope"})
	wantField(t, err, connect.CodeInvalidArgument, "page_token")
}
