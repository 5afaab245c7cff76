package doctor_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/google/uuid"

	"github.com/better-compute/better-compute/internal/capacity/capacitytest"
	"github.com/better-compute/better-compute/internal/dbtest"
	"github.com/better-compute/better-compute/internal/doctor"
)

// TestReportsOvercommittedGrants: grants whose nominal quotas add up to what the pool's members
// hold are fine; one GPU more is a warning naming the pool, the resource, the sum and what the
// pool holds; a revoked grant does not count; memory is checked too (in either JSON form of
// memoryBytes), and a revoked node's resources are not the pool's.
func TestReportsOvercommittedGrants(t *testing.T) {
	t.Parallel()
	pool := dbtest.Pool(t)
	owner := capacitytest.RootTenant(t, pool)
	spec := capacitytest.NodeSpec{GPUs: 4, Model: "H100", CPUs: 32, MemoryBytes: 256 << 30, Labels: map[string]string{"gpu": "h100"}}
	capacitytest.Nodes(t, pool, owner, 2, spec)
	revoked := capacitytest.Nodes(t, pool, owner, 1, spec)
	if _, err := pool.Exec(ctx, `UPDATE nodes SET revoked_at = now() WHERE id = $1`, revoked[0]); err != nil {
		t.Fatal(err)
	}
	p := capacitytest.Pool(t, pool, owner, "gpus", map[string]string{"gpu": "h100"})

	grantees := make([]uuid.UUID, 3)
	for i := range grantees {
		grantees[i] = uuid.Must(uuid.NewV7())
		if _, err := pool.Exec(ctx, `INSERT INTO tenants (id, parent_id, name) VALUES ($1, $2, $3)`,
			grantees[i], owner, fmt.Sprintf("grantee-%d", i)); err != nil {
			t.Fatal(err)
		}
	}
	grant := func(grantee uuid.UUID, nominal string) uuid.UUID {
		t.Helper()
		id := uuid.Must(uuid.NewV7())
		if _, err := pool.Exec(ctx, `INSERT INTO pool_grants (id, pool_id, owner_tenant_id, tenant_id, nominal) VALUES ($1, $2, $3, $4, $5)`,
			id, p, owner, grantee, nominal); err != nil {
			t.Fatal(err)
		}
		return id
	}
	exec := func(sql string, args ...any) {
		t.Helper()
		if _, err := pool.Exec(ctx, sql, args...); err != nil {
			t.Fatal(err)
		}
	}
	check := func() doctor.Finding {
		t.Helper()
		fs, err := doctor.Run(ctx, doctor.Options{Pool: pool})
		if err != nil {
			t.Fatal(err)
		}
		return find(t, fs, "granted quotas")
	}
	wantWarning := func(what string, parts ...string) {
		t.Helper()
		f := check()
		if f.Severity != doctor.Warning || f.Fix == "" {
			t.Fatalf("%s: %+v, want a warning", what, f)
		}
		for _, part := range append(parts, p.String(), "(gpus)") {
			if !strings.Contains(f.Cause, part) {
				t.Errorf("%s: cause %q does not say %q", what, f.Cause, part)
			}
		}
	}

	if f := check(); f.Severity != doctor.OK {
		t.Fatalf("no grants: %+v", f)
	}
	// Exactly what the two live members hold: 8 H100s, 64 CPUs, 512 GiB.
	grant(grantees[0], `{"gpus": {"H100": 5}, "cpus": 32, "memoryBytes": 274877906944}`)
	second := grant(grantees[1], `{"gpus": {"H100": 3}, "cpus": 32, "memoryBytes": 274877906944}`)
	revokedGrant := grant(grantees[2], `{"gpus": {"H100": 100}, "cpus": 1000}`)
	exec(`UPDATE pool_grants SET revoked_at = now() WHERE id = $1`, revokedGrant)
	if f := check(); f.Severity != doctor.OK {
		t.Fatalf("grants within the pool, and a revoked one over it: %+v", f)
	}

	exec(`UPDATE pool_grants SET nominal = '{"gpus": {"H100": 4}, "cpus": 32, "memoryBytes": 274877906944}' WHERE id = $1`, second)
	wantWarning("one H100 more", "9 H100 GPUs", "hold 8")
	if f := check(); strings.Contains(f.Cause, "more") {
		t.Errorf("one over-committed resource: %q", f.Cause)
	}

	// Revoked, the grant no longer counts; memory as protojson writes an int64 (a string), one
	// byte over.
	exec(`UPDATE pool_grants SET revoked_at = now() WHERE id = $1`, second)
	if f := check(); f.Severity != doctor.OK {
		t.Fatalf("after the revoke: %+v", f)
	}
	exec(`UPDATE pool_grants SET nominal = '{"memoryBytes": "549755813889"}' WHERE tenant_id = $1`, grantees[0])
	wantWarning("memory", "549755813889 bytes of memory", "hold 549755813888")

	// Several: the first is named, the others counted.
	exec(`UPDATE pool_grants SET nominal = '{"gpus": {"H100": 9, "A100": 1}, "cpus": 65, "memoryBytes": 1}' WHERE tenant_id = $1`, grantees[0])
	wantWarning("three resources", "65 CPUs", "hold 64", "and 2 more") // cpu, then gpu A100 and H100
}
