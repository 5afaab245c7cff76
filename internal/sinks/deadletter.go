package sinks

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/better-compute/better-compute/gen/db"
	"github.com/better-compute/better-compute/internal/event"
	"github.com/better-compute/better-compute/internal/locks"
	"github.com/better-compute/better-compute/internal/webhook"
)

// maxFailureLen bounds the stored reason a webhook failed (webhooks.failure allows 2000).
const maxFailureLen = 1000

// loadState reads whether the webhook is failing and whether a run of failures is recorded.
func (d *dispatcher) loadState(ctx context.Context) error {
	if d.hook == nil {
		return nil
	}
	st, err := d.q.WebhookState(ctx, d.hook.ID)
	if errors.Is(err, pgx.ErrNoRows) {
		return errSinkGone
	}
	if err != nil {
		return fmt.Errorf("read webhook state: %w", err)
	}
	d.failing = st.State == webhook.StateFailing
	if d.retrying, err = d.q.SinkRetrying(ctx, d.sink.Name()); err != nil {
		return fmt.Errorf("read retry state: %w", err)
	}
	return nil
}

// failed records a failed delivery. For a webhook whose run of failures has lasted
// GiveUpAfter it then gives up: it marks the webhook failing (the next rounds park its events)
// and reports gaveUp.
func (d *dispatcher) failed(ctx context.Context, derr error) (gaveUp bool, err error) {
	failure := truncate(derr.Error(), maxFailureLen)
	retryingMs, err := d.q.RecordSinkError(ctx, db.RecordSinkErrorParams{Sink: d.sink.Name(), LastError: failure})
	if errors.Is(err, pgx.ErrNoRows) {
		return false, errSinkGone
	}
	if err != nil {
		return false, fmt.Errorf("record delivery error: %w", err)
	}
	d.retrying = true
	if d.hook == nil || time.Duration(retryingMs)*time.Millisecond < d.opts.GiveUpAfter {
		return false, nil
	}
	failingAlready := false
	err = locks.InTx(ctx, d.pool, d.lease, func(tx pgx.Tx) error {
		q := db.New(tx)
		st, err := q.LockWebhookState(ctx, d.hook.ID)
		if errors.Is(err, pgx.ErrNoRows) {
			return errSinkGone
		}
		if err != nil {
			return err
		}
		// Read after the lock: a replay that committed meanwhile restarted the schedule.
		if st.State == webhook.StateFailing {
			failingAlready = true
			return nil
		}
		retrying, err := q.SinkRetrying(ctx, d.sink.Name())
		if err != nil || !retrying {
			return err
		}
		if err := q.MarkWebhookFailing(ctx, db.MarkWebhookFailingParams{ID: d.hook.ID, Failure: failure}); err != nil {
			return err
		}
		// Events queued by a replay are parked again, with the events of the outbox.
		if err := q.UnqueueDeadLetters(ctx, db.UnqueueDeadLettersParams{WebhookID: d.hook.ID, Error: failure}); err != nil {
			return err
		}
		if err := q.ClearSinkRetry(ctx, d.sink.Name()); err != nil {
			return err
		}
		if err := event.Emit(ctx, q, d.hook.TenantID, event.WebhookFailing{ID: d.hook.ID, URL: webhook.RedactURL(d.hook.URL), Error: failure}); err != nil {
			return err
		}
		gaveUp = true
		return nil
	})
	if err != nil {
		return false, fmt.Errorf("give up on the webhook: %w", err)
	}
	d.retrying = false
	d.failing = gaveUp || failingAlready
	return d.failing, nil
}

// recovered ends a recorded run of failures after a round without one.
func (d *dispatcher) recovered(ctx context.Context) {
	if !d.retrying {
		return
	}
	if err := d.q.ClearSinkRetry(ctx, d.sink.Name()); err != nil {
		if ctx.Err() == nil {
			d.log.Warn("clear the run of failures", "err", err)
		}
		return
	}
	d.retrying = false
}

