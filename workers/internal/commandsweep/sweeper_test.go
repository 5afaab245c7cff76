package commandsweep_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/better-compute/better-compute/gen/db"
	"github.com/better-compute/better-compute/internal/dbtest"
	"github.com/better-compute/better-compute/internal/jobrun"
	"github.com/better-compute/better-compute/internal/locks"
	"github.com/better-compute/better-compute/internal/poll"
	"github.com/better-compute/better-compute/workers/internal/commandsweep"
)

func TestMain(m *testing.M) { dbtest.Main(m) }

var ctx = context.Background()

// fixture is a database with a tenant to create commands in.
type fixture struct {
	t      *testing.T
	pool   *pgxpool.Pool
	q      *db.Queries
	tenant uuid.UUID
	node   uuid.UUID
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	pool := dbtest.Pool(t)
	q := db.New(pool)
	tenant := uuid.Must(uuid.NewV7())
	if err := q.EnsureRootTenant(ctx, db.EnsureRootTenantParams{ID: tenant, Name: "root"}); err != nil {
		t.Fatal(err)
	}
	f := &fixture{t: t, pool: pool, q: q, tenant: tenant, node: uuid.Must(uuid.NewV7())}
	// Once the schema has nodes (whose migration adds a foreign key from commands.node_id),
	// the node must exist.
	var nodes bool
	if err := pool.QueryRow(ctx, `SELECT to_regclass('nodes') IS NOT NULL`).Scan(&nodes); err != nil {
		t.Fatal(err)
	}
	if nodes {
		f.exec(`INSERT INTO nodes (id, tenant_id) VALUES ($1, $2)`, f.node, tenant)
	}
	return f
}

// create makes a pending command due within d.
func (f *fixture) create(d time.Duration) db.Command {
	f.t.Helper()
	id := uuid.Must(uuid.NewV7())
	c, err := f.q.CreateCommand(ctx, db.CreateCommandParams{
		ID: id, TenantID: f.tenant, NodeID: f.node, Type: "test.noop", Payload: []byte(`{}`),
		IdempotencyKey: id.String(), Deadline: time.Now().Add(d),
	})
	if err != nil {
		f.t.Fatal(err)
	}
	return c
}

// send moves a pending command to sent.
func (f *fixture) send(c db.Command) db.Command {
	f.t.Helper()
	rows, err := f.q.MarkCommandsSent(ctx, db.MarkCommandsSentParams{NodeID: c.NodeID, Ids: []uuid.UUID{c.ID}})
	if err != nil || len(rows) != 1 {
		f.t.Fatalf("mark sent: %v %v", rows, err)
	}
	return rows[0]
}

func (f *fixture) get(id uuid.UUID) db.Command {
	f.t.Helper()
	c, err := f.q.GetCommand(ctx, db.GetCommandParams{TenantID: f.tenant, ID: id})
	if err != nil {
		f.t.Fatal(err)
	}
	return c
}

// exec runs test set-up SQL that no product code needs (moving clocks back).
func (f *fixture) exec(sql string, args ...any) {
	f.t.Helper()
	if _, err := f.pool.Exec(ctx, sql, args...); err != nil {
		f.t.Fatal(err)
	}
}

// runJob runs job on a fresh holder until the test ends.
func runJob(t *testing.T, pool *pgxpool.Pool, job locks.Job) {
	t.Helper()
	h := locks.NewHolder(pool, "test-"+uuid.NewString(), nil)
	jctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() { h.RunJob(jctx, job) })
	t.Cleanup(func() { cancel(); wg.Wait() })
}

func TestSweeperRequeuesUnackedAndExpiresOverdue(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	const ackTimeout = 300 * time.Millisecond
	unacked := f.send(f.create(time.Hour))
	acked := f.send(f.create(time.Hour))
	if _, err := f.q.AckCommand(ctx, db.AckCommandParams{NodeID: f.node, ID: acked.ID}); err != nil {
		t.Fatal(err)
	}
	pending := f.create(time.Hour)
	overdue := f.create(200 * time.Millisecond)
	overdueSent := f.send(f.create(200 * time.Millisecond))

	runJob(t, f.pool, commandsweep.Sweeper(f.pool, commandsweep.SweeperOptions{Interval: 20 * time.Millisecond, AckTimeout: ackTimeout}))

	poll.Until(t, 10*time.Second, "the unacked command is pending again", func() bool { return f.get(unacked.ID).State == "pending" })
	got := f.get(unacked.ID)
	if since := got.UpdatedAt.Sub(*unacked.SentAt); since < ackTimeout {
		t.Errorf("re-queued %v after it was sent, before the ack timeout %v", since, ackTimeout)
	}
	if got.Attempts != 1 || got.FinishedAt != nil {
		t.Errorf("re-queued command: attempts %d, finished %v", got.Attempts, got.FinishedAt)
	}
	// Sent again, it is counted again.
	if again := f.send(got); again.Attempts != 2 {
		t.Errorf("second send: attempts %d, want 2", again.Attempts)
	}

	for _, c := range []db.Command{overdue, overdueSent} {
		poll.Until(t, 10*time.Second, "the overdue command expires", func() bool { return f.get(c.ID).State == "expired" })
		got := f.get(c.ID)
		if got.FinishedAt == nil || got.FinishedAt.Before(c.Deadline) || got.Error == "" {
			t.Errorf("expired command: finished %v (deadline %v), error %q", got.FinishedAt, c.Deadline, got.Error)
		}
	}
	if s := f.get(acked.ID).State; s != "acked" {
		t.Errorf("acked command became %s; the ack timeout applies to sent commands only", s)
	}
	if s := f.get(pending.ID).State; s != "pending" {
		t.Errorf("pending command within its deadline became %s", s)
	}

	poll.Until(t, 10*time.Second, "the sweep is recorded in job_runs", func() bool {
		runs, err := jobrun.List(ctx, f.pool)
		return err == nil && len(runs) == 1 && runs[0].Name == commandsweep.SweeperName && runs[0].LastError == "" && runs[0].LastOKAt != nil
	})
}

