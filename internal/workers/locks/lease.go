// Package lease keeps work single-writer across processes with leases in PostgreSQL.
//
// A lease is a row (name, holder, fencing token, expiry). A holder takes a lease when it is free
// or expired, renews it at a third of its TTL, and loses it if it fails to renew in time; the
// fencing token grows every time the lease is taken, so a holder that was paused past its expiry
// (a GC pause, a network partition) cannot write once someone else holds the lease: writes it
// guards with Fence are refused. Releasing expires the lease at once, so the next holder does
// not wait out the TTL.
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

// ErrStale is returned by Fence when the lease has changed hands or expired.
var ErrStale = errors.New("lease: stale fencing token: the lease was lost")

// Lease is a lease held by this process.
type Lease struct {
	Name      string
	Holder    string
	Token     int64
	ExpiresAt time.Time
}

// Holder is one process's identity in the lease table. Every lease it takes carries its ID.
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

// Abandon makes the holder stop, when its context ends, without releasing its leases: as a
// crashed process would, leaving others to wait for expiry. For tests of failover.
func (h *Holder) Abandon() { h.abandoned.Store(true) }

// Abandoned reports whether Abandon was called.
func (h *Holder) Abandoned() bool { return h.abandoned.Load() }

// Acquire takes those of the named leases that are free or expired, and returns them.
func (h *Holder) Acquire(ctx context.Context, ttl time.Duration, names ...string) ([]Lease, error) {
	rows, err := db.New(h.pool).AcquireLeases(ctx, db.AcquireLeasesParams{Holder: h.ID, TtlMs: ttl.Milliseconds(), Names: names})
	if err != nil {
		return nil, fmt.Errorf("acquire leases: %w", err)
	}
	return leases(rows), nil
}

// Renew extends those of the named leases the holder still has, and returns them; a name not
// returned was lost.
func (h *Holder) Renew(ctx context.Context, ttl time.Duration, names ...string) ([]Lease, error) {
	rows, err := db.New(h.pool).RenewLeases(ctx, db.RenewLeasesParams{Holder: h.ID, TtlMs: ttl.Milliseconds(), Names: names})
	if err != nil {
		return nil, fmt.Errorf("renew leases: %w", err)
	}
	return leases(rows), nil
}

// Release expires the named leases the holder has, so others can take them at once. An
// abandoned holder releases nothing.
func (h *Holder) Release(ctx context.Context, names ...string) error {
	if h.Abandoned() || len(names) == 0 {
		return nil
	}
	if err := db.New(h.pool).ReleaseLeases(ctx, db.ReleaseLeasesParams{Holder: h.ID, Names: names}); err != nil {
		return fmt.Errorf("release leases: %w", err)
	}
	return nil
}

// Fence checks, inside tx, that l is still held with its token, and keeps it from changing
// hands until tx ends. Writes made in tx after a nil Fence are writes of the current holder.
func Fence(ctx context.Context, tx pgx.Tx, l Lease) error {
	ok, err := db.New(tx).FenceLease(ctx, db.FenceLeaseParams{Name: l.Name, Holder: l.Holder, FencingToken: l.Token})
	if errors.Is(err, pgx.ErrNoRows) || (err == nil && !ok) {
		return fmt.Errorf("%w (%s, token %d)", ErrStale, l.Name, l.Token)
	}
	if err != nil {
		return fmt.Errorf("fence lease %s: %w", l.Name, err)
	}
	return nil
}

func leases(rows []db.Lease) []Lease {
	out := make([]Lease, len(rows))
	for i, r := range rows {
		out[i] = Lease{Name: r.Name, Holder: r.Holder, Token: r.FencingToken, ExpiresAt: r.ExpiresAt}
	}
	return out
}

// InTx runs fn in a transaction that first fences l: what fn writes commits only while l is
// still its holder's current lease; otherwise InTx returns ErrStale and nothing is written.
func InTx(ctx context.Context, pool *pgxpool.Pool, l Lease, fn func(tx pgx.Tx) error) error {
	return pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		if err := Fence(ctx, tx, l); err != nil {
			return err
		}
		return fn(tx)
	})
}
