package retention_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/better-compute/better-compute/gen/db"
	"github.com/better-compute/better-compute/internal/config"
	"github.com/better-compute/better-compute/internal/dbtest"
	"github.com/better-compute/better-compute/internal/jobrun"
	"github.com/better-compute/better-compute/internal/locks"
	"github.com/better-compute/better-compute/workers/internal/retention"
)

func TestMain(m *testing.M) { dbtest.Main(m) }

var ctx = context.Background()

var keep = config.Retention{Audit: 10 * 24 * time.Hour, Commands: 5 * 24 * time.Hour, Outbox: 24 * time.Hour}

// rows is what the test expects to stay and to go, by table.
type rows struct {
	keepAudit, dropAudit       []int64
	keepCommands, dropCommands []uuid.UUID
	keepOutbox, dropOutbox     []int64
}

func exec(t *testing.T, pool *pgxpool.Pool, sql string, args ...any) {
	t.Helper()
	if _, err := pool.Exec(ctx, sql, args...); err != nil {
		t.Fatal(err)
	}
}

// seed writes old and young rows in every table. The first audit row and the first outbox row
// are young, ahead of old ones, as a long transaction's row can be.
func seed(t *testing.T, pool *pgxpool.Pool) rows {
	t.Helper()
	q := db.New(pool)
	var r rows
	audit := func(age time.Duration) int64 {
		if err := q.InsertAuditEvent(ctx, db.InsertAuditEventParams{Method: "test/x", Outcome: "ok", RequestID: "r"}); err != nil {
			t.Fatal(err)
		}
		var id int64
		if err := pool.QueryRow(ctx, `UPDATE audit_events SET created_at = now() - $1::bigint * interval '1 millisecond'
			WHERE id = (SELECT max(id) FROM audit_events) RETURNING id`, age.Milliseconds()).Scan(&id); err != nil {
			t.Fatal(err)
		}
		return id
	}
	outbox := func(age time.Duration) int64 {
		if err := q.InsertOutboxEvent(ctx, db.InsertOutboxEventParams{TenantID: uuid.New(), Type: "t", Subject: "s", Payload: []byte(`{}`)}); err != nil {
			t.Fatal(err)
		}
		var id int64
		if err := pool.QueryRow(ctx, `UPDATE outbox SET created_at = now() - $1::bigint * interval '1 millisecond'
			WHERE id = (SELECT max(id) FROM outbox) RETURNING id`, age.Milliseconds()).Scan(&id); err != nil {
			t.Fatal(err)
		}
		return id
	}
	r.keepAudit = append(r.keepAudit, audit(time.Hour))
	r.keepOutbox = append(r.keepOutbox, outbox(time.Minute))
	for range 5 {
		r.dropAudit = append(r.dropAudit, audit(keep.Audit+time.Hour))
		r.dropOutbox = append(r.dropOutbox, outbox(keep.Outbox+time.Hour))
	}
	for range 2 {
		r.keepAudit = append(r.keepAudit, audit(keep.Audit-time.Hour))
		r.keepOutbox = append(r.keepOutbox, outbox(keep.Outbox-time.Hour))
	}

	tenant := uuid.Must(uuid.NewV7())
	if err := q.EnsureRootTenant(ctx, db.EnsureRootTenantParams{ID: tenant, Name: "root"}); err != nil {
		t.Fatal(err)
	}
	nodeID := node(t, pool, tenant)
	command := func(state string, finishedAge time.Duration) uuid.UUID {
		id := uuid.Must(uuid.NewV7())
		if _, err := q.CreateCommand(ctx, db.CreateCommandParams{
			ID: id, TenantID: tenant, NodeID: nodeID, Type: "t", Payload: []byte(`{}`),
			IdempotencyKey: id.String(), Deadline: time.Now().Add(time.Hour),
		}); err != nil {
			t.Fatal(err)
		}
		exec(t, pool, `UPDATE commands SET state = $2::command_state, created_at = now() - interval '100 days',
			finished_at = CASE WHEN $2::command_state NOT IN ('pending', 'sent', 'acked') THEN now() - $3::bigint * interval '1 millisecond' END
			WHERE id = $1`, id, state, finishedAge.Milliseconds())
		return id
	}
	for _, s := range []string{"succeeded", "failed", "expired", "cancelled", "succeeded"} {
		r.dropCommands = append(r.dropCommands, command(s, keep.Commands+time.Hour))
		r.keepCommands = append(r.keepCommands, command(s, keep.Commands-time.Hour))
	}
	// Unfinished commands stay however old they are.
	for _, s := range []string{"pending", "sent", "acked"} {
		r.keepCommands = append(r.keepCommands, command(s, 0))
	}
	return r
}

