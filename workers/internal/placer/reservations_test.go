package placer_test

import (
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/better-compute/better-compute/gen/db"
	"github.com/better-compute/better-compute/internal/capacity/capacitytest"
	"github.com/better-compute/better-compute/internal/dbtest"
)

// TestGangReservationsNoted: SetGangReservations sets the start of the gangs it is given, clears
// the pool's other pending gangs' starts, and leaves the leases that are not pending gangs of
// the pool alone.
func TestGangReservationsNoted(t *testing.T) {
	t.Parallel()
	pool := dbtest.Pool(t)
	tenant := capacitytest.RootTenant(t, pool)
	pid := capacitytest.Pool(t, pool, tenant, "h100", map[string]string{"gpu": "h100"})
	other := capacitytest.Pool(t, pool, tenant, "a100", map[string]string{"gpu": "a100"})
	gangs := capacitytest.Leases(t, pool, tenant, pid, 3, capacitytest.LeaseSpec{GPUs: 16, Model: "H100"})
	single := capacitytest.Leases(t, pool, tenant, pid, 1, capacitytest.LeaseSpec{GPUs: 1, Model: "H100"})
	elsewhere := capacitytest.Leases(t, pool, tenant, other, 1, capacitytest.LeaseSpec{GPUs: 16, Model: "A100"})
	was := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	if _, err := pool.Exec(ctx, `UPDATE pool_leases SET nodes = 2, gpus_per_node = 8 WHERE id = ANY($1)`, append(gangs, elsewhere...)); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `UPDATE pool_leases SET reserved_start = $2 WHERE id = ANY($1)`, append(append([]uuid.UUID{gangs[1], gangs[2]}, single...), elsewhere...), was); err != nil {
		t.Fatal(err)
	}
	start := was.Add(time.Hour)
	// gangs[0] gets a start, gangs[1] a new one, gangs[2] (no longer reserved) none.
	if err := db.New(pool).SetGangReservations(ctx, db.SetGangReservationsParams{
		PoolID: pid, Ids: []uuid.UUID{gangs[0], gangs[1]}, Starts: []time.Time{start, start.Add(time.Hour)},
	}); err != nil {
		t.Fatal(err)
	}
	want := map[uuid.UUID]*time.Time{
		gangs[0]: &start, gangs[1]: new(start.Add(time.Hour)), gangs[2]: nil, single[0]: &was, elsewhere[0]: &was,
	}
	for id, w := range want {
		var got *time.Time
		if err := pool.QueryRow(ctx, `SELECT reserved_start FROM pool_leases WHERE id = $1`, id).Scan(&got); err != nil {
			t.Fatal(err)
		}
		if (got == nil) != (w == nil) || (got != nil && !got.Equal(*w)) {
			t.Errorf("lease %s: reserved start %v, want %v", id, got, w)
		}
	}
}
