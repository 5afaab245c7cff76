// Package reconcile runs reconcilers: functions that bring one object of a kind to its desired
// state, driven by a per-kind queue of due keys in PostgreSQL.
//
// Callers enqueue keys in their own transaction (Enqueue) and, after commit, may wake the
// workers (Waker); a worker of the reconciler's role claims due keys of the shards it holds with
// FOR UPDATE SKIP LOCKED and hides them for a visibility timeout while it works, so no key is
// reconciled by two workers at once; a worker that stops hands back what it claimed and did not
// finish, so only a crash leaves keys hidden for the window. Success removes the key unless it
// was enqueued again meanwhile; failure retries it with exponential backoff and jitter,
// recording the error and the attempt count. LISTEN/NOTIFY only shortens the wait: a worker
// also polls, and an optional periodic resync enqueues every key, so a lost notification or a
// missed enqueue only delays work.
package reconcile

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"slices"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/better-compute/better-compute/gen/db"
	"github.com/better-compute/better-compute/internal/locks"
	"github.com/better-compute/better-compute/internal/scrub"
	"github.com/better-compute/better-compute/internal/shard"
)

// Reconciler brings one object of a kind to its desired state. Reconcile must be idempotent: a
// key may be reconciled again after a crash, a retry or a new enqueue.
type Reconciler interface {
	// Kind names the reconciler's queue, for example "node.lifecycle".
	Kind() string
	// Reconcile acts on one key; a returned error retries the key later.
	Reconcile(ctx context.Context, key string) error
}

// Roles a reconciler can run under.
const (
	RoleControllers = "controllers"
	RoleScheduler   = "scheduler"
)

// Registration is a reconciler and how to run it.
type Registration struct {
	Reconciler Reconciler
	// Role is RoleControllers (the default) or RoleScheduler.
	Role string
	// Concurrency is how many keys one worker reconciles at once; 8 by default.
	Concurrency int
	// Timeout bounds one Reconcile call; 30s by default. A claimed key stays hidden from other
	// workers for twice as long.
	Timeout time.Duration
	// Resync, when set, lists every key of the kind; a singleton job enqueues them all every
	// ResyncEvery (5 minutes by default), so drift is corrected even without an enqueue.
	Resync      func(ctx context.Context) ([]string, error)
	ResyncEvery time.Duration
}

func (r *Registration) defaults() {
	if r.Role == "" {
		r.Role = RoleControllers
	}
	if r.Concurrency <= 0 {
		r.Concurrency = 8
	}
	if r.Timeout <= 0 {
		r.Timeout = 30 * time.Second
	}
	if r.ResyncEvery <= 0 {
		r.ResyncEvery = 5 * time.Minute
	}
}

// Enqueue makes keys of kind due now. Run it with q bound to the transaction of the change, so
// the key is queued exactly when the change commits; then Wake the kind.
func Enqueue(ctx context.Context, q *db.Queries, kind string, keys ...string) error {
	if len(keys) == 0 {
		return nil
	}
	if err := q.EnqueueReconcile(ctx, db.EnqueueReconcileParams{Kind: kind, Keys: keys}); err != nil {
		return fmt.Errorf("enqueue %s: %w", kind, err)
	}
	return nil
}

// Runtime runs the registered reconcilers of the roles whose shard memberships it is given.
type Runtime struct {
	pool   *pgxpool.Pool
	holder *locks.Holder
	log    *slog.Logger
	regs   []Registration

	mu   sync.Mutex
	wake map[string]chan struct{}
}

// NewRuntime returns a runtime for holder.
func NewRuntime(pool *pgxpool.Pool, holder *locks.Holder, log *slog.Logger) *Runtime {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Runtime{pool: pool, holder: holder, log: log, wake: map[string]chan struct{}{}}
}

// Register adds a reconciler. Call it before Run.
func (rt *Runtime) Register(reg Registration) {
	reg.defaults()
	rt.regs = append(rt.regs, reg)
	rt.wake[reg.Reconciler.Kind()] = make(chan struct{}, 1)
}

// Registrations lists what is registered.
func (rt *Runtime) Registrations() []Registration { return rt.regs }

