package sinks

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/better-compute/better-compute/gen/db"
	"github.com/better-compute/better-compute/internal/dbtest"
	"github.com/better-compute/better-compute/internal/locks"
	"github.com/better-compute/better-compute/internal/poll"
	"github.com/better-compute/better-compute/internal/webhook"
)

// TestDeliveryAcrossRestartAndFailures: every event reaches the receiver at least once and in
// order per subject, while the receiver answers 500 for a while, and across a dispatcher that
// dies without releasing its lease and another that takes over.
func TestDeliveryAcrossRestartAndFailures(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	pool := dbtest.Pool(t)
	tenant, other := newTenant(t, pool), newTenant(t, pool)
	rcv := newReceiver(t)
	_, secret := newWebhook(t, pool, tenant, rcv.srv.URL+"/hook")
	rcv.setSecret(secret)
	rcv.fail.Store(40)

	const subjects, perRound = 20, 10
	want := map[string]int{}
	produce := func(rounds int) {
		for range rounds {
			err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
				seqs := map[string]int{}
				for s := range subjects {
					subject := fmt.Sprintf("node/%02d", s)
					want[subject]++
					seqs[subject] = want[subject]
				}
				emit(t, tx, tenant, "node.updated", seqs)
				// Another tenant's events must never reach this webhook.
				emit(t, tx, other, "node.updated", map[string]int{"node/other": 1})
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
		}
	}
	total := func() int {
		n := 0
		for _, v := range want {
			n += v
		}
		return n
	}

	// Dispatcher A delivers the first half, through the receiver's failures.
	holderA := locks.NewHolder(pool, "a", nil)
	ctxA, cancelA := context.WithCancel(ctx)
	doneA := make(chan error, 1)
	go func() { doneA <- Run(ctxA, holderA, pool, fastOptions(t)) }()
	produce(perRound / 2)
	poll.Until(t, 20*time.Second, "half the events", func() bool { return rcv.unique() >= total()/2 })
	if rcv.nFail.Load() == 0 {
		t.Fatal("the receiver never failed a delivery")
	}
	// A dies without releasing its lease; more events arrive meanwhile.
	holderA.Abandon()
	cancelA()
	if err := <-doneA; err != nil {
		t.Fatal(err)
	}
	produce(perRound / 2)
	rcv.fail.Store(15)

	// B takes over once A's lease expires, and delivers the rest.
	holderB := locks.NewHolder(pool, "b", nil)
	ctxB, cancelB := context.WithCancel(ctx)
	defer cancelB()
	doneB := make(chan error, 1)
	go func() { doneB <- Run(ctxB, holderB, pool, fastOptions(t)) }()
	poll.Until(t, 20*time.Second, "every event", func() bool { return rcv.unique() == total() })
	cancelB()
	if err := <-doneB; err != nil {
		t.Fatal(err)
	}

	got := rcv.deliveries()
	checkOrder(t, got, want)
	for _, d := range got {
		if d.Subject == "node/other" {
			t.Fatalf("received another tenant's event %+v", d)
		}
		if d.Type != "node.updated" || !strings.HasPrefix(d.ID, "evt_") {
			t.Fatalf("delivery %+v", d)
		}
	}
	t.Logf("%d events, %d deliveries, %d refused by the receiver", total(), len(got), rcv.nFail.Load())
}

// recorder is a sink that records deliveries in memory.
type recorder struct {
	mu     sync.Mutex
	events []Event
	src    Source
}

func (r *recorder) Name() string   { return "recorder" }
func (r *recorder) Source() Source { return r.src }
func (r *recorder) Deliver(_ context.Context, e Event) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, e)
	return nil
}

func (r *recorder) ids() []int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []int64
	for _, e := range r.events {
		out = append(out, e.ID)
	}
	return out
}

// newDispatcher builds a dispatcher under a fresh lease, at the sink's cursor, for tests that
// drive its rounds one by one.
func newDispatcher(t *testing.T, sink Sink) *dispatcher {
	t.Helper()
	ctx := context.Background()
	pool := dbtest.Pool(t)
	ls, err := locks.NewHolder(pool, "test", nil).Acquire(ctx, time.Minute, "singleton:"+JobName(sink.Name()))
	if err != nil || len(ls) != 1 {
		t.Fatalf("lease: %v %v", ls, err)
	}
	d := &dispatcher{pool: pool, q: db.New(pool), lease: ls[0], sink: sink,
		opts: Options{Concurrency: 4}.withDefaults(), done: map[int64]struct{}{}}
	d.log = d.opts.Logger
	if err := d.q.EnsureSinkCursor(ctx, db.EnsureSinkCursorParams{Sink: sink.Name()}); err != nil {
		t.Fatal(err)
	}
	c, err := d.q.GetSinkCursor(ctx, sink.Name())
	if err != nil {
		t.Fatal(err)
	}
	d.pos, d.saved = position{c.TxID, c.OutboxID}, position{c.TxID, c.OutboxID}
	return d
}

