package quota_test

import (
	"sync"
	"testing"

	"github.com/google/uuid"

	"github.com/better-compute/better-compute/gen/db"
	"github.com/better-compute/better-compute/internal/dbtest"
	"github.com/better-compute/better-compute/internal/quota"
)

// TestCommandReserverDecidesEachReservation races reservations of different sizes at one tenant
// through two reservers (two processes), so that many share a call: the reserved total is the
// sum of the admitted ones and within the cap, and every refused one would not have fit even in
// what was reserved at the end (each was decided against no more than that).
func TestCommandReserverDecidesEachReservation(t *testing.T) {
	t.Parallel()
	const most, racers = 100, 60
	pool := dbtest.Pool(t)
	tenant := uuid.New()
	if _, err := pool.Exec(ctx, `INSERT INTO tenants (id, name, is_root) VALUES ($1, 'root', true)`, tenant); err != nil {
		t.Fatal(err)
	}
	reservers := []*quota.CommandReserver{quota.NewCommandReserver(db.New(pool)), quota.NewCommandReserver(db.New(pool))}
	lctx := quota.WithLimits(ctx, quota.Limits{CommandsPerMinute: most})
	var mu sync.Mutex
	var admitted int
	var refused []int
	var wg sync.WaitGroup
	for i := range racers {
		n := 1 + i%7
		wg.Go(func() {
			err := reservers[i%2].Reserve(lctx, tenant, n)
			mu.Lock()
			defer mu.Unlock()
			if err == nil {
				admitted += n
				return
			}
			if _, ok := quota.CommandsRefusal(lctx, err, n); !ok {
				t.Errorf("reserve %d: %v, want the cap's refusal", n, err)
			}
			refused = append(refused, n)
		})
	}
	wg.Wait()
	var reserved int
	if err := pool.QueryRow(ctx, `SELECT COALESCE(sum(commands), 0) FROM tenant_command_seconds WHERE tenant_id = $1`, tenant).Scan(&reserved); err != nil {
		t.Fatal(err)
	}
	if reserved != admitted || reserved > most {
		t.Errorf("%d reserved, %d admitted, want them equal and at most %d", reserved, admitted, most)
	}
	if len(refused) == 0 {
		t.Errorf("nothing refused, want the cap reached")
	}
	for _, n := range refused {
		if reserved+n <= most {
			t.Errorf("%d refused with %d reserved of %d", n, reserved, most)
		}
	}
}
