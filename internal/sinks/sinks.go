// Package sinks is the sinks role: it delivers the outbox, the events that API transactions write
// in the same transaction as their change, to event sinks: every tenant's webhooks, and a log
// sink that writes every event to the process log.
//
// # Order without gaps
//
// Outbox ids come from an identity column: they are handed out at insert but become visible at
// commit, in another order. A reader that remembered "delivered up to id N" would pass over a row
// with a smaller id whose transaction was still running, and never see it. So every outbox row
// also records the transaction that wrote it (tx_id, an xid8 defaulting to pg_current_xact_id()),
// and sinks read only rows with tx_id below pg_snapshot_xmin(pg_current_snapshot()), the horizon
// below which every transaction has committed or aborted: no row can appear there later. They
// read in (tx_id, id) order, and a sink's cursor is the (tx_id, id) of the last row it has
// delivered, together with everything before it. When a read finds everything below the horizon
// delivered, the cursor moves to the horizon itself, so rows a sink filters out are not read
// again. The price is latency: an event waits until every transaction that started before it
// has ended, so a long-running write transaction anywhere in the cluster delays delivery (never
// loses it).
//
// Within a batch, each subject's events are delivered in id order. Ids are taken at insert, so
// when writers of one subject serialise on a row lock (as API mutations do), id order is their
// commit order. Transaction ids are taken at a transaction's first write and can be in the other
// order; two such rows only become readable together, when the older transaction ends, and so
// land in one batch, unless a batch limit falls exactly between them.
//
// # Delivery
//
// Each sink is dispatched by one process at a time, under the lease
// "singleton:outbox-dispatch:<sink>", and moves its cursor only with a write fenced by that lease,
// so a holder that lost its lease cannot move it. Delivery is at least once: a batch is read
// after the cursor, its subjects are delivered concurrently (each subject's events strictly in
// order, stopping at the first failure), and the cursor moves past the longest prefix of the
// batch that was delivered. Failures are retried with exponential backoff and jitter, never
// skipped. A new dispatcher (after a restart or failover) starts from the stored cursor and may
// deliver some events again, in the same order.
//
// # Failing webhooks
//
// A webhook's retries are bounded (Options.GiveUpAfter, from the first failure of a run of
// failures, recorded in its cursor so restarts do not reset it). When they run out, the webhook
// is marked failing and its undelivered events, and then every new one, are parked in its dead
// letters (at most Options.MaxDeadLetters, the oldest dropped and counted) while its cursor moves
// on, so a broken endpoint never holds the outbox. webhooks/replayDeadLetters queues the parked
// events again and marks the webhook healthy: its dispatcher delivers the queued events, oldest
// first, before any newer one. See deadletter.go.
//
// Sinks poll (every Options.Poll); the API does not NOTIFY, because notifying inside its write
// transactions would serialise their commits.
package sinks

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/better-compute/better-compute/module"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/better-compute/better-compute/gen/db"
	"github.com/better-compute/better-compute/internal/config"
	"github.com/better-compute/better-compute/internal/locks"
	"github.com/better-compute/better-compute/internal/scrub"
	"github.com/better-compute/better-compute/internal/seal"
	"github.com/better-compute/better-compute/internal/webhook"
)

// Event is one outbox event (module.Event: module sinks receive the same).
type Event = module.Event

// Sink receives events (module.Sink).
type Sink = module.Sink

// Source says which events a sink receives (module.Source).
type Source = module.Source

