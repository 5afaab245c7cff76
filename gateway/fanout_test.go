package gateway

import (
	"context"
	"testing"

	"github.com/google/uuid"

	"github.com/better-compute/better-compute/gen/db"
	"github.com/better-compute/better-compute/internal/auth"
	"github.com/better-compute/better-compute/internal/dbtest"
)

// TestFanOutClaimLimit: a claim of small commands sends a whole fan-out of the largest
// max_in_flight at once; one of large payloads stays within fanOutClaimBytes; a payload larger
// than that still moves, one command a claim.
func TestFanOutClaimLimit(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		payload int64
		want    int32
	}{
		{0, fanOutBatch},
		{2, fanOutBatch},
		{200 << 10, 163},
		{fanOutClaimBytes, 1},
		{4 * fanOutClaimBytes, 1},
	} {
		got := fanOutClaimLimit(c.payload)
		if got != c.want {
			t.Errorf("fanOutClaimLimit(%d) = %d, want %d", c.payload, got, c.want)
		}
		if got > 1 && int64(got)*c.payload > fanOutClaimBytes {
			t.Errorf("fanOutClaimLimit(%d) = %d: %d bytes, over %d", c.payload, got, int64(got)*c.payload, fanOutClaimBytes)
		}
	}
}

// TestLockFanOutGivesPayloadSize: the claim's lock reads the size of the payload the fan-out's
// commands share, which bounds how many one claim sends.
func TestLockFanOutGivesPayloadSize(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.Pool(t)
	root, err := auth.EnsureRootTenant(ctx, pool)
	if err != nil {
		t.Fatal(err)
	}
	const payload = `{"data": {"k": "v"}}`
	fanOut := uuid.New()
	if _, err := pool.Exec(ctx, `
		WITH n AS (INSERT INTO nodes (id, tenant_id) SELECT gen_random_uuid(), $1 FROM generate_series(1, 3) RETURNING id),
		f AS (INSERT INTO fan_outs (id, tenant_id, type, selector, idempotency_key, max_in_flight, total, deadline)
			VALUES ($2, $1, 'echo', '{}', 'k', 7, 3, now() + interval '1 hour') RETURNING id)
		INSERT INTO commands (id, tenant_id, node_id, type, idempotency_key, deadline, state, fan_out_id, payload)
		SELECT gen_random_uuid(), $1, n.id, 'echo', n.id::text, now() + interval '1 hour', 'pending', f.id, $3::jsonb FROM n, f`,
		root.ID, fanOut, payload); err != nil {
		t.Fatal(err)
	}
	var want int64
	if err := pool.QueryRow(ctx, `SELECT octet_length($1::jsonb::text)`, payload).Scan(&want); err != nil {
		t.Fatal(err)
	}
	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	got, err := db.New(tx).LockFanOut(ctx, fanOut)
	if err != nil {
		t.Fatal(err)
	}
	if got.MaxInFlight != 7 || got.PayloadBytes != want || want == 0 {
		t.Errorf("LockFanOut: %+v, want max_in_flight 7 and %d payload bytes", got, want)
	}
}