// Run reconciles, until ctx ends, the kinds whose role has a membership in members (role →
// member). Kinds of other roles are left to other processes.
func (rt *Runtime) Run(ctx context.Context, members map[string]*shard.Member) {
	var wg sync.WaitGroup
	wg.Go(func() { rt.listen(ctx) })
	for _, reg := range rt.regs {
		m, ok := members[reg.Role]
		if !ok {
			continue
		}
		wg.Go(func() { rt.work(ctx, reg, m) })
		if reg.Resync != nil {
			wg.Go(func() { rt.holder.RunJob(ctx, rt.resyncJob(reg)) })
		}
	}
	wg.Wait()
}

// Subscribe makes ch receive (without blocking) whenever kind is poked or notified: how a job
// that is not a reconciler, such as the liveness job, is woken. Call it before Run.
func (rt *Runtime) Subscribe(kind string, ch chan struct{}) {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	rt.wake[kind] = ch
}

// Poke wakes the local workers of kind, as a notification would.
func (rt *Runtime) Poke(kind string) {
	rt.mu.Lock()
	ch := rt.wake[kind]
	rt.mu.Unlock()
	if ch != nil {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
}

const (
	// pollInterval bounds how long a due key waits when its notification was lost.
	pollInterval = time.Second
	// claimTimeout bounds a claim, and recordTimeout the writing of outcomes, both of which run
	// to the end when the worker is stopped.
	claimTimeout  = 10 * time.Second
	recordTimeout = 10 * time.Second
)

func (rt *Runtime) work(ctx context.Context, reg Registration, m *shard.Member) {
	kind := reg.Reconciler.Kind()
	log := rt.log.With("kind", kind)
	visibility := 2 * reg.Timeout
	batch := int32(16 * reg.Concurrency)
	q := db.New(rt.pool)
	for ctx.Err() == nil {
		changed := m.Changed()
		shards := m.Owned()
		var claimed []db.ClaimReconcileRow
		if len(shards) > 0 {
			s32 := make([]int32, len(shards))
			for i, s := range shards {
				s32[i] = int32(s)
			}
			// The claim is not cut off by a stop: a claim committed but never read would hide its
			// keys for a whole visibility window. What it returns after a stop is handed back.
			cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), claimTimeout)
			var err error
			claimed, err = q.ClaimReconcile(cctx, db.ClaimReconcileParams{
				Kind: kind, Shards: s32, Lim: batch, VisibilityMs: visibility.Milliseconds(),
			})
			cancel()
			if err != nil {
				log.Warn("claim due keys", "err", err)
			}
			if ctx.Err() != nil {
				rt.release(ctx, kind, claimed, log)
				return
			}
		}
		if len(claimed) == 0 {
			select {
			case <-ctx.Done():
			case <-rt.wake[kind]:
			case <-changed:
			case <-time.After(pollInterval):
			}
			continue
		}
		rt.reconcileBatch(ctx, reg, claimed, time.Now().Add(visibility), log)
	}
}