// node returns a node id for commands. Once the schema has nodes (whose migration adds a
// foreign key from commands.node_id), it creates the node.
func node(t *testing.T, pool *pgxpool.Pool, tenant uuid.UUID) uuid.UUID {
	t.Helper()
	id := uuid.Must(uuid.NewV7())
	var nodes bool
	if err := pool.QueryRow(ctx, `SELECT to_regclass('nodes') IS NOT NULL`).Scan(&nodes); err != nil {
		t.Fatal(err)
	}
	if nodes {
		exec(t, pool, `INSERT INTO nodes (id, tenant_id) VALUES ($1, $2)`, id, tenant)
	}
	return id
}

// check reports whether exactly the expected rows are left.
func (r rows) check(t *testing.T, pool *pgxpool.Pool) {
	t.Helper()
	ids := func(sql string) map[any]bool {
		rs, err := pool.Query(ctx, sql)
		if err != nil {
			t.Fatal(err)
		}
		defer rs.Close()
		out := map[any]bool{}
		for rs.Next() {
			var v any
			if err := rs.Scan(&v); err != nil {
				t.Fatal(err)
			}
			switch id := v.(type) {
			case [16]byte:
				out[uuid.UUID(id)] = true
			default:
				out[v] = true
			}
		}
		return out
	}
	compare := func(table string, have map[any]bool, keep []any) {
		if len(have) != len(keep) {
			t.Errorf("%s: %d rows left, want %d", table, len(have), len(keep))
		}
		for _, id := range keep {
			if !have[id] {
				t.Errorf("%s: row %v was deleted, want it kept", table, id)
			}
		}
	}
	compare("audit_events", ids(`SELECT id FROM audit_events`), anys(r.keepAudit))
	compare("commands", ids(`SELECT id FROM commands`), anys(r.keepCommands))
	compare("outbox", ids(`SELECT id FROM outbox`), anys(r.keepOutbox))
}

func anys[T any](s []T) []any {
	out := make([]any, len(s))
	for i, v := range s {
		out[i] = v
	}
	return out
}

func acquire(t *testing.T, pool *pgxpool.Pool) locks.Lock {
	t.Helper()
	ls, err := locks.NewHolder(pool, "test", nil).Acquire(ctx, time.Minute, "singleton:"+retention.Name)
	if err != nil || len(ls) != 1 {
		t.Fatalf("acquire: %v %v", ls, err)
	}
	return ls[0]
}

func TestPruneDeletesOldRowsInBoundedBatches(t *testing.T) {
	t.Parallel()
	pool := dbtest.Pool(t)
	r := seed(t, pool)

	// One statement deletes at most a batch.
	q := db.New(pool)
	if n, err := q.PruneFinishedCommands(ctx, db.PruneFinishedCommandsParams{KeepMs: keep.Commands.Milliseconds(), Lim: 2}); err != nil || n != 2 {
		t.Fatalf("one commands batch deleted %d (%v), want 2", n, err)
	}
	if n, err := q.PruneAuditEvents(ctx, db.PruneAuditEventsParams{KeepMs: keep.Audit.Milliseconds(), Lim: 3}); err != nil || n != 2 {
		// The window of the three lowest ids holds the young first row and two old ones.
		t.Fatalf("one audit batch deleted %d (%v), want 2", n, err)
	}

	n, err := retention.Prune(ctx, pool, acquire(t, pool), retention.Options{Retention: keep, Batch: 2})
	if err != nil {
		t.Fatal(err)
	}
	if want := (retention.Pruned{Audit: 3, Commands: 3, Outbox: 5}); n != want {
		t.Errorf("pruned %+v, want %+v", n, want)
	}
	r.check(t, pool)
}

