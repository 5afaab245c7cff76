package reconcile

import (
	"context"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/better-compute/better-compute/gen/db"
)

// listen wakes local workers when any process notifies a kind, reconnecting after failures.
// Notifications only shorten waits; workers poll regardless.
func (rt *Runtime) listen(ctx context.Context) {
	for ctx.Err() == nil {
		err := rt.listenOnce(ctx)
		if ctx.Err() != nil {
			return
		}
		rt.log.Warn("listen for reconcile notifications", "err", err)
		select {
		case <-ctx.Done():
		case <-time.After(time.Second):
		}
	}
}

func (rt *Runtime) listenOnce(ctx context.Context) error {
	pc, err := rt.pool.Acquire(ctx)
	if err != nil {
		return err
	}
	// A listening connection must not go back to the pool.
	conn := pc.Hijack()
	defer conn.Close(context.WithoutCancel(ctx))
	if err := db.New(conn).ListenReconcile(ctx); err != nil {
		return err
	}
	for {
		n, err := conn.WaitForNotification(ctx)
		if err != nil {
			return err
		}
		rt.Poke(n.Payload)
	}
}

// Waker tells the reconcile workers of every process that kinds have new due keys. Wake after
// the enqueueing transaction commits: wake-ups are coalesced per kind and sent as one NOTIFY
// each, outside any write transaction, because notifying inside hot write transactions
// serialises their commits.
type Waker struct {
	pool  *pgxpool.Pool
	log   *slog.Logger
	local *Runtime
	every time.Duration

	mu      sync.Mutex
	pending map[string]bool
	kick    chan struct{}
}

// NewWaker returns a waker; local, if not nil, is poked at once without a round trip.
func NewWaker(pool *pgxpool.Pool, local *Runtime, log *slog.Logger) *Waker {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Waker{pool: pool, log: log, local: local, every: 20 * time.Millisecond, pending: map[string]bool{}, kick: make(chan struct{}, 1)}
}

// Wake schedules a notification for kind. It never blocks.
func (w *Waker) Wake(kind string) {
	if w.local != nil {
		w.local.Poke(kind)
	}
	w.mu.Lock()
	w.pending[kind] = true
	w.mu.Unlock()
	select {
	case w.kick <- struct{}{}:
	default:
	}
}

// Run sends the scheduled notifications until ctx ends, at most one per kind per interval.
func (w *Waker) Run(ctx context.Context) {
	q := db.New(w.pool)
	for {
		select {
		case <-ctx.Done():
			return
		case <-w.kick:
		}
		w.mu.Lock()
		kinds := slices.Sorted(maps.Keys(w.pending))
		clear(w.pending)
		w.mu.Unlock()
		for _, k := range kinds {
			if err := q.NotifyReconcile(ctx, k); err != nil && ctx.Err() == nil {
				w.log.Warn("notify reconcile workers", "kind", k, "err", err)
			}
		}
		select { // debounce: let more wake-ups gather
		case <-ctx.Done():
			return
		case <-time.After(w.every):
		}
	}
}
