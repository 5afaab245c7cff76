package iamjobs_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/better-compute/better-compute/gen/db"
	"github.com/better-compute/better-compute/internal/dbtest"
	"github.com/better-compute/better-compute/internal/jobrun"
	"github.com/better-compute/better-compute/internal/locks"
	"github.com/better-compute/better-compute/workers/internal/iamjobs"
)

func TestMain(m *testing.M) { dbtest.Main(m) }

var ctx = context.Background()

func exec(t *testing.T, pool *pgxpool.Pool, sql string, args ...any) {
	t.Helper()
	if _, err := pool.Exec(ctx, sql, args...); err != nil {
		t.Fatal(err)
	}
}

func acquire(t *testing.T, pool *pgxpool.Pool, job string) locks.Lock {
	t.Helper()
	ls, err := locks.NewHolder(pool, "test", nil).Acquire(ctx, time.Minute, "singleton:"+job)
	if err != nil || len(ls) != 1 {
		t.Fatalf("acquire: %v %v", ls, err)
	}
	return ls[0]
}

// tenantWithPrincipal creates a tenant (the root one first) and a principal in it.
func tenantWithPrincipal(t *testing.T, pool *pgxpool.Pool, root *uuid.UUID, name string) (tenant, principal uuid.UUID) {
	t.Helper()
	q := db.New(pool)
	tenant = uuid.Must(uuid.NewV7())
	var err error
	if root == nil {
		err = q.EnsureRootTenant(ctx, db.EnsureRootTenantParams{ID: tenant, Name: name})
	} else {
		_, err = q.CreateTenant(ctx, db.CreateTenantParams{ID: tenant, ParentID: root, Name: name})
	}
	if err != nil {
		t.Fatal(err)
	}
	p, err := q.CreatePrincipal(ctx, db.CreatePrincipalParams{ID: uuid.Must(uuid.NewV7()), TenantID: tenant, Kind: "service_account", Name: "sa"})
	if err != nil {
		t.Fatal(err)
	}
	return tenant, p.ID
}

// key creates an API key that expired ago (a negative ago expires in the future; nil never).
func key(t *testing.T, pool *pgxpool.Pool, tenant, principal uuid.UUID, ago *time.Duration) string {
	t.Helper()
	id := strings.ReplaceAll(uuid.NewString(), "-", "")[:16]
	var exp *time.Time
	if ago != nil {
		e := time.Now().Add(-*ago)
		exp = &e
	}
	if _, err := db.New(pool).CreateAPIKey(ctx, db.CreateAPIKeyParams{
		ID: id, TenantID: tenant, PrincipalID: principal, SecretHash: []byte("h"), ExpiresAt: exp,
	}); err != nil {
		t.Fatal(err)
	}
	return id
}

func ago(d time.Duration) *time.Duration { return &d }

func keyIDs(t *testing.T, pool *pgxpool.Pool) []string {
	t.Helper()
	rows, err := pool.Query(ctx, `SELECT id FROM api_keys ORDER BY id`)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	return ids
}

func TestExpireKeys(t *testing.T) {
	t.Parallel()
	pool := dbtest.Pool(t)
	a, pa := tenantWithPrincipal(t, pool, nil, "root")
	b, pb := tenantWithPrincipal(t, pool, &a, "globex")
	// Expired past the grace period, oldest first: a batch of 2 takes a1 and a2, then b1 and
	// a3.
	gone := []string{
		key(t, pool, a, pa, ago(50*time.Hour)), key(t, pool, a, pa, ago(49*time.Hour)),
		key(t, pool, b, pb, ago(48*time.Hour)), key(t, pool, a, pa, ago(47*time.Hour)),
	}
	kept := []string{
		key(t, pool, a, pa, ago(23*time.Hour)), // expired, within the grace period
		key(t, pool, b, pb, ago(-time.Hour)),   // not expired
		key(t, pool, a, pa, nil),               // never expires
	}

	n, err := iamjobs.ExpireKeysOnce(ctx, pool, acquire(t, pool, iamjobs.ExpireKeysName), iamjobs.Options{Batch: 2})
	if err != nil || n != 4 {
		t.Fatalf("expired %d keys (%v), want 4", n, err)
	}
	slices.Sort(kept)
	if got := keyIDs(t, pool); !slices.Equal(got, kept) {
		t.Errorf("keys left %v, want %v", got, kept)
	}

	// One audit row per batch and tenant, naming the keys, visible in the tenant's audit log.
	rows, err := pool.Query(ctx, `SELECT tenant_id, principal_id IS NULL, method, target, outcome, request_id FROM audit_events ORDER BY id`)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	batches := map[string]bool{}
	for rows.Next() {
		var tenant uuid.UUID
		var noPrincipal bool
		var method, target, outcome, request string
		if err := rows.Scan(&tenant, &noPrincipal, &method, &target, &outcome, &request); err != nil {
			t.Fatal(err)
		}
		if !noPrincipal || method != "job/iam:expire-keys" || outcome != "ok" || !strings.HasPrefix(request, "job-") {
			t.Errorf("audit row: principal null %v, method %q, outcome %q, request %q", noPrincipal, method, outcome, request)
		}
		batches[request] = true
		name := map[uuid.UUID]string{a: "a", b: "b"}[tenant]
		got = append(got, name+" "+target)
	}
	sort.Strings(got)
	want := []string{
		"a apiKeys/" + strings.Join(sorted(gone[0], gone[1]), ","),
		"a apiKeys/" + gone[3],
		"b apiKeys/" + gone[2],
	}
	sort.Strings(want)
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("audit rows\n%v\nwant\n%v", got, want)
	}
	if len(batches) != 2 {
		t.Errorf("audit rows of %d batches, want 2", len(batches))
	}
}

