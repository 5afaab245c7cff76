package placer_test

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/better-compute/better-compute/internal/capacity"
	"github.com/better-compute/better-compute/internal/capacity/capacitytest"
	"github.com/better-compute/better-compute/internal/dbtest"
	"github.com/better-compute/better-compute/workers/internal/placer"
)

// sharedBundle is a pool of two 4-GPU nodes owned by the root tenant, and a clock.
type sharedBundle struct {
	pool  *pgxpool.Pool
	owner uuid.UUID
	pid   uuid.UUID
	now   time.Time
	p     *placer.Placer
}

func setupShared(t *testing.T, graceMs int64, priorityPreemption bool) *sharedBundle {
	t.Helper()
	b := &sharedBundle{pool: dbtest.Pool(t), now: time.Date(2031, 3, 4, 10, 0, 0, 0, time.UTC)}
	b.owner = capacitytest.RootTenant(t, b.pool)
	sel := map[string]string{"gpu": "h100"}
	capacitytest.Nodes(t, b.pool, b.owner, 2, capacitytest.NodeSpec{GPUs: 4, Model: "H100", Labels: sel})
	b.pid = capacitytest.Pool(t, b.pool, b.owner, "shared", sel)
	if _, err := b.pool.Exec(ctx, `UPDATE pools SET preemption_grace_ms = $2, priority_preemption = $3 WHERE id = $1`, b.pid, graceMs, priorityPreemption); err != nil {
		t.Fatal(err)
	}
	b.p = placer.New(b.pool, placer.Options{Now: func() time.Time { return b.now }})
	return b
}

// one is a one-GPU lease.
func one(priority int32) capacitytest.LeaseSpec {
	return capacitytest.LeaseSpec{GPUs: 1, Model: "H100", Duration: time.Hour, Priority: priority}
}

// borrowing reports the borrowing flag of each lease.
func borrowing(t *testing.T, pool *pgxpool.Pool, ids []uuid.UUID) map[uuid.UUID]bool {
	t.Helper()
	rows, err := pool.Query(ctx, `SELECT id, borrowing FROM pool_leases WHERE id = ANY($1)`, ids)
	if err != nil {
		t.Fatal(err)
	}
	out := map[uuid.UUID]bool{}
	for rows.Next() {
		var id uuid.UUID
		var b bool
		if err := rows.Scan(&id, &b); err != nil {
			t.Fatal(err)
		}
		out[id] = b
	}
	return out
}

func TestBorrowedCapacityIsReclaimedByPreemption(t *testing.T) {
	t.Parallel()
	b := setupShared(t, 30_000, false)
	a := capacitytest.Tenant(t, b.pool, "team-a")
	c := capacitytest.Tenant(t, b.pool, "team-c")
	capacitytest.Grant(t, b.pool, b.pid, b.owner, a, capacitytest.GPUs("H100", 4), capacitytest.GPUs("H100", 4), 1)
	capacitytest.Grant(t, b.pool, b.pid, b.owner, c, capacitytest.GPUs("H100", 4), capacitytest.GPUs("H100", 4), 1)

	// a takes its nominal 4 and borrows c's idle 4.
	aLeases := capacitytest.Leases(t, b.pool, a, b.pid, 8, one(0))
	if res := place(t, b.p, b.pid); res.Placed != 8 {
		t.Fatalf("result %+v, want all 8 placed", res)
	}
	flags := borrowing(t, b.pool, aLeases)
	for i, id := range aLeases {
		if want := i >= 4; flags[id] != want {
			t.Errorf("lease %d borrowing = %v, want %v", i, flags[id], want)
		}
	}

	// c wants its nominal share back: a's two newest borrowed leases are preempted.
	cLeases := capacitytest.Leases(t, b.pool, c, b.pid, 2, one(0))
	if res := place(t, b.p, b.pid); res.Preempted != 2 || res.Placed != 0 {
		t.Fatalf("result %+v, want 2 preempted and nothing placed during the grace period", res)
	}
	if s := capacitytest.States(t, b.pool, aLeases[6:]); s[capacity.LeasePreempted] != 2 {
		t.Fatalf("a's newest leases %v, want preempted", s)
	}
	if s := capacitytest.States(t, b.pool, aLeases[:6]); s[capacity.LeasePlaced] != 6 {
		t.Fatalf("a's other leases %v, want placed", s)
	}
	var events int
	if err := b.pool.QueryRow(ctx, `SELECT count(*) FROM outbox WHERE type = 'lease.preempted'`).Scan(&events); err != nil {
		t.Fatal(err)
	}
	if events != 4 {
		t.Errorf("%d lease.preempted events, want 4 (to a and to the owner, for each lease)", events)
	}

	// Within the grace period nothing more is preempted: what the preempted leases free is
	// counted for c.
	b.now = b.now.Add(10 * time.Second)
	if res := place(t, b.p, b.pid); res.Preempted != 0 || res.Placed != 0 {
		t.Fatalf("result %+v during the grace period, want nothing", res)
	}

	// After it, the devices are free and c is placed on them.
	b.now = b.now.Add(20 * time.Second)
	if res := place(t, b.p, b.pid); res.Placed != 2 || res.Expired != 2 {
		t.Fatalf("result %+v after the grace period, want 2 ended and 2 placed", res)
	}
	if s := capacitytest.States(t, b.pool, cLeases); s[capacity.LeasePlaced] != 2 {
		t.Fatalf("c's leases %v, want placed", s)
	}
	if s := capacitytest.States(t, b.pool, aLeases[6:]); s[capacity.LeasePreempted] != 2 {
		t.Fatalf("a's preempted leases %v, want them to stay preempted once ended", s)
	}
	capacitytest.AssertNoOvercommit(t, b.pool)
	capacitytest.AssertUsageCounted(t, b.pool)
}

