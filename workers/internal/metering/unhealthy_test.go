package metering_test

import (
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/better-compute/better-compute/gen/db"
	"github.com/better-compute/better-compute/internal/capacity"
	"github.com/better-compute/better-compute/internal/capacity/capacitytest"
	"github.com/better-compute/better-compute/internal/dbtest"
	"github.com/better-compute/better-compute/internal/event"
	"github.com/better-compute/better-compute/internal/gpuhealth"
	"github.com/better-compute/better-compute/internal/gpustate"
	"github.com/better-compute/better-compute/workers/internal/metering"
	"github.com/better-compute/better-compute/workers/internal/placer"
)

// TestUnhealthyGPUTimeIsMarked: a lease of 2 GPUs placed at 10:50 whose first GPU an operator
// quarantines at 11:20 and clears at 12:30, released at 12:45. The hourly metering at 12:10
// marks the 40 minutes of 11:20-12:00 as unhealthy in the 11h record, and the release marks
// 12:00-12:30 (a span that closed before it was metered) in the 12h record; the other GPU and the
// time before the quarantine are healthy.
func TestUnhealthyGPUTimeIsMarked(t *testing.T) {
	t.Parallel()
	pool := dbtest.Pool(t)
	tenant := capacitytest.RootTenant(t, pool)
	sel := map[string]string{"gpu": "h100"}
	capacitytest.Nodes(t, pool, tenant, 1, capacitytest.NodeSpec{GPUs: 2, Model: "H100", CPUs: 8, MemoryBytes: 16 << 30, Labels: sel})
	pid := capacitytest.Pool(t, pool, tenant, "h100", sel)
	lease := capacitytest.Leases(t, pool, tenant, pid, 1, capacitytest.LeaseSpec{GPUs: 2, Model: "H100", Duration: 3 * time.Hour})[0]

	now := time.Date(2031, 3, 4, 10, 50, 0, 0, time.UTC)
	clock := func() time.Time { return now }
	if res, err := placer.New(pool, placer.Options{Now: clock}).ReconcilePool(ctx, pid.String()); err != nil || res.Placed != 1 {
		t.Fatalf("place: %+v, %v", res, err)
	}
	var gpu string
	if err := pool.QueryRow(ctx, `
		SELECT d.uuid FROM allocations a JOIN devices d ON d.id = a.device_id
		WHERE a.lease_id = $1 ORDER BY d.idx LIMIT 1`, lease).Scan(&gpu); err != nil {
		t.Fatal(err)
	}
	operator, policy := uuid.New(), gpuhealth.DefaultPolicy()
	operate := func(quarantine bool) {
		t.Helper()
		err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
			var err error
			if quarantine {
				_, err = gpustate.Quarantine(ctx, tx, tenant, gpu, operator, "fans failing", policy, now)
			} else {
				_, err = gpustate.Clear(ctx, tx, tenant, gpu, operator, policy, now)
			}
			return err
		})
		if err != nil {
			t.Fatalf("quarantine %v: %v", quarantine, err)
		}
	}
	span := func() (since, until *time.Time) {
		t.Helper()
		if err := pool.QueryRow(ctx, `
			SELECT a.unhealthy_since, a.unhealthy_until FROM allocations a JOIN devices d ON d.id = a.device_id
			WHERE a.lease_id = $1 AND d.uuid = $2`, lease, gpu).Scan(&since, &until); err != nil {
			t.Fatal(err)
		}
		return since, until
	}

	now = now.Add(30 * time.Minute) // 11:20
	operate(true)
	if since, until := span(); since == nil || !since.Equal(now) || until != nil {
		t.Fatalf("after the quarantine: span %v to %v, want from %v, open", since, until, now)
	}
	now = now.Add(50 * time.Minute) // 12:10
	if _, err := metering.RunOnce(ctx, pool, metering.Options{Now: clock}); err != nil {
		t.Fatal(err)
	}
	now = now.Add(20 * time.Minute) // 12:30
	cleared := now
	operate(false)
	if since, until := span(); since == nil || until == nil || !until.Equal(cleared) {
		t.Fatalf("after the clear: span %v to %v, want closed at %v", since, until, cleared)
	}
	now = now.Add(15 * time.Minute) // 12:45
	err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		_, err := capacity.EndLeases(ctx, db.New(tx), []uuid.UUID{lease}, capacity.LeaseReleased, "", &now, new(event.Batch).Add)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := metering.RunOnce(ctx, pool, metering.Options{Now: clock}); err != nil {
		t.Fatal(err)
	}

	hours, err := db.New(pool).QueryUsageHourly(ctx, db.QueryUsageHourlyParams{
		TenantID: tenant, StartsAt: time.Date(2031, 3, 4, 0, 0, 0, 0, time.UTC), EndsAt: time.Date(2031, 3, 5, 0, 0, 0, 0, time.UTC), Lim: 100,
	})
	if err != nil {
		t.Fatal(err)
	}
	type amounts struct{ amount, unhealthy float64 }
	got := map[int]amounts{}
	for _, h := range hours {
		if h.Resource == "gpu" {
			got[h.Hour.UTC().Hour()] = amounts{h.Amount, h.UnhealthyAmount}
		}
	}
	want := map[int]amounts{
		10: {2 * 600, 0},        // 10:50-11:00, both healthy
		11: {2 * 3600, 40 * 60}, // one GPU unhealthy from 11:20
		12: {2 * 2700, 30 * 60}, // and until 12:30
	}
	if len(got) != len(want) {
		t.Fatalf("GPU usage by hour %v, want %v", got, want)
	}
	for h, w := range want {
		if got[h] != w {
			t.Errorf("%dh: %+v, want %+v", h, got[h], w)
		}
	}
	totals, err := db.New(pool).QueryUsageTotals(ctx, db.QueryUsageTotalsParams{
		TenantID: tenant, StartsAt: time.Date(2031, 3, 4, 0, 0, 0, 0, time.UTC), EndsAt: time.Date(2031, 3, 5, 0, 0, 0, 0, time.UTC), Lim: 100,
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range totals {
		if want := map[string]float64{"gpu": 70 * 60}[r.Resource]; r.UnhealthyAmount != want {
			t.Errorf("%s: unhealthy %v, want %v", r.Resource, r.UnhealthyAmount, want)
		}
	}
}