func TestStaleLeaseDeletesNothing(t *testing.T) {
	t.Parallel()
	pool := dbtest.Pool(t)
	seed(t, pool)
	l := acquire(t, pool)
	l.Token-- // as if the lease had changed hands since
	n, err := retention.Prune(ctx, pool, l, retention.Options{Retention: keep})
	if !errors.Is(err, locks.ErrStale) || n != (retention.Pruned{}) {
		t.Fatalf("stale prune = %+v %v, want ErrStale", n, err)
	}
	var count int
	if err := pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM audit_events) + (SELECT count(*) FROM commands) + (SELECT count(*) FROM outbox)`).Scan(&count); err != nil {
		t.Fatal(err)
	}
	if count != 8+13+8 {
		t.Errorf("%d rows left after a stale prune, want all 29", count)
	}
}

func TestJobPrunesAndRecordsItsRuns(t *testing.T) {
	t.Parallel()
	pool := dbtest.Pool(t)
	r := seed(t, pool)
	h := locks.NewHolder(pool, "test", nil)
	jctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() { h.RunJob(jctx, retention.Job(pool, retention.Options{Retention: keep, Batch: 2})) })
	defer func() { cancel(); wg.Wait() }()

	deadline := time.Now().Add(10 * time.Second)
	for {
		runs, err := jobrun.List(ctx, pool)
		if err != nil {
			t.Fatal(err)
		}
		if len(runs) == 1 && runs[0].Name == retention.Name {
			if runs[0].LastError != "" {
				t.Fatalf("retention run failed: %s", runs[0].LastError)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the retention job did not record a run")
		}
		time.Sleep(10 * time.Millisecond)
	}
	r.check(t, pool)
}

func TestOutboxKeepsRowsNotDeliveredToEverySink(t *testing.T) { //nolint:paralleltest // pruning reads only below the cluster-wide snapshot xmin, which other tests' open transactions hold back
	pool := dbtest.Pool(t)
	r := seed(t, pool)
	// One sink has delivered everything, another only up to the third old row.
	exec(t, pool, `INSERT INTO sink_cursors (sink, tx_id, outbox_id) VALUES ('caught-up', pg_snapshot_xmin(pg_current_snapshot()), 0)`)
	exec(t, pool, `INSERT INTO sink_cursors (sink, tx_id, outbox_id) SELECT 'lagging', tx_id, id FROM outbox WHERE id = $1`, r.dropOutbox[2])
	l := acquire(t, pool)
	opts := retention.Options{Retention: keep, Batch: 2}

	n, err := retention.Prune(ctx, pool, l, opts)
	if err != nil {
		t.Fatal(err)
	}
	if n.Outbox != 3 {
		t.Errorf("pruned %d outbox rows, want the 3 delivered to every sink", n.Outbox)
	}
	undelivered := r
	undelivered.keepOutbox = append(append([]int64{}, r.keepOutbox...), r.dropOutbox[3:]...)
	undelivered.check(t, pool)

	// The lagging sink catches up: the rest goes.
	exec(t, pool, `UPDATE sink_cursors SET tx_id = pg_snapshot_xmin(pg_current_snapshot()), outbox_id = 0 WHERE sink = 'lagging'`)
	if n, err = retention.Prune(ctx, pool, l, opts); err != nil || n.Outbox != 2 {
		t.Fatalf("after the sink caught up, pruned %+v (%v), want 2 outbox rows", n, err)
	}
	r.check(t, pool)
}

// TestOutboxPrunedPastFailingWebhooks: a failing webhook's cursor does not hold the outbox (its
// events are parked as dead letters), while a healthy webhook's still does.
func TestOutboxPrunedPastFailingWebhooks(t *testing.T) { //nolint:paralleltest // pruning reads only below the cluster-wide snapshot xmin, which other tests' open transactions hold back
	pool := dbtest.Pool(t)
	r := seed(t, pool)
	var tenant uuid.UUID
	if err := pool.QueryRow(ctx, `SELECT id FROM tenants ORDER BY id LIMIT 1`).Scan(&tenant); err != nil {
		t.Fatal(err)
	}
	webhook := func(state string) uuid.UUID {
		id := uuid.New()
		exec(t, pool, `INSERT INTO webhooks (id, tenant_id, url, secret_sealed, state) VALUES ($1, $2, 'https://example.com/', '\x00', $3)`, id, tenant, state)
		// Behind every event.
		exec(t, pool, `INSERT INTO sink_cursors (sink, webhook_id, tx_id, outbox_id) VALUES ($1, $2, '0'::xid8, 0)`, "webhook:"+id.String(), id)
		return id
	}
	webhook("failing")
	healthy := webhook("healthy")
	l := acquire(t, pool)
	opts := retention.Options{Retention: keep, Batch: 2}

	// The healthy webhook is behind too: nothing goes.
	if n, err := retention.Prune(ctx, pool, l, opts); err != nil || n.Outbox != 0 {
		t.Fatalf("with a healthy webhook behind, pruned %+v (%v), want no outbox rows", n, err)
	}
	// It catches up; the failing one stays behind and holds nothing.
	exec(t, pool, `UPDATE sink_cursors SET tx_id = pg_snapshot_xmin(pg_current_snapshot()), outbox_id = 0 WHERE webhook_id = $1`, healthy)
	if n, err := retention.Prune(ctx, pool, l, opts); err != nil || n.Outbox != int64(len(r.dropOutbox)) {
		t.Fatalf("with only a failing webhook behind, pruned %+v (%v), want %d outbox rows", n, err, len(r.dropOutbox))
	}
	r.check(t, pool)
}
