package gpustate_test

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/better-compute/better-compute/internal/capacity/capacitytest"
	"github.com/better-compute/better-compute/internal/dbtest"
	"github.com/better-compute/better-compute/internal/gpuhealth"
	"github.com/better-compute/better-compute/internal/gpustate"
)

func TestMain(m *testing.M) { dbtest.Main(m) }

var ctx = context.Background()

// span is the unhealthy span of the allocation that holds GPU gpu now; nil for NULL.
func span(t *testing.T, pool *pgxpool.Pool, gpu string) (since, until *time.Time) {
	t.Helper()
	if err := pool.QueryRow(ctx, `
		SELECT a.unhealthy_since, a.unhealthy_until FROM allocations a JOIN devices d ON d.id = a.device_id
		WHERE d.uuid = $1 AND a.ended_at IS NULL`, gpu).Scan(&since, &until); err != nil {
		t.Fatal(err)
	}
	return since, until
}

// TestHealthChangesMarkTheHoldingAllocation: a quarantine opens the unhealthy span of the
// allocation that holds the GPU, a clear closes it; a second quarantine before the closed span
// was metered to its end continues it (the documented approximation), one after starts a new
// span; a GPU no lease holds marks nothing.
func TestHealthChangesMarkTheHoldingAllocation(t *testing.T) {
	t.Parallel()
	pool := dbtest.Pool(t)
	tenant := capacitytest.RootTenant(t, pool)
	node := capacitytest.Nodes(t, pool, tenant, 1, capacitytest.NodeSpec{GPUs: 2, Model: "H100", CPUs: 8, MemoryBytes: 16 << 30})[0]
	pid := capacitytest.Pool(t, pool, tenant, "p", nil, node)
	lease := capacitytest.Leases(t, pool, tenant, pid, 1, capacitytest.LeaseSpec{GPUs: 1, Model: "H100", Duration: time.Hour})[0]
	capacitytest.PlaceOn(t, pool, lease, node)
	var held, free string
	if err := pool.QueryRow(ctx, `
		SELECT max(d.uuid) FILTER (WHERE a.id IS NOT NULL), max(d.uuid) FILTER (WHERE a.id IS NULL)
		FROM devices d LEFT JOIN allocations a ON a.device_id = d.id WHERE d.node_id = $1`, node).Scan(&held, &free); err != nil {
		t.Fatal(err)
	}
	operator, policy := uuid.New(), gpuhealth.DefaultPolicy()
	operate := func(gpu string, quarantine bool, at time.Time) {
		t.Helper()
		err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
			var err error
			if quarantine {
				_, err = gpustate.Quarantine(ctx, tx, tenant, gpu, operator, "fans failing", policy, at)
			} else {
				_, err = gpustate.Clear(ctx, tx, tenant, gpu, operator, policy, at)
			}
			return err
		})
		if err != nil {
			t.Fatalf("%s: quarantine %v: %v", gpu, quarantine, err)
		}
	}
	want := func(what string, since, until time.Time) {
		t.Helper()
		s, u := span(t, pool, held)
		if (s == nil) != since.IsZero() || s != nil && !s.Equal(since) || (u == nil) != until.IsZero() || u != nil && !u.Equal(until) {
			t.Errorf("%s: span %v to %v, want %v to %v", what, s, u, since, until)
		}
	}
	// Times after the placement (the database's clock), a second apart.
	t0 := time.Now().Add(time.Minute).UTC().Truncate(time.Microsecond)
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }

	want("placed", time.Time{}, time.Time{})
	operate(held, true, at(0))
	want("quarantined", at(0), time.Time{})
	operate(held, false, at(10))
	want("cleared", at(0), at(10))
	// Not metered since: the spans merge.
	operate(held, true, at(20))
	want("quarantined again before metering", at(0), time.Time{})
	operate(held, false, at(30))
	want("cleared again", at(0), at(30))
	// Metered past the span's end (as the usage job does at an hour boundary): a new span.
	if _, err := pool.Exec(ctx, `UPDATE allocations SET metered_until = $2 WHERE lease_id = $1`, lease, at(40)); err != nil {
		t.Fatal(err)
	}
	operate(held, true, at(50))
	want("quarantined after metering", at(50), time.Time{})

	operate(free, true, at(60))
	var marked int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM allocations WHERE unhealthy_since IS NOT NULL`).Scan(&marked); err != nil || marked != 1 {
		t.Errorf("%d allocations marked (%v), want only the held GPU's", marked, err)
	}
}