// Options configure the sinks role.
type Options struct {
	// Sealer opens webhooks' signing secrets: NewSealer of the deployment secret. Required.
	Sealer *seal.Sealer
	// AllowPrivate lets deliveries reach loopback, link-local and private addresses (the
	// configuration's webhooks.allowPrivate). Without it they are refused after DNS resolution.
	AllowPrivate bool
	// Log enables the log sink, which writes every event of every tenant to Logger.
	Log bool
	// Sinks are more sinks to dispatch, the enabled modules' (module.Workers.Sinks): each under
	// its own lease, like a webhook, with its own cursor.
	Sinks []Sink
	// Logger receives the log sink's events and the role's own logs.
	Logger *slog.Logger
	// Refresh is how often the supervisor reads the webhooks to start and stop their
	// dispatchers; 2s when zero.
	Refresh time.Duration
	// Poll is how often an idle sink looks for new events; 500ms when zero.
	Poll time.Duration
	// BatchSize is how many events a sink reads at once; 1000 when zero.
	BatchSize int
	// Concurrency is how many subjects a webhook receives at once; 32 when zero.
	Concurrency int
	// Timeout bounds one delivery attempt; 15s when zero.
	Timeout time.Duration
	// MinBackoff and MaxBackoff bound the wait before retrying failed deliveries: it doubles
	// from MinBackoff up to MaxBackoff, with jitter; config.Default's webhooks.retry (500ms and
	// 5m) when zero. Failures to read or store a cursor wait at most a minute.
	MinBackoff, MaxBackoff time.Duration
	// GiveUpAfter bounds a webhook's run of failed deliveries: once it has lasted this long the
	// webhook is marked failing and its events are parked; webhooks.retry.giveUpAfter (1h) when
	// zero.
	GiveUpAfter time.Duration
	// MaxDeadLetters caps each webhook's parked events, dropping (and counting) the oldest;
	// webhooks.retry.maxDeadLetters (10000) when zero.
	MaxDeadLetters int
	// LeaseTTL is the TTL of each sink's lease; lease.DefaultTTL when zero.
	LeaseTTL time.Duration
	// FlushInterval is how often a cursor that moved over filtered-out events only is stored;
	// 5s when zero. Cursors move over delivered events are stored at once.
	FlushInterval time.Duration
}

