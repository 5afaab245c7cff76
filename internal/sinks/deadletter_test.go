package sinks

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/better-compute/better-compute/gen/db"
	"github.com/better-compute/better-compute/internal/config"
	"github.com/better-compute/better-compute/internal/dbtest"
	"github.com/better-compute/better-compute/internal/event"
	"github.com/better-compute/better-compute/internal/locks"
	"github.com/better-compute/better-compute/internal/poll"
	"github.com/better-compute/better-compute/internal/webhook"
	"github.com/better-compute/better-compute/workers/workerstest"
)

// TestFailingWebhookIsParkedAndDoesNotHoldTheOutbox: a webhook whose endpoint always answers 500
// is retried on a bounded schedule, then marked failing with its events parked (within the
// cap, the oldest dropped and counted) and its cursor past them; a healthy webhook of the same
// tenant receives everything, and retention prunes the outbox.
func TestFailingWebhookIsParkedAndDoesNotHoldTheOutbox(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	pool := dbtest.Pool(t)
	tenant := newTenant(t, pool)
	bad, good := newReceiver(t), newReceiver(t)
	bad.fail.Store(1 << 40) // always 500
	badID, badSecret := newWebhook(t, pool, tenant, bad.srv.URL+"/hook/secret-token")
	bad.setSecret(badSecret)
	_, goodSecret := newWebhook(t, pool, tenant, good.srv.URL+"/hook")
	good.setSecret(goodSecret)

	const subjects, perSubject = 3, 5
	want := map[string]int{}
	err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		for range perSubject {
			seqs := map[string]int{}
			for s := range subjects {
				subject := fmt.Sprintf("node/%d", s)
				want[subject]++
				seqs[subject] = want[subject]
			}
			emit(t, tx, tenant, "node.updated", seqs)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}

	opts := fastOptions(t)
	opts.GiveUpAfter, opts.MaxDeadLetters = 300*time.Millisecond, 10
	logs := &syncBuffer{}
	opts.Logger = slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- Run(runCtx, locks.NewHolder(pool, "sinks", nil), pool, opts) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	}()

	q := db.New(pool)
	// 15 events and the webhook.failing event are parked; the cap keeps the newest 10.
	poll.Until(t, 20*time.Second, "the webhook failing with its events parked", func() bool {
		w, err := q.GetWebhook(ctx, db.GetWebhookParams{TenantID: tenant, ID: badID})
		return err == nil && w.State == webhook.StateFailing && w.DeadLetters == 10 && w.DeadLettersDropped == 6
	})
	w, err := q.GetWebhook(ctx, db.GetWebhookParams{TenantID: tenant, ID: badID})
	if err != nil {
		t.Fatal(err)
	}
	if w.FailingSince == nil || w.Failure == "" || bad.nFail.Load() < 2 {
		t.Fatalf("failing webhook %+v after %d attempts", w, bad.nFail.Load())
	}
	rows, err := q.ListDeadLetters(ctx, db.ListDeadLettersParams{TenantID: tenant, WebhookID: badID, Lim: 100})
	if err != nil || len(rows) != 10 || rows[9].Type != (event.WebhookFailing{}).Type() {
		t.Fatalf("dead letters %+v (%v)", rows, err)
	}
	// Neither the announcement nor the logs carry the URL's path, which holds a token.
	if p := string(rows[9].Payload); strings.Contains(p, "secret-token") || !strings.Contains(p, webhook.RedactedPath) {
		t.Fatalf("webhook.failing data %s", p)
	}
	if l := logs.String(); strings.Contains(l, "secret-token") || !strings.Contains(l, "retries ran out") {
		t.Fatalf("logs:\n%s", l)
	}
	// The healthy webhook got every event, and the announcement.
	poll.Until(t, 20*time.Second, "every event at the healthy webhook", func() bool { return good.unique() == subjects*perSubject+1 })
	var updates []delivery
	for _, d := range good.deliveries() {
		if d.Type == "node.updated" {
			updates = append(updates, d)
		}
	}
	checkOrder(t, updates, want)

	// Parking goes on for new events, without attempts.
	attempts := bad.nFail.Load()
	emit(t, pool, tenant, "node.updated", map[string]int{"node/late": 1})
	poll.Until(t, 20*time.Second, "the late event parked", func() bool {
		w, err := q.GetWebhook(ctx, db.GetWebhookParams{TenantID: tenant, ID: badID})
		return err == nil && w.DeadLettersDropped == 7 && good.unique() == subjects*perSubject+2
	})
	if n := bad.nFail.Load(); n != attempts {
		t.Errorf("%d delivery attempts to a failing webhook", n-attempts)
	}

	// Retention prunes every event: the failing webhook does not hold them.
	poll.Until(t, 20*time.Second, "the outbox pruned", func() bool {
		workerstest.Prune(t, pool, config.Retention{Outbox: time.Millisecond})
		var left int
		if err := pool.QueryRow(ctx, `SELECT count(*) FROM outbox WHERE tenant_id = $1`, tenant).Scan(&left); err != nil {
			t.Fatal(err)
		}
		return left == 0
	})
}