func TestNoPreemptionBelowNominalQuota(t *testing.T) {
	t.Parallel()
	b := setupShared(t, 0, false)
	a := capacitytest.Tenant(t, b.pool, "team-a")
	c := capacitytest.Tenant(t, b.pool, "team-c")
	// The grants promise 12 GPUs of 8: a's 6 are all within its nominal quota.
	capacitytest.Grant(t, b.pool, b.pid, b.owner, a, capacitytest.GPUs("H100", 6), capacity.Resources{}, 1)
	capacitytest.Grant(t, b.pool, b.pid, b.owner, c, capacitytest.GPUs("H100", 6), capacity.Resources{}, 1)
	capacitytest.Leases(t, b.pool, a, b.pid, 6, one(0))
	capacitytest.Leases(t, b.pool, c, b.pid, 4, one(100))
	res := place(t, b.p, b.pid)
	if res.Placed != 8 || res.Preempted != 0 {
		t.Fatalf("result %+v, want 8 placed", res)
	}
	res = place(t, b.p, b.pid)
	if res.Preempted != 0 {
		t.Fatalf("result %+v: a lease within its tenant's nominal quota was preempted", res)
	}
}

func TestBorrowingStopsAtTheLimitAndWaitsForNominalDemand(t *testing.T) {
	t.Parallel()
	b := setupShared(t, 0, false)
	a := capacitytest.Tenant(t, b.pool, "team-a")
	c := capacitytest.Tenant(t, b.pool, "team-c")
	capacitytest.Grant(t, b.pool, b.pid, b.owner, a, capacitytest.GPUs("H100", 2), capacitytest.GPUs("H100", 3), 1)
	capacitytest.Grant(t, b.pool, b.pid, b.owner, c, capacitytest.GPUs("H100", 2), capacity.Resources{}, 1)
	aLeases := capacitytest.Leases(t, b.pool, a, b.pid, 8, one(0))
	if res := place(t, b.p, b.pid); res.Placed != 5 {
		t.Fatalf("result %+v, want a's nominal 2 and borrowing limit 3 placed", res)
	}
	if s := capacitytest.States(t, b.pool, aLeases); s[capacity.LeasePending] != 3 {
		t.Fatalf("a's leases %v, want 3 waiting at the borrowing limit", s)
	}
	// The owner (nominal: the 4 the grants leave) fills the pool; its fourth lease reclaims
	// one of a's borrowed leases and, with no grace period, is placed on what it freed at once.
	own := capacitytest.Leases(t, b.pool, b.owner, b.pid, 4, one(0))
	if res := place(t, b.p, b.pid); res.Placed != 4 || res.Preempted != 1 {
		t.Fatalf("result %+v, want the owner's 4 placed and 1 of a's preempted", res)
	}
	if s := capacitytest.States(t, b.pool, own); s[capacity.LeasePlaced] != 4 {
		t.Fatalf("owner's leases %v, want placed", s)
	}
	capacitytest.AssertNoOvercommit(t, b.pool)
	capacitytest.AssertUsageCounted(t, b.pool)
}