func (o Options) withDefaults() Options {
	def := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	def(&o.Refresh, 2*time.Second)
	def(&o.Poll, 500*time.Millisecond)
	def(&o.Timeout, 15*time.Second)
	retry := config.Default().Webhooks.Retry
	def(&o.MinBackoff, retry.MinBackoff)
	def(&o.MaxBackoff, retry.MaxBackoff)
	def(&o.GiveUpAfter, retry.GiveUpAfter)
	if o.MaxDeadLetters <= 0 {
		o.MaxDeadLetters = retry.MaxDeadLetters
	}
	def(&o.FlushInterval, 5*time.Second)
	if o.MaxBackoff < o.MinBackoff {
		o.MaxBackoff = o.MinBackoff
	}
	if o.BatchSize <= 0 {
		o.BatchSize = 1000
	}
	if o.Concurrency <= 0 {
		o.Concurrency = 32
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return o
}

// JobName is the singleton job (lease "singleton:<JobName>") that dispatches a sink.
func JobName(sink string) string { return "outbox-dispatch:" + sink }

// LogSinkName is the log sink's name.
const LogSinkName = "log"

// Run is the sinks role: until ctx ends it keeps one dispatcher per sink (the log sink when
// enabled, Options.Sinks, and every webhook of every tenant) running under holder, each under its own lease, so
// every sink is dispatched by exactly one process of those running the role. It reads the webhooks
// every Options.Refresh, starting dispatchers for new ones and stopping those of deleted ones.
func Run(ctx context.Context, holder *locks.Holder, pool *pgxpool.Pool, opts Options) error {
	if opts.Sealer == nil {
		return errors.New("sinks: no sealer for webhook secrets")
	}
	opts = opts.withDefaults()
	log := opts.Logger.With("role", "sinks")
	client := webhook.NewClient(opts.AllowPrivate, opts.Concurrency)
	defer client.CloseIdleConnections()

	type running struct {
		spec   string
		cancel context.CancelFunc
		done   chan struct{}
	}
	runs := map[string]*running{}
	start := func(spec string, sink Sink, concurrency int) {
		rctx, cancel := context.WithCancel(ctx)
		r := &running{spec: spec, cancel: cancel, done: make(chan struct{})}
		runs[sink.Name()] = r
		go func() {
			defer close(r.done)
			holder.RunJob(rctx, locks.Job{Name: JobName(sink.Name()), TTL: opts.LeaseTTL, Run: func(jctx context.Context, l locks.Lock) error {
				return Dispatch(jctx, pool, l, sink, DispatchOptions{
					Poll: opts.Poll, BatchSize: opts.BatchSize, Concurrency: concurrency,
					MinBackoff: opts.MinBackoff, MaxBackoff: opts.MaxBackoff,
					GiveUpAfter: opts.GiveUpAfter, MaxDeadLetters: opts.MaxDeadLetters,
					FlushInterval: opts.FlushInterval, Logger: log,
				})
			}})
		}()
	}
	stop := func(name string) {
		r := runs[name]
		r.cancel()
		<-r.done
		delete(runs, name)
	}
	defer func() {
		for _, r := range runs {
			r.cancel()
		}
		for name := range runs {
			stop(name)
		}
	}()

	bad := map[uuid.UUID]bool{} // webhooks whose secret cannot be opened, logged once
	for {
		want := map[string]bool{}
		if opts.Log {
			want[LogSinkName] = true
			if runs[LogSinkName] == nil {
				start("", NewLogSink(opts.Logger), 1)
			}
		}
		for _, s := range opts.Sinks {
			want[s.Name()] = true
			if runs[s.Name()] == nil {
				start("", s, opts.Concurrency)
			}
		}
		hooks, err := db.New(pool).ListWebhookSinks(ctx)
		if err != nil && ctx.Err() == nil {
			log.Warn("list webhooks", "err", err)
		}
		if err == nil {
			for _, h := range hooks {
				name := webhook.SinkName(h.ID)
				spec := fmt.Sprintf("%s\x00%q\x00%x", h.Url, h.EventTypes, h.SecretSealed)
				want[name] = true
				if r := runs[name]; r != nil && r.spec == spec {
					continue
				} else if r != nil {
					stop(name)
				}
				secret, err := webhook.OpenSecret(opts.Sealer, h.ID, h.SecretSealed)
				if err != nil {
					if !bad[h.ID] {
						log.Error("cannot open a webhook's signing secret; not delivering to it", "webhook_id", h.ID, "err", err)
						bad[h.ID] = true
					}
					continue
				}
				sink, err := NewWebhookSink(Webhook{ID: h.ID, TenantID: h.TenantID, URL: h.Url, EventTypes: h.EventTypes, Secret: secret}, client, opts.Timeout)
				if err != nil {
					log.Error("webhook not delivered to", "webhook_id", h.ID, "err", err)
					continue
				}
				start(spec, sink, opts.Concurrency)
			}
			for name := range runs {
				if !want[name] {
					stop(name)
				}
			}
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(opts.Refresh):
		}
	}
}

// LogSink writes every event of every tenant to a logger, at level Info.
type LogSink struct {
	log *slog.Logger
}

// NewLogSink returns the log sink.
func NewLogSink(log *slog.Logger) *LogSink { return &LogSink{log: log} }

// Name is LogSinkName.
func (s *LogSink) Name() string { return LogSinkName }

// Source is every event.
func (s *LogSink) Source() Source { return Source{} }

// Deliver logs the event.
func (s *LogSink) Deliver(ctx context.Context, e Event) error {
	s.log.LogAttrs(ctx, slog.LevelInfo, "event",
		slog.String("event_id", e.MessageID()), slog.String("type", e.Type), slog.String("subject", e.Subject),
		slog.String("tenant_id", e.TenantID.String()), slog.Time("event_time", e.CreatedAt),
		slog.Any("data", rawJSON(e.Payload)))
	return nil
}

// rawJSON logs as itself in JSON logs and as text in text logs.
type rawJSON []byte

func (r rawJSON) MarshalJSON() ([]byte, error) { return r, nil }
func (r rawJSON) MarshalText() ([]byte, error) { return r, nil }

// DispatchOptions configure one sink's dispatcher; zero values take Options' defaults.
type DispatchOptions struct {
	Poll                   time.Duration
	BatchSize              int
	Concurrency            int
	MinBackoff, MaxBackoff time.Duration
	GiveUpAfter            time.Duration
	MaxDeadLetters         int
	FlushInterval          time.Duration
	Logger                 *slog.Logger
}

// errSinkGone stops a dispatcher whose cursor was deleted with its webhook.
var errSinkGone = errors.New("sinks: the sink's cursor is gone (its webhook was deleted)")

// position is a place in the sinks' read order: everything at or before it is done.
type position struct{ tx, id int64 }

func (p position) less(o position) bool { return p.tx < o.tx || (p.tx == o.tx && p.id < o.id) }

// Dispatch delivers the outbox to sink while l is held, until ctx ends or the sink's webhook is
// deleted (it then returns nil), or the lease turns out lost (lease.ErrStale). It is the Run of
// the sink's singleton job.
func Dispatch(ctx context.Context, pool *pgxpool.Pool, l locks.Lock, sink Sink, opts DispatchOptions) error {
	o := Options{Poll: opts.Poll, BatchSize: opts.BatchSize, Concurrency: opts.Concurrency,
		MinBackoff: opts.MinBackoff, MaxBackoff: opts.MaxBackoff, GiveUpAfter: opts.GiveUpAfter, MaxDeadLetters: opts.MaxDeadLetters,
		FlushInterval: opts.FlushInterval, Logger: opts.Logger}.withDefaults()
	d := &dispatcher{pool: pool, q: db.New(pool), lease: l, sink: sink, opts: o,
		log: o.Logger.With("sink", sink.Name()), done: map[int64]struct{}{}}
	if w, ok := sink.(*WebhookSink); ok {
		d.hook = &w.hook
	}
	if len(sink.Source().Types) > 0 {
		d.types = map[string]bool{}
		for _, t := range sink.Source().Types {
			d.types[t] = true
		}
	}
	return d.run(ctx)
}

type dispatcher struct {
	pool  *pgxpool.Pool
	q     *db.Queries
	lease locks.Lock
	sink  Sink
	types map[string]bool
	opts  Options
	log   *slog.Logger

	pos, saved position
	savedAt    time.Time
	// done holds events after pos that were delivered (or filtered out): a later round skips
	// them, and pos moves over them once everything before them is done too.
	done map[int64]struct{}

	// hook is the webhook of a webhook sink, nil for others: only webhooks give up and park.
	hook *Webhook
	// failing: the webhook's retries ran out and its events are parked (deadletter.go).
	failing bool
	// retrying: a run of failures is recorded in the cursor (retry_since), to clear when it ends.
	retrying bool
}

func (d *dispatcher) run(ctx context.Context) error {
	name := d.sink.Name()
	var webhookID *uuid.UUID // ties a webhook's cursor to it, so deleting it deletes the cursor
	if d.hook != nil {
		webhookID = &d.hook.ID
	}
	if err := d.q.EnsureSinkCursor(ctx, db.EnsureSinkCursorParams{Sink: name, WebhookID: webhookID}); err != nil {
		if pgErr, ok := errors.AsType[*pgconn.PgError](err); ok && pgErr.Code == "23503" { // foreign_key_violation
			d.log.Debug("the webhook was deleted; not dispatching")
			return nil
		}
		return fmt.Errorf("sink %s: create cursor: %w", name, err)
	}
	c, err := d.q.GetSinkCursor(ctx, name)
	if err != nil {
		return fmt.Errorf("sink %s: read cursor: %w", name, err)
	}
	d.pos = position{c.TxID, c.OutboxID}
	d.saved, d.savedAt = d.pos, time.Now()
	if err := d.loadState(ctx); err != nil {
		if errors.Is(err, errSinkGone) {
			return nil
		}
		return fmt.Errorf("sink %s: %w", name, err)
	}
	d.log.Debug("dispatching", "cursor_tx", c.TxID, "cursor_id", c.OutboxID, "failing", d.failing)
	defer func() {
		// Keep what was delivered, so the next holder repeats less. Fenced like any other move.
		if d.pos != d.saved {
			sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
			defer cancel()
			_ = d.save(sctx)
		}
	}()

	failures := 0
	for {
		full, derr, err := d.round(ctx)
		if ctx.Err() != nil {
			return nil
		}
		if errors.Is(err, errSinkGone) {
			d.log.Debug("the webhook was deleted; stopping")
			return nil
		}
		if errors.Is(err, locks.ErrStale) {
			return err
		}
		var wait time.Duration
		switch {
		case err != nil:
			failures++
			wait = backoff(d.opts.MinBackoff, min(d.opts.MaxBackoff, time.Minute), failures)
			d.log.Warn("outbox dispatch failed; retrying", "err", err, "failures", failures, "retry_in", wait.Round(time.Millisecond))
		case derr != nil:
			failures++
			wait = backoff(d.opts.MinBackoff, d.opts.MaxBackoff, failures)
			if de, ok := errors.AsType[*webhook.DeliveryError](derr); ok && de.RetryAfter > wait {
				wait = min(de.RetryAfter, d.opts.MaxBackoff)
			}
			gaveUp, gerr := d.failed(ctx, derr)
			if errors.Is(gerr, errSinkGone) {
				d.log.Debug("the webhook was deleted; stopping")
				return nil
			}
			if errors.Is(gerr, locks.ErrStale) {
				return gerr
			}
			if gerr != nil && ctx.Err() == nil {
				d.log.Warn("record delivery error", "err", gerr)
			}
			if gaveUp {
				failures = 0
				d.log.Warn("the webhook's retries ran out: marked failing, its events are parked until webhooks/replayDeadLetters", "err", derr, "give_up_after", d.opts.GiveUpAfter)
				continue
			}
			d.log.Warn("delivery failed; retrying", "err", derr, "failures", failures, "retry_in", wait.Round(time.Millisecond))
		case full:
			failures = 0
			d.recovered(ctx)
			continue
		default:
			failures = 0
			d.recovered(ctx)
			wait = d.opts.Poll
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(wait):
		}
	}
}

// round reads one batch after the cursor, delivers what is not done yet, and moves the cursor
// over the delivered prefix. full reports a full batch delivered: more may be waiting; derr is
// the first failed delivery, err a failure to read or store the cursor.
func (d *dispatcher) round(ctx context.Context) (full bool, derr, err error) {
	if d.hook != nil {
		if d.failing {
			if full, err := d.parkRound(ctx); err != nil || d.failing {
				return full, nil, err
			}
			// Replayed: delivered to again, the queued events first.
		}
		if queued, full, derr, err := d.replayRound(ctx); queued || err != nil {
			return full, derr, err
		}
	}
	horizon, err := d.q.OutboxHorizon(ctx)
	if err != nil {
		return false, nil, fmt.Errorf("read outbox horizon: %w", err)
	}
	rows, err := d.read(ctx, horizon)
	if err != nil {
		return false, nil, fmt.Errorf("read outbox: %w", err)
	}
	var pending []Event
	for _, e := range rows {
		if _, ok := d.done[e.ID]; ok {
			continue
		}
		if d.types != nil && !d.types[e.Type] {
			d.done[e.ID] = struct{}{}
			continue
		}
		pending = append(pending, e)
	}
	delivered, derr := d.deliver(ctx, pending)
	for _, id := range delivered {
		d.done[id] = struct{}{}
	}
	// Move over the longest delivered prefix.
	complete := true
	for _, e := range rows {
		if _, ok := d.done[e.ID]; !ok {
			complete = false
			break
		}
		delete(d.done, e.ID)
		d.pos = position{e.TxID, e.ID}
	}
	if complete && len(rows) < d.opts.BatchSize {
		// Everything below the horizon is done: nothing more can appear there.
		if h := (position{horizon, 0}); d.pos.less(h) {
			d.pos = h
		}
	}
	if d.pos != d.saved && (len(delivered) > 0 || time.Since(d.savedAt) >= d.opts.FlushInterval) {
		if err := d.save(ctx); err != nil {
			return false, derr, err
		}
	}
	return derr == nil && complete && len(rows) == d.opts.BatchSize, derr, nil
}

func (d *dispatcher) read(ctx context.Context, horizon int64) ([]Event, error) {
	src := d.sink.Source()
	var out []Event
	if src.Tenant != nil {
		rows, err := d.q.ReadTenantOutbox(ctx, db.ReadTenantOutboxParams{
			TenantID: *src.Tenant, AfterTx: d.pos.tx, AfterID: d.pos.id, BeforeTx: horizon,
			Types: src.Types, Lim: int32(d.opts.BatchSize),
		})
		for _, r := range rows {
			out = append(out, Event{ID: r.ID, TxID: r.TxID, TenantID: r.TenantID, Type: r.Type, Subject: r.Subject, Payload: r.Payload, CreatedAt: r.CreatedAt})
		}
		return out, err
	}
	rows, err := d.q.ReadOutbox(ctx, db.ReadOutboxParams{AfterTx: d.pos.tx, AfterID: d.pos.id, BeforeTx: horizon, Lim: int32(d.opts.BatchSize)})
	for _, r := range rows {
		out = append(out, Event{ID: r.ID, TxID: r.TxID, TenantID: r.TenantID, Type: r.Type, Subject: r.Subject, Payload: r.Payload, CreatedAt: r.CreatedAt})
	}
	return out, err
}

// deliver delivers events, subjects concurrently and each subject's events in id order, stopping
// a subject at its first failure and starting no more subjects after any failure. It returns the
// ids delivered and the first failure.
func (d *dispatcher) deliver(ctx context.Context, events []Event) ([]int64, error) {
	if len(events) == 0 {
		return nil, nil
	}
	type key struct {
		tenant  uuid.UUID
		subject string
	}
	index := map[key]int{}
	var chains [][]Event
	for _, e := range events {
		k := key{e.TenantID, e.Subject}
		i, ok := index[k]
		if !ok {
			i = len(chains)
			index[k] = i
			chains = append(chains, nil)
		}
		chains[i] = append(chains[i], e)
	}
	for _, c := range chains {
		slices.SortFunc(c, func(a, b Event) int { return cmp.Compare(a.ID, b.ID) })
	}
	workers := min(d.opts.Concurrency, len(chains))
	var (
		mu        sync.Mutex
		firstErr  error
		delivered []int64
		wg        sync.WaitGroup
	)
	work := make(chan []Event)
	failed := func() bool {
		mu.Lock()
		defer mu.Unlock()
		return firstErr != nil
	}
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var mine []int64
			for chain := range work {
				for _, e := range chain {
					if err := deliver(ctx, d.sink, e); err != nil {
						mu.Lock()
						if firstErr == nil {
							firstErr = fmt.Errorf("event %s: %w", e.MessageID(), err)
						}
						mu.Unlock()
						break
					}
					mine = append(mine, e.ID)
				}
			}
			mu.Lock()
			delivered = append(delivered, mine...)
			mu.Unlock()
		}()
	}
	for _, c := range chains {
		if ctx.Err() != nil || failed() {
			break
		}
		work <- c
	}
	close(work)
	wg.Wait()
	return delivered, firstErr
}

