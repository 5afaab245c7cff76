// Package locks keeps work single-writer across processes with locks in PostgreSQL (the locks
// table). They are the workers' own, not to be confused with the leases tenants take of capacity.
//
// A lock is a row (name, holder, fencing token, expiry). A holder takes a lock when it is free or
// expired, renews it at a third of its TTL, and loses it if it fails to renew in time; the
// fencing token grows every time the lock is taken, so a holder that was paused past its expiry
// (a GC pause, a network partition) cannot write once someone else holds the lock: writes it
// guards with Fence are refused. Releasing expires the lock at once, so the next holder does not
// wait out the TTL.
package locks

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/better-compute/better-compute/gen/db"
)

// ErrStale is returned by Fence when the lock has changed hands or expired.
var ErrStale = errors.New("locks: stale fencing token: the lock was lost")

// Lock is a lock held by this process.
type Lock struct {
	Name      string
	Holder    string
	Token     int64
	ExpiresAt time.Time
}

// Holder is one process's identity in the locks table. Every lock it takes carries its ID.
type Holder struct {
	ID        string
	pool      *pgxpool.Pool
	log       *slog.Logger
	abandoned atomic.Bool
}

// NewHolder returns a holder; id must be unique to the process (for example host, pid and a
// random suffix).
func NewHolder(pool *pgxpool.Pool, id string, log *slog.Logger) *Holder {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Holder{ID: id, pool: pool, log: log}
}

// Abandon makes the holder stop, when its context ends, without releasing its locks: as a
// crashed process would, leaving others to wait for expiry. For tests of failover.
func (h *Holder) Abandon() { h.abandoned.Store(true) }

// Abandoned reports whether Abandon was called.
func (h *Holder) Abandoned() bool { return h.abandoned.Load() }

// roundTrip bounds a lock statement that Acquire and Renew run to its end whatever their ctx.
const roundTrip = 5 * time.Second

// uncancelled is the context Acquire and Renew run their statement in: ctx's values, not its
// cancellation, and at most roundTrip. A statement that a stop cut short could still commit on
// the connection pgx abandons, after the caller's Release has run: the lock would stay taken for
// a TTL by a holder that has stopped. Running it to its end makes a Release after it final.
func uncancelled(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), roundTrip)
}

// Acquire takes those of the named locks that are free or expired, and returns them. It returns
// once the database has answered (at most roundTrip), even when ctx ends first, so that a
// Release after it is never overtaken by it.
func (h *Holder) Acquire(ctx context.Context, ttl time.Duration, names ...string) ([]Lock, error) {
	ctx, cancel := uncancelled(ctx)
	defer cancel()
	rows, err := db.New(h.pool).AcquireLocks(ctx, db.AcquireLocksParams{Holder: h.ID, TtlMs: ttl.Milliseconds(), Names: names})
	if err != nil {
		return nil, fmt.Errorf("acquire locks: %w", err)
	}
	return fromRows(rows), nil
}

// Renew extends those of the named locks the holder still has, and returns them; a name not
// returned was lost. Like Acquire, it returns once the database has answered.
func (h *Holder) Renew(ctx context.Context, ttl time.Duration, names ...string) ([]Lock, error) {
	ctx, cancel := uncancelled(ctx)
	defer cancel()
	rows, err := db.New(h.pool).RenewLocks(ctx, db.RenewLocksParams{Holder: h.ID, TtlMs: ttl.Milliseconds(), Names: names})
	if err != nil {
		return nil, fmt.Errorf("renew locks: %w", err)
	}
	return fromRows(rows), nil
}

// Release expires the named locks the holder has, so others can take them at once. An
// abandoned holder releases nothing.
func (h *Holder) Release(ctx context.Context, names ...string) error {
	if h.Abandoned() || len(names) == 0 {
		return nil
	}
	if err := db.New(h.pool).ReleaseLocks(ctx, db.ReleaseLocksParams{Holder: h.ID, Names: names}); err != nil {
		return fmt.Errorf("release locks: %w", err)
	}
	return nil
}

// Fence checks, inside tx, that l is still held with its token, and keeps it from changing
// hands until tx ends. Writes made in tx after a nil Fence are writes of the current holder.
func Fence(ctx context.Context, tx pgx.Tx, l Lock) error {
	ok, err := db.New(tx).FenceLock(ctx, db.FenceLockParams{Name: l.Name, Holder: l.Holder, FencingToken: l.Token})
	if errors.Is(err, pgx.ErrNoRows) || (err == nil && !ok) {
		return fmt.Errorf("%w (%s, token %d)", ErrStale, l.Name, l.Token)
	}
	if err != nil {
		return fmt.Errorf("fence lock %s: %w", l.Name, err)
	}
	return nil
}

// fromRows converts the locks table's rows.
func fromRows(rows []db.Lock) []Lock {
	out := make([]Lock, len(rows))
	for i, r := range rows {
		out[i] = Lock{Name: r.Name, Holder: r.Holder, Token: r.FencingToken, ExpiresAt: r.ExpiresAt}
	}
	return out
}

// InTx runs fn in a transaction that first fences l: what fn writes commits only while l is
// still its holder's current lock; otherwise InTx returns ErrStale and nothing is written.
func InTx(ctx context.Context, pool *pgxpool.Pool, l Lock, fn func(tx pgx.Tx) error) error {
	return pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		if err := Fence(ctx, tx, l); err != nil {
			return err
		}
		return fn(tx)
	})
}