// reconcileBatch reconciles claimed keys with reg.Concurrency goroutines, then records the
// outcomes: successes in one statement, failures each with its backoff. A key is only worked on
// inside its visibility window (which ends at hiddenUntil), so another worker that claims it
// after the window cannot overlap.
func (rt *Runtime) reconcileBatch(ctx context.Context, reg Registration, claimed []db.ClaimReconcileRow, hiddenUntil time.Time, log *slog.Logger) {
	kind := reg.Reconciler.Kind()
	margin := reg.Timeout / 4
	type failure struct {
		row db.ClaimReconcileRow
		err error
	}
	var (
		mu       sync.Mutex
		doneKeys []string
		doneGens []int64
		failed   []failure
		next     = make(chan db.ClaimReconcileRow)
		wg       sync.WaitGroup
	)
	for range min(reg.Concurrency, len(claimed)) {
		wg.Go(func() {
			for row := range next {
				deadline := time.Now().Add(reg.Timeout)
				if end := hiddenUntil.Add(-margin); end.Before(deadline) {
					deadline = end
				}
				if time.Until(deadline) <= 0 {
					continue // out of its window: it becomes visible again and is claimed anew
				}
				rctx, cancel := context.WithDeadline(ctx, deadline)
				err := safeReconcile(rctx, reg.Reconciler, row.Key)
				cancel()
				mu.Lock()
				if err == nil {
					doneKeys, doneGens = append(doneKeys, row.Key), append(doneGens, row.Generation)
				} else {
					failed = append(failed, failure{row, err})
				}
				mu.Unlock()
			}
		})
	}
	sent := 0
dispatch:
	for _, row := range claimed {
		select {
		case next <- row:
			sent++
		case <-ctx.Done():
			break dispatch
		}
	}
	close(next)
	wg.Wait()
	undone := slices.Clone(claimed[sent:])

	// A failure while the worker stops is the stop's, not the key's: the key is handed back
	// with its attempts unchanged, with the keys never started, instead of backing off.
	if ctx.Err() != nil {
		for _, f := range failed {
			undone = append(undone, f.row)
		}
		failed = nil
	}
	rt.release(ctx, kind, undone, log)

	// Record outcomes even while stopping: the work is done.
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), recordTimeout)
	defer cancel()
	q := db.New(rt.pool)
	if len(doneKeys) > 0 {
		if err := q.CompleteReconcile(rctx, db.CompleteReconcileParams{Kind: kind, Keys: doneKeys, Generations: doneGens}); err != nil {
			log.Warn("record reconciled keys", "err", err)
		}
	}
	for _, f := range failed {
		delay := Backoff(int(f.row.Attempts) + 1)
		log.Info("reconcile failed; will retry", "key", f.row.Key, "attempt", f.row.Attempts+1, "retry_in", delay, "err", f.err)
		msg := scrub.Truncate(f.err.Error(), 2000)
		if err := q.RetryReconcile(rctx, db.RetryReconcileParams{
			Kind: kind, Key: f.row.Key, LastError: &msg, DelayMs: delay.Milliseconds(),
		}); err != nil {
			log.Warn("record reconcile failure", "key", f.row.Key, "err", err)
		}
	}
}

// release makes claimed keys that a stopping worker did not finish due again at once, so a
// restart delays them by no more than the next claim.
func (rt *Runtime) release(ctx context.Context, kind string, rows []db.ClaimReconcileRow, log *slog.Logger) {
	if len(rows) == 0 {
		return
	}
	keys := make([]string, len(rows))
	hidden := make([]time.Time, len(rows))
	for i, r := range rows {
		keys[i], hidden[i] = r.Key, r.HiddenUntil
	}
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), recordTimeout)
	defer cancel()
	if err := db.New(rt.pool).ReleaseReconcile(rctx, db.ReleaseReconcileParams{Kind: kind, Keys: keys, HiddenUntil: hidden}); err != nil {
		log.Warn("hand back unfinished keys", "keys", len(keys), "err", err)
	}
}

// safeReconcile turns a panic in a reconciler into an error for its key, so one bad object
// cannot stop the worker.
func safeReconcile(ctx context.Context, r Reconciler, key string) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("reconcile panicked: %v", p)
		}
	}()
	return r.Reconcile(ctx, key)
}

// Backoff is the delay before attempt n (1-based) of a failing key: 1s doubling to at most 5
// minutes, with ±20% jitter so failing keys spread out.
func Backoff(attempt int) time.Duration {
	d := time.Second << min(attempt-1, 9)
	d = min(d, 5*time.Minute)
	return d - d/5 + time.Duration(rand.Int64N(int64(2*d/5)+1))
}

func (rt *Runtime) resyncJob(reg Registration) locks.Job {
	kind := reg.Reconciler.Kind()
	return locks.Job{Name: "resync:" + kind, Run: func(ctx context.Context, _ locks.Lock) error {
		for {
			keys, err := reg.Resync(ctx)
			if err != nil {
				return fmt.Errorf("resync %s: %w", kind, err)
			}
			q := db.New(rt.pool)
			for start := 0; start < len(keys); start += 1000 {
				if err := Enqueue(ctx, q, kind, keys[start:min(start+1000, len(keys))]...); err != nil {
					return err
				}
			}
			rt.Poke(kind)
			select {
			case <-ctx.Done():
				return nil
			case <-time.After(reg.ResyncEvery):
			}
		}
	}}
}