func sorted(s ...string) []string { slices.Sort(s); return s }

func TestPruneIdempotency(t *testing.T) {
	t.Parallel()
	pool := dbtest.Pool(t)
	q := db.New(pool)
	principal := uuid.New()
	for i := range 5 {
		k := fmt.Sprintf("k%d", i)
		if _, err := q.ClaimIdempotencyKey(ctx, db.ClaimIdempotencyKeyParams{PrincipalID: principal, Key: k, Method: "/m", RequestHash: []byte("h")}); err != nil {
			t.Fatal(err)
		}
	}
	// k0..k2 are older than a day; k3 almost a day old; k4 new.
	exec(t, pool, `UPDATE idempotency_keys SET created_at = now() - interval '25 hours' WHERE key IN ('k0', 'k1', 'k2')`)
	exec(t, pool, `UPDATE idempotency_keys SET created_at = now() - interval '23 hours' WHERE key = 'k3'`)

	n, err := iamjobs.PruneIdempotencyOnce(ctx, pool, acquire(t, pool, iamjobs.PruneIdempotencyName), iamjobs.Options{Batch: 2})
	if err != nil || n != 3 {
		t.Fatalf("pruned %d (%v), want 3", n, err)
	}
	var left []string
	rows, err := pool.Query(ctx, `SELECT key FROM idempotency_keys ORDER BY key`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var k string
		if err := rows.Scan(&k); err != nil {
			t.Fatal(err)
		}
		left = append(left, k)
	}
	if !slices.Equal(left, []string{"k3", "k4"}) {
		t.Errorf("left %v, want [k3 k4]", left)
	}
	// One statement deletes at most a batch.
	exec(t, pool, `UPDATE idempotency_keys SET created_at = now() - interval '25 hours'`)
	if n, err := q.PruneIdempotencyKeys(ctx, db.PruneIdempotencyKeysParams{KeepMs: time.Hour.Milliseconds(), Lim: 1}); err != nil || n != 1 {
		t.Errorf("one batch of 1 deleted %d (%v)", n, err)
	}
}

func TestStaleLeaseDeletesNothing(t *testing.T) {
	t.Parallel()
	pool := dbtest.Pool(t)
	a, pa := tenantWithPrincipal(t, pool, nil, "root")
	key(t, pool, a, pa, ago(48*time.Hour))
	l := acquire(t, pool, iamjobs.ExpireKeysName)
	l.Token-- // as if the lease had changed hands since
	if n, err := iamjobs.ExpireKeysOnce(ctx, pool, l, iamjobs.Options{}); !errors.Is(err, locks.ErrStale) || n != 0 {
		t.Fatalf("stale run = %d %v, want ErrStale", n, err)
	}
	if got := keyIDs(t, pool); len(got) != 1 {
		t.Errorf("keys left %v, want the expired one kept", got)
	}
}

// TestJobsRunUnderTheirLeases runs both jobs on a holder, as the iam role does.
func TestJobsRunUnderTheirLeases(t *testing.T) {
	t.Parallel()
	pool := dbtest.Pool(t)
	a, pa := tenantWithPrincipal(t, pool, nil, "root")
	key(t, pool, a, pa, ago(48*time.Hour))
	h := locks.NewHolder(pool, "test", nil)
	jctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	for _, job := range iamjobs.Jobs(pool, iamjobs.Options{}) {
		wg.Go(func() { h.RunJob(jctx, job) })
	}
	defer func() { cancel(); wg.Wait() }()

	deadline := time.Now().Add(10 * time.Second)
	for {
		runs, err := jobrun.List(ctx, pool)
		if err != nil {
			t.Fatal(err)
		}
		if len(runs) == 2 {
			for i, name := range []string{iamjobs.ExpireKeysName, iamjobs.PruneIdempotencyName} {
				if runs[i].Name != name || runs[i].LastError != "" {
					t.Errorf("run %d: %+v, want %s without error", i, runs[i], name)
				}
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("job runs %+v, want both jobs recorded", runs)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if got := keyIDs(t, pool); len(got) != 0 {
		t.Errorf("keys left %v", got)
	}
	leases, err := db.New(pool).ListLocks(ctx, "singleton:iam:")
	if err != nil || len(leases) != 2 || leases[0].Name != "singleton:iam:expire-keys" || leases[1].Name != "singleton:iam:prune-idempotency" {
		t.Errorf("leases %+v (%v)", leases, err)
	}
}