func TestPriorityPreemptionWithinATenantOnlyWhereAllowed(t *testing.T) {
	t.Parallel()
	for _, allowed := range []bool{false, true} {
		b := setupShared(t, 0, allowed)
		low := capacitytest.Leases(t, b.pool, b.owner, b.pid, 8, one(0))
		place(t, b.p, b.pid)
		high := capacitytest.Leases(t, b.pool, b.owner, b.pid, 1, one(10))
		res := place(t, b.p, b.pid)
		want := 0
		if allowed {
			want = 1
		}
		if res.Preempted != want {
			t.Fatalf("priority preemption allowed=%v: result %+v, want %d preempted", allowed, res, want)
		}
		if !allowed {
			continue
		}
		if s := capacitytest.States(t, b.pool, low[7:]); s[capacity.LeasePreempted] != 1 {
			t.Fatalf("newest low-priority lease %v, want preempted", s)
		}
		if s := capacitytest.States(t, b.pool, high); s[capacity.LeasePlaced] != 1 {
			t.Fatalf("high-priority lease %v, want placed", s)
		}
	}
}

func TestRevokedGrantFailsPendingLeasesAndKeepsRunningOnes(t *testing.T) {
	t.Parallel()
	b := setupShared(t, 0, false)
	a := capacitytest.Tenant(t, b.pool, "team-a")
	g := capacitytest.Grant(t, b.pool, b.pid, b.owner, a, capacitytest.GPUs("H100", 2), capacity.Resources{}, 1)
	running := capacitytest.Leases(t, b.pool, a, b.pid, 2, one(0))
	place(t, b.p, b.pid)
	if _, err := b.pool.Exec(ctx, `UPDATE pool_grants SET revoked_at = now() WHERE id = $1`, g); err != nil {
		t.Fatal(err)
	}
	pending := capacitytest.Leases(t, b.pool, a, b.pid, 1, one(0))
	if res := place(t, b.p, b.pid); res.Failed != 1 {
		t.Fatalf("result %+v, want the pending lease failed", res)
	}
	if s := capacitytest.States(t, b.pool, pending); s[capacity.LeaseFailed] != 1 {
		t.Fatalf("pending lease %v, want failed", s)
	}
	if s := capacitytest.States(t, b.pool, running); s[capacity.LeasePlaced] != 2 {
		t.Fatalf("running leases %v, want placed", s)
	}
}

// TestFairShareOfBorrowedCapacity keeps a pool busy with two borrowers of weights 1 and 3 for
// many placer cycles, and measures their shares of borrowed GPU-time.
func TestFairShareOfBorrowedCapacity(t *testing.T) {
	t.Parallel()
	b := setupShared(t, 0, false)
	light := capacitytest.Tenant(t, b.pool, "light")
	heavy := capacitytest.Tenant(t, b.pool, "heavy")
	capacitytest.Grant(t, b.pool, b.pid, b.owner, light, capacity.Resources{}, capacitytest.GPUs("H100", 8), 1)
	capacitytest.Grant(t, b.pool, b.pid, b.owner, heavy, capacity.Resources{}, capacitytest.GPUs("H100", 8), 3)
	rng := rand.New(rand.NewPCG(1, 2))
	pending := func(tenant uuid.UUID) int {
		var n int
		if err := b.pool.QueryRow(ctx, `SELECT count(*) FROM pool_leases WHERE tenant_id = $1 AND state = 'pending'`, tenant).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	held := func(tenant uuid.UUID) int {
		var n int
		if err := b.pool.QueryRow(ctx, `SELECT count(*) FROM pool_leases WHERE tenant_id = $1 AND state = 'placed'`, tenant).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	var gpuMinutes [2]int
	const cycles = 120
	for range cycles {
		for _, tenant := range []uuid.UUID{light, heavy} {
			for n := pending(tenant); n < 8; n++ {
				d := time.Duration(2+rng.IntN(4)) * time.Minute
				capacitytest.Leases(t, b.pool, tenant, b.pid, 1, capacitytest.LeaseSpec{GPUs: 1, Model: "H100", Duration: d})
			}
		}
		place(t, b.p, b.pid)
		gpuMinutes[0] += held(light)
		gpuMinutes[1] += held(heavy)
		b.now = b.now.Add(time.Minute)
	}
	total := float64(gpuMinutes[0] + gpuMinutes[1])
	if total < cycles*8*0.95 {
		t.Fatalf("the pool was busy %.0f of %d GPU-minutes", total, cycles*8)
	}
	lightShare := float64(gpuMinutes[0]) / total
	t.Logf("borrowed GPU-minutes: light %d, heavy %d (light's share %.3f)", gpuMinutes[0], gpuMinutes[1], lightShare)
	if lightShare < 0.20 || lightShare > 0.30 {
		t.Fatalf("light's share of borrowed GPU-time is %.3f, want 0.25 ± 0.05", lightShare)
	}
	capacitytest.AssertNoOvercommit(t, b.pool)
	capacitytest.AssertUsageCounted(t, b.pool)
}
