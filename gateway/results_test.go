package gateway

import (
	"context"
	"log/slog"
	"testing"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/better-compute/better-compute/internal/auth"
	"github.com/better-compute/better-compute/internal/dbtest"
)

// TestResultsBatch: a batch of results finishes its commands with one event each in one
// transaction, by the batch statement itself (not the one-at-a-time fallback), and a repeated
// result changes nothing.
func TestResultsBatch(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool, g, sess := newRecorder(t)
	ids := []uuid.UUID{uuid.New(), uuid.New(), uuid.New()}
	sentCommands(t, pool, sess, ids)
	batch := []pendingResult{
		{sess: sess, id: ids[0], success: true, result: []byte(`{"out":"a"}`)},
		{sess: sess, id: ids[1], errText: "exit 1"},
		{sess: sess, id: ids[2], success: true},
		{sess: sess, id: ids[0], success: true, result: []byte(`{"out":"a"}`)}, // sent again in the same batch
	}
	if err := g.recordResults(ctx, batch); err != nil {
		t.Fatalf("the batch statement: %v", err)
	}
	if err := g.recordResults(ctx, batch[:1]); err != nil {
		t.Fatalf("a repeated result: %v", err)
	}
	var succeeded, failed, events int
	var out string
	if err := pool.QueryRow(ctx, `SELECT count(*) FILTER (WHERE state = 'succeeded'), count(*) FILTER (WHERE state = 'failed'),
			(SELECT result::text FROM commands WHERE id = $1)
		FROM commands`, ids[0]).Scan(&succeeded, &failed, &out); err != nil {
		t.Fatal(err)
	}
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM outbox WHERE type IN ('command.succeeded', 'command.failed')`).Scan(&events); err != nil {
		t.Fatal(err)
	}
	if succeeded != 2 || failed != 1 || events != 3 || out != `{"out": "a"}` {
		t.Errorf("%d succeeded, %d failed, %d events, result %s; want 2, 1, 3 and the first result", succeeded, failed, events, out)
	}
}

// newRecorder is a gateway that only records (its database, no listener) and a session of one
// node of the root tenant, for tests of the statements that record what sessions receive.
func newRecorder(t *testing.T) (*pgxpool.Pool, *Gateway, *session) {
	t.Helper()
	pool := dbtest.Pool(t)
	root, err := auth.EnsureRootTenant(context.Background(), pool)
	if err != nil {
		t.Fatal(err)
	}
	node := uuid.New()
	if _, err := pool.Exec(context.Background(), `INSERT INTO nodes (id, tenant_id) VALUES ($1, $2)`, node, root.ID); err != nil {
		t.Fatal(err)
	}
	return pool, &Gateway{opts: Options{Pool: pool}, log: slog.New(slog.DiscardHandler)}, &session{node: node, tenant: root.ID}
}

// sentCommands inserts commands with these ids for the session's node, sent and not yet acked.
func sentCommands(t *testing.T, pool *pgxpool.Pool, sess *session, ids []uuid.UUID) {
	t.Helper()
	if _, err := pool.Exec(context.Background(), `INSERT INTO commands (id, tenant_id, node_id, type, idempotency_key, deadline, state)
		SELECT id, $2, $3, 'exec', id::text, now() + interval '1 hour', 'sent' FROM unnest($1::uuid[]) AS id`,
		ids, sess.tenant, sess.node); err != nil {
		t.Fatal(err)
	}
}