// save stores the cursor, fenced by the lease.
func (d *dispatcher) save(ctx context.Context) error {
	tx, err := d.pool.Begin(ctx)
	if err != nil {
		return fmt.Errorf("store cursor: %w", err)
	}
	defer tx.Rollback(context.WithoutCancel(ctx)) //nolint:errcheck // a no-op after Commit
	if err := locks.Fence(ctx, tx, d.lease); err != nil {
		return err
	}
	n, err := db.New(tx).AdvanceSinkCursor(ctx, db.AdvanceSinkCursorParams{Sink: d.sink.Name(), TxID: d.pos.tx, OutboxID: d.pos.id})
	if err != nil {
		return fmt.Errorf("store cursor: %w", err)
	}
	if n == 0 {
		return errSinkGone
	}
	if err := tx.Commit(ctx); err != nil {
		return fmt.Errorf("store cursor: %w", err)
	}
	d.saved, d.savedAt = d.pos, time.Now()
	return nil
}

// truncate bounds s to n bytes, at a rune boundary, marking a cut with an ellipsis.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return scrub.Truncate(s, n) + "…"
}

// deliver hands one event to a sink, turning a panic in the sink (a module's, say) into a failed
// delivery that is retried, so one bad sink cannot stop the process.
func deliver(ctx context.Context, s Sink, e Event) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("sink %s panicked: %v", s.Name(), p)
		}
	}()
	return s.Deliver(ctx, e)
}