// parkRound is a failing webhook's round: it parks the next batch of its events instead of
// delivering them and moves the cursor past them, in one transaction fenced by the lease. It
// clears d.failing, parking nothing, once a replay has marked the webhook healthy.
func (d *dispatcher) parkRound(ctx context.Context) (full bool, err error) {
	st, err := d.q.WebhookState(ctx, d.hook.ID)
	if errors.Is(err, pgx.ErrNoRows) {
		return false, errSinkGone
	}
	if err != nil {
		return false, fmt.Errorf("read webhook state: %w", err)
	}
	if st.State != webhook.StateFailing {
		d.failing = false
		return false, nil
	}
	horizon, err := d.q.OutboxHorizon(ctx)
	if err != nil {
		return false, fmt.Errorf("read outbox horizon: %w", err)
	}
	rows, err := d.read(ctx, horizon)
	if err != nil {
		return false, fmt.Errorf("read outbox: %w", err)
	}
	var park db.ParkDeadLettersParams
	next := d.pos
	for _, e := range rows {
		next = position{e.TxID, e.ID}
		if _, ok := d.done[e.ID]; ok || (d.types != nil && !d.types[e.Type]) {
			continue
		}
		park.OutboxIds = append(park.OutboxIds, e.ID)
		park.Types = append(park.Types, e.Type)
		park.Subjects = append(park.Subjects, e.Subject)
		park.Payloads = append(park.Payloads, e.Payload)
		park.CreatedAts = append(park.CreatedAts, e.CreatedAt)
	}
	full = len(rows) == d.opts.BatchSize
	if h := (position{horizon, 0}); !full && next.less(h) {
		next = h
	}
	moved := func() {
		for _, e := range rows {
			delete(d.done, e.ID)
		}
		d.pos = next
	}
	if len(park.OutboxIds) == 0 {
		// Nothing to park: move as a round over filtered-out events does.
		moved()
		if d.pos != d.saved && time.Since(d.savedAt) >= d.opts.FlushInterval {
			return full, d.save(ctx)
		}
		return full, nil
	}
	stillFailing := false
	err = locks.InTx(ctx, d.pool, d.lease, func(tx pgx.Tx) error {
		q := db.New(tx)
		st, err := q.LockWebhookState(ctx, d.hook.ID)
		if errors.Is(err, pgx.ErrNoRows) {
			return errSinkGone
		}
		if err != nil || st.State != webhook.StateFailing {
			return err
		}
		stillFailing = true
		park.WebhookID, park.TenantID, park.Error = d.hook.ID, d.hook.TenantID, st.Failure
		if _, err := q.ParkDeadLetters(ctx, park); err != nil {
			return fmt.Errorf("park events: %w", err)
		}
		dropped, err := q.TrimDeadLetters(ctx, db.TrimDeadLettersParams{WebhookID: d.hook.ID, MaxRows: int64(d.opts.MaxDeadLetters)})
		if err != nil {
			return fmt.Errorf("trim dead letters: %w", err)
		}
		if dropped > 0 {
			if err := q.CountDroppedDeadLetters(ctx, db.CountDroppedDeadLettersParams{ID: d.hook.ID, Dropped: dropped}); err != nil {
				return fmt.Errorf("count dropped dead letters: %w", err)
			}
		}
		if d.saved.less(next) {
			if _, err := q.AdvanceSinkCursor(ctx, db.AdvanceSinkCursorParams{Sink: d.sink.Name(), TxID: next.tx, OutboxID: next.id}); err != nil {
				return fmt.Errorf("store cursor: %w", err)
			}
		}
		return nil
	})
	if err != nil {
		return false, err
	}
	if !stillFailing {
		d.failing = false
		return false, nil
	}
	moved()
	d.saved, d.savedAt = d.pos, time.Now()
	return full, nil
}

// replayRound delivers a batch of the webhook's events queued by webhooks/replayDeadLetters,
// oldest first (each subject's in order, as round does), and deletes those delivered. queued
// reports that there were some: newer events wait until none are left.
func (d *dispatcher) replayRound(ctx context.Context) (queued, full bool, derr, err error) {
	rows, err := d.q.ReadQueuedDeadLetters(ctx, db.ReadQueuedDeadLettersParams{WebhookID: d.hook.ID, Lim: int32(d.opts.BatchSize)})
	if err != nil {
		return false, false, nil, fmt.Errorf("read queued dead letters: %w", err)
	}
	if len(rows) == 0 {
		return false, false, nil, nil
	}
	events := make([]Event, len(rows))
	for i, r := range rows {
		events[i] = Event{ID: r.OutboxID, TenantID: r.TenantID, Type: r.Type, Subject: r.Subject, Payload: r.Payload, CreatedAt: r.CreatedAt}
	}
	delivered, derr := d.deliver(ctx, events)
	if len(delivered) > 0 {
		err = locks.InTx(ctx, d.pool, d.lease, func(tx pgx.Tx) error {
			return db.New(tx).DeleteDeadLetters(ctx, db.DeleteDeadLettersParams{WebhookID: d.hook.ID, OutboxIds: delivered})
		})
		if err != nil {
			return true, false, derr, fmt.Errorf("delete delivered dead letters: %w", err)
		}
	}
	// Without a failure, the next round goes on at once: with more queued events, or the outbox.
	return true, derr == nil, derr, nil
}