// TestReplayDeliversParkedEventsFirst: replayed events reach the recovered endpoint with their
// original ids, before newer events, and leave the dead letters; the webhook is healthy again.
func TestReplayDeliversParkedEventsFirst(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	pool := dbtest.Pool(t)
	tenant := newTenant(t, pool)
	rcv := newReceiver(t)
	rcv.fail.Store(1 << 40)
	id, secret := newWebhook(t, pool, tenant, rcv.srv.URL+"/hook", "node.updated")
	rcv.setSecret(secret)
	emit(t, pool, tenant, "node.updated", map[string]int{"node/a": 1})
	emit(t, pool, tenant, "node.updated", map[string]int{"node/a": 2})

	opts := fastOptions(t)
	opts.GiveUpAfter = 200 * time.Millisecond
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- Run(runCtx, locks.NewHolder(pool, "sinks", nil), pool, opts) }()
	defer func() { cancel(); <-done }()

	q := db.New(pool)
	poll.Until(t, 20*time.Second, "the events parked", func() bool {
		w, err := q.GetWebhook(ctx, db.GetWebhookParams{TenantID: tenant, ID: id})
		return err == nil && w.State == webhook.StateFailing && w.DeadLetters == 2
	})
	parked, err := q.ListDeadLetters(ctx, db.ListDeadLettersParams{TenantID: tenant, WebhookID: id, Lim: 10})
	if err != nil {
		t.Fatal(err)
	}

	// The endpoint recovers; the tenant replays (as webhooks/replayDeadLetters does), and a
	// newer event of the same subject follows.
	rcv.fail.Store(0)
	replay(t, pool, tenant, id)
	emit(t, pool, tenant, "node.updated", map[string]int{"node/a": 3})
	poll.Until(t, 20*time.Second, "the replayed and the new events", func() bool { return rcv.unique() == 3 })
	got := rcv.deliveries()
	checkOrder(t, got, map[string]int{"node/a": 3})
	if got[0].ID != webhook.EventID(parked[0].OutboxID) || got[1].ID != webhook.EventID(parked[1].OutboxID) {
		t.Fatalf("replayed %v, parked %+v", got, parked)
	}
	poll.Until(t, 20*time.Second, "the dead letters emptied", func() bool {
		w, err := q.GetWebhook(ctx, db.GetWebhookParams{TenantID: tenant, ID: id})
		return err == nil && w.State == webhook.StateHealthy && w.DeadLetters == 0
	})
}

// replay does what webhooks/replayDeadLetters does, without the API.
func replay(t *testing.T, pool *pgxpool.Pool, tenant, id uuid.UUID) {
	t.Helper()
	ctx := context.Background()
	err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		q := db.New(tx)
		if _, err := q.MarkWebhookHealthy(ctx, db.MarkWebhookHealthyParams{TenantID: tenant, ID: id}); err != nil {
			return err
		}
		if _, err := q.QueueDeadLetters(ctx, db.QueueDeadLettersParams{TenantID: tenant, WebhookID: id}); err != nil {
			return err
		}
		return q.ClearSinkRetry(ctx, webhook.SinkName(id))
	})
	if err != nil {
		t.Fatal(err)
	}
}
