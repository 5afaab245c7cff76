package gateway

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/uuid"

	"github.com/better-compute/better-compute/gen/db"
	"github.com/better-compute/better-compute/internal/auth"
	"github.com/better-compute/better-compute/internal/dbtest"
)

// TestClaimPlansStayLinear: the dispatch claims keep a plan whose work grows with the nodes,
// even when the plan was cached while the commands table was empty (a new deployment, every
// test database). The claims are prepared and run on an empty table until PostgreSQL settles on
// a generic plan; then 1,000 nodes get a pending fan-out command each and the claims run again
// under EXPLAIN. Counted are buffer hits, not time: a plan that runs the per-node lookups again
// for each pending command (as one did: 3,000 nodes took 9 to 37 s) hits a million buffers.
func TestClaimPlansStayLinear(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.Pool(t)
	root, err := auth.EnsureRootTenant(ctx, pool)
	if err != nil {
		t.Fatal(err)
	}
	conn, err := pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	q := db.New(conn)
	for range 8 { // PostgreSQL weighs a generic plan after five custom ones
		if _, err := q.ClaimPendingCommands(ctx, db.ClaimPendingCommandsParams{NodeIds: []uuid.UUID{uuid.New()}, Rooms: []int32{32}, Lim: 1000}); err != nil {
			t.Fatal(err)
		}
		if _, err := q.ClaimFanOutCommands(ctx, db.ClaimFanOutCommandsParams{FanOutID: uuid.New(), NodeIds: []uuid.UUID{uuid.New()}, Lim: 1000, MaxInFlight: 1000}); err != nil {
			t.Fatal(err)
		}
	}

	const n = 1000
	nodes := make([]string, n)
	rooms := make([]string, n)
	for i := range nodes {
		nodes[i], rooms[i] = uuid.NewString(), "32"
	}
	fanOut := uuid.New()
	if _, err := pool.Exec(ctx, `
		WITH n AS (INSERT INTO nodes (id, tenant_id) SELECT id, $2 FROM unnest($1::uuid[]) id RETURNING id),
		f AS (INSERT INTO fan_outs (id, tenant_id, type, selector, idempotency_key, max_in_flight, total, deadline)
			VALUES ($3, $2, 'exec', '{}', 'k', 1000, 1000, now() + interval '1 hour') RETURNING id)
		INSERT INTO commands (id, tenant_id, node_id, type, idempotency_key, deadline, state, fan_out_id)
		SELECT gen_random_uuid(), $2, n.id, 'exec', n.id::text, now() + interval '1 hour', 'pending', f.id FROM n, f`,
		nodes, root.ID, fanOut); err != nil {
		t.Fatal(err)
	}
	// The claims already return nothing here (the pending commands belong to a fan-out; the
	// fan-out's claim is held to no commands), so the plan's lookups are all that is counted.
	array := "'{" + strings.Join(nodes, ",") + "}'"
	for name, args := range map[string]string{
		"ClaimPendingCommands": array + ", '{" + strings.Join(rooms, ",") + "}', 1000",
		"ClaimFanOutCommands":  "'" + fanOut.String() + "', " + array + ", 1000, 0",
	} {
		var prepared string
		var generic int64
		if err := conn.QueryRow(ctx, `SELECT name, generic_plans FROM pg_prepared_statements WHERE statement LIKE $1`,
			"-- name: "+name+" %").Scan(&prepared, &generic); err != nil {
			t.Fatalf("%s: the prepared statement: %v", name, err)
		}
		if generic == 0 {
			t.Fatalf("%s: PostgreSQL kept custom plans, so this test does not test the cached plan", name)
		}
		var out []struct {
			Plan struct {
				SharedHitBlocks int64 `json:"Shared Hit Blocks"`
			}
		}
		var doc []byte
		if err := conn.QueryRow(ctx, "EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) EXECUTE "+prepared+"("+args+")").Scan(&doc); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if err := json.Unmarshal(doc, &out); err != nil || len(out) != 1 {
			t.Fatalf("%s: the plan %s: %v", name, doc, err)
		}
		if hits := out[0].Plan.SharedHitBlocks; hits > 20*n {
			t.Errorf("%s over %d nodes hit %d buffers; want at most %d", name, n, hits, 20*n)
		}
	}
}