func TestSweepBatchesAreBounded(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	for range 5 {
		f.create(-time.Second)
	}
	for range 3 {
		f.send(f.create(time.Hour))
	}
	f.exec(`UPDATE commands SET sent_at = now() - interval '1 hour' WHERE state = 'sent'`)
	l := acquire(t, f.pool, "singleton:"+commandsweep.SweeperName, time.Minute)
	opts := commandsweep.SweeperOptions{Batch: 2, AckTimeout: time.Minute}
	var got []commandsweep.Swept
	for range 4 {
		n, err := commandsweep.Sweep(ctx, f.pool, l, opts)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, n)
	}
	want := []commandsweep.Swept{{2, 2}, {2, 1}, {1, 0}, {0, 0}}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("sweeps = %v, want %v", got, want)
	}
}

func TestSweepWithinAckTimeoutChangesNothing(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	c := f.send(f.create(time.Hour))
	l := acquire(t, f.pool, "singleton:"+commandsweep.SweeperName, time.Minute)
	n, err := commandsweep.Sweep(ctx, f.pool, l, commandsweep.SweeperOptions{AckTimeout: time.Hour})
	if err != nil || n != (commandsweep.Swept{}) {
		t.Fatalf("sweep = %v %v, want nothing done", n, err)
	}
	if s := f.get(c.ID).State; s != "sent" {
		t.Errorf("state %s, want sent", s)
	}
}

func TestStaleLeaseSweepChangesNothing(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	name := "singleton:" + commandsweep.SweeperName
	a, b := locks.NewHolder(f.pool, "a", nil), locks.NewHolder(f.pool, "b", nil)
	la, err := a.Acquire(ctx, 100*time.Millisecond, name)
	if err != nil || len(la) != 1 {
		t.Fatalf("a acquire: %v %v", la, err)
	}
	// a stalls; its lease expires and b takes it.
	var lb []locks.Lock
	poll.Until(t, 10*time.Second, "b takes the expired lease", func() bool {
		lb, err = b.Acquire(ctx, time.Minute, name)
		return err == nil && len(lb) == 1
	})

	overdue := f.create(-time.Second)
	unacked := f.send(f.create(time.Hour))
	f.exec(`UPDATE commands SET sent_at = now() - interval '1 hour' WHERE id = $1`, unacked.ID)
	opts := commandsweep.SweeperOptions{AckTimeout: time.Second}

	if n, err := commandsweep.Sweep(ctx, f.pool, la[0], opts); !errors.Is(err, locks.ErrStale) || n != (commandsweep.Swept{}) {
		t.Fatalf("stale sweep = %v %v, want ErrStale", n, err)
	}
	if s := f.get(overdue.ID).State; s != "pending" {
		t.Errorf("stale sweep changed the overdue command to %s", s)
	}
	if s := f.get(unacked.ID).State; s != "sent" {
		t.Errorf("stale sweep changed the unacked command to %s", s)
	}
	if n, err := commandsweep.Sweep(ctx, f.pool, lb[0], opts); err != nil || n != (commandsweep.Swept{Expired: 1, Requeued: 1}) {
		t.Fatalf("current holder's sweep = %v %v", n, err)
	}
}

func acquire(t *testing.T, pool *pgxpool.Pool, name string, ttl time.Duration) locks.Lock {
	t.Helper()
	ls, err := locks.NewHolder(pool, "test", nil).Acquire(ctx, ttl, name)
	if err != nil || len(ls) != 1 {
		t.Fatalf("acquire %s: %v %v", name, ls, err)
	}
	return ls[0]
}
