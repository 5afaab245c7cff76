package retention_test

import (
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/better-compute/better-compute/gen/db"
	"github.com/better-compute/better-compute/internal/dbtest"
)

// TestPruneFanOuts: a fan-out past its deadline by more than retention.commands goes once its
// commands are gone; one with a command left, and a recent one, stay.
func TestPruneFanOuts(t *testing.T) {
	t.Parallel()
	pool := dbtest.Pool(t)
	q := db.New(pool)
	tenant := uuid.Must(uuid.NewV7())
	if err := q.EnsureRootTenant(ctx, db.EnsureRootTenantParams{ID: tenant, Name: "root"}); err != nil {
		t.Fatal(err)
	}
	nodeID := node(t, pool, tenant)
	keep := 7 * 24 * time.Hour
	old, kept, recent := uuid.New(), uuid.New(), uuid.New()
	for id, age := range map[uuid.UUID]time.Duration{old: keep + time.Hour, kept: keep + time.Hour, recent: time.Hour} {
		exec(t, pool, `INSERT INTO fan_outs (id, tenant_id, type, idempotency_key, max_in_flight, total, deadline)
			VALUES ($1, $2, 'echo', $4, 10, 1, now() - $3::bigint * interval '1 millisecond')`, id, tenant, age.Milliseconds(), id.String())
	}
	// kept still has a command (its retention counts from when it finished).
	exec(t, pool, `INSERT INTO commands (id, tenant_id, node_id, type, payload, state, deadline, idempotency_key, fan_out_id, finished_at)
		VALUES (gen_random_uuid(), $1, $2, 'echo', '{}', 'expired', now(), 'k', $3, now())`, tenant, nodeID, kept)
	if n, err := q.PruneFanOuts(ctx, db.PruneFanOutsParams{KeepMs: keep.Milliseconds(), Lim: 10}); err != nil || n != 1 {
		t.Fatalf("deleted %d (%v), want 1", n, err)
	}
	var left []uuid.UUID
	rows, err := pool.Query(ctx, `SELECT id FROM fan_outs ORDER BY id`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var id uuid.UUID
		if err := rows.Scan(&id); err != nil {
			t.Fatal(err)
		}
		left = append(left, id)
	}
	if len(left) != 2 || (left[0] != kept && left[1] != kept) || (left[0] != recent && left[1] != recent) {
		t.Fatalf("left %v, want %s and %s", left, kept, recent)
	}
}