func insertEvent(t *testing.T, q db.DBTX, tenant uuid.UUID, subject string) int64 {
	t.Helper()
	var id int64
	if err := q.QueryRow(context.Background(), `INSERT INTO outbox (tenant_id, type, subject, payload) VALUES ($1, 'test', $2, '{}') RETURNING id`,
		tenant, subject).Scan(&id); err != nil {
		t.Fatal(err)
	}
	return id
}

// TestCursorHasNoGaps: an event whose transaction commits after a later-numbered one is neither
// skipped nor overtaken; nothing is delivered past a transaction still running.
func TestCursorHasNoGaps(t *testing.T) { //nolint:paralleltest // rounds read only below the cluster-wide snapshot xmin, which other tests' open transactions hold back
	ctx := t.Context()
	rec := &recorder{}
	d := newDispatcher(t, rec)
	tenant := uuid.New()

	first := insertEvent(t, d.pool, tenant, "a")
	slow, err := d.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer slow.Rollback(ctx) //nolint:errcheck
	// A smaller id, committed last.
	early := insertEvent(t, slow, tenant, "a")
	late := insertEvent(t, d.pool, tenant, "b")
	if !(first < early && early < late) {
		t.Fatalf("ids %d %d %d", first, early, late)
	}
	for range 3 {
		if _, _, err := d.round(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if got := rec.ids(); len(got) != 1 || got[0] != first {
		t.Fatalf("with a transaction open, delivered %v, want only %d", got, first)
	}
	if err := slow.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if _, _, err := d.round(ctx); err != nil {
		t.Fatal(err)
	}
	got := rec.ids()
	if len(got) != 3 || got[0] != first || !(got[1] == early && got[2] == late || got[1] == late && got[2] == early) {
		t.Fatalf("delivered %v, want %d then %d and %d", got, first, early, late)
	}
	// The stored cursor is past all three: a new dispatcher delivers none again.
	rec2 := &recorder{}
	d2 := &dispatcher{pool: d.pool, q: d.q, lease: d.lease, sink: rec2, opts: d.opts, log: d.log, done: map[int64]struct{}{}}
	c, err := d.q.GetSinkCursor(ctx, rec.Name())
	if err != nil {
		t.Fatal(err)
	}
	d2.pos, d2.saved = position{c.TxID, c.OutboxID}, position{c.TxID, c.OutboxID}
	if _, _, err := d2.round(ctx); err != nil {
		t.Fatal(err)
	}
	if ids := rec2.ids(); len(ids) != 0 {
		t.Fatalf("after the cursor, delivered again %v", ids)
	}
}

// TestSubjectOrderFollowsIDs: a transaction that took its id first but wrote its event last
// (as when it waited for another's row lock) is delivered after it within the subject.
func TestSubjectOrderFollowsIDs(t *testing.T) { //nolint:paralleltest // rounds read only below the cluster-wide snapshot xmin, which other tests' open transactions hold back
	ctx := t.Context()
	rec := &recorder{}
	d := newDispatcher(t, rec)
	tenant := uuid.New()

	older, err := d.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer older.Rollback(ctx) //nolint:errcheck
	// The older transaction takes its transaction id now.
	if _, err := older.Exec(ctx, "SELECT pg_current_xact_id()"); err != nil {
		t.Fatal(err)
	}
	// A newer transaction writes and commits first.
	a := insertEvent(t, d.pool, tenant, "node/1")
	b := insertEvent(t, older, tenant, "node/1")
	if err := older.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if _, _, err := d.round(ctx); err != nil {
		t.Fatal(err)
	}
	if got := rec.ids(); len(got) != 2 || got[0] != a || got[1] != b {
		t.Fatalf("delivered %v, want %d then %d", got, a, b)
	}
}

// TestStaleHolderCannotMoveCursor: once the lease has changed hands, the old dispatcher's cursor
// write is refused.
func TestStaleHolderCannotMoveCursor(t *testing.T) { //nolint:paralleltest // a round reads only below the cluster-wide snapshot xmin, which other tests' open transactions hold back
	ctx := t.Context()
	rec := &recorder{}
	d := newDispatcher(t, rec)
	insertEvent(t, d.pool, uuid.New(), "x")
	if _, err := d.pool.Exec(ctx, "UPDATE locks SET expires_at = now() WHERE name = $1", d.lease.Name); err != nil {
		t.Fatal(err)
	}
	if ls, err := locks.NewHolder(d.pool, "other", nil).Acquire(ctx, time.Minute, d.lease.Name); err != nil || len(ls) != 1 {
		t.Fatalf("take over: %v %v", ls, err)
	}
	before, err := d.q.GetSinkCursor(ctx, rec.Name())
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := d.round(ctx); !errors.Is(err, locks.ErrStale) {
		t.Fatalf("round with a stale lease = %v, want ErrStale", err)
	}
	after, err := d.q.GetSinkCursor(ctx, rec.Name())
	if err != nil {
		t.Fatal(err)
	}
	if after != before {
		t.Fatalf("cursor moved from %+v to %+v", before, after)
	}
}

// TestWebhookFilterAndDelete: a webhook receives only its event types; deleting it stops its
// dispatcher and gives up its lease.
func TestWebhookFilterAndDelete(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	pool := dbtest.Pool(t)
	tenant := newTenant(t, pool)
	rcv := newReceiver(t)
	id, secret := newWebhook(t, pool, tenant, rcv.srv.URL, "node.deleted")
	rcv.setSecret(secret)
	holder := locks.NewHolder(pool, "h", nil)
	rctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- Run(rctx, holder, pool, fastOptions(t)) }()
	defer func() { cancel(); <-done }()

	emit(t, pool, tenant, "node.updated", map[string]int{"node/1": 1})
	emit(t, pool, tenant, "node.deleted", map[string]int{"node/1": 2})
	poll.Until(t, 10*time.Second, "the node.deleted event", func() bool { return rcv.unique() == 1 })
	if got := rcv.deliveries(); got[0].Type != "node.deleted" {
		t.Fatalf("received %+v", got)
	}
	if _, err := pool.Exec(ctx, "DELETE FROM webhooks WHERE id = $1", id); err != nil {
		t.Fatal(err)
	}
	name := "singleton:" + JobName(webhook.SinkName(id))
	poll.Until(t, 10*time.Second, "the deleted webhook's lease to be released", func() bool {
		var held bool
		if err := pool.QueryRow(ctx, "SELECT expires_at > now() FROM locks WHERE name = $1", name).Scan(&held); err != nil {
			t.Fatal(err)
		}
		return !held
	})
}

// syncBuffer is a log destination for concurrent writers.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func TestLogSink(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	pool := dbtest.Pool(t)
	var buf syncBuffer
	opts := fastOptions(t)
	opts.Log = true
	opts.Logger = slog.New(slog.NewJSONHandler(&buf, nil))
	rctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- Run(rctx, locks.NewHolder(pool, "h", nil), pool, opts) }()
	defer func() { cancel(); <-done }()
	// The log sink starts at the first event after it was created.
	poll.Until(t, 10*time.Second, "the log sink's cursor", func() bool {
		_, err := db.New(pool).GetSinkCursor(ctx, LogSinkName)
		return err == nil
	})
	emit(t, pool, uuid.New(), "tenant.created", map[string]int{"tenant/1": 7})
	poll.Until(t, 10*time.Second, "the event in the log", func() bool {
		return strings.Contains(buf.String(), `"type":"tenant.created","subject":"tenant/1"`) && strings.Contains(buf.String(), `"data":{"seq":7}`)
	})
}

// TestLastError: a failing webhook shows why on its cursor until a delivery succeeds.
func TestLastError(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	pool := dbtest.Pool(t)
	tenant := newTenant(t, pool)
	rcv := newReceiver(t)
	id, secret := newWebhook(t, pool, tenant, rcv.srv.URL)
	rcv.setSecret(secret)
	rcv.fail.Store(1 << 40)
	rctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- Run(rctx, locks.NewHolder(pool, "h", nil), pool, fastOptions(t)) }()
	defer func() { cancel(); <-done }()

	emit(t, pool, tenant, "node.updated", map[string]int{"node/1": 1})
	lastError := func() string {
		w, err := db.New(pool).GetWebhook(ctx, db.GetWebhookParams{TenantID: tenant, ID: id})
		if err != nil {
			t.Fatal(err)
		}
		return w.LastError
	}
	poll.Until(t, 10*time.Second, "the webhook's last error", func() bool { return strings.Contains(lastError(), "500") })
	rcv.fail.Store(0)
	poll.Until(t, 10*time.Second, "the delivery", func() bool { return rcv.unique() == 1 })
	poll.Until(t, 10*time.Second, "the error to clear", func() bool { return lastError() == "" })
}
