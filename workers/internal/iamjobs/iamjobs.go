// Package iamjobs holds the embedded IAM's background jobs, run by the iam role, each a
// singleton job "iam:<job>" under the lease "singleton:iam:<job>":
//
//   - iam:expire-keys deletes API keys that expired more than a grace period ago. Expired keys
//     are already refused at authentication; deleting them keeps the table small and leaves an
//     audit row, per tenant and batch, saying which keys went.
//   - iam:prune-idempotency deletes stored responses of idempotent calls once they are older
//     than their retention (24 hours), after which a retry with the same Idempotency-Key acts
//     again. The embedded IAM has no login sessions (callers use API keys only), so these
//     records are its only per-client state and there is nothing else to prune.
//
// Both delete in bounded batches, each statement at most Batch rows in its own transaction
// fenced by the job's lease, repeated until a statement deletes less than a batch.
package iamjobs

import (
	"context"
	"log/slog"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/better-compute/better-compute/gen/db"
	"github.com/better-compute/better-compute/internal/jobrun"
	"github.com/better-compute/better-compute/internal/locks"
)

// The jobs' names; each runs under the lease "singleton:" + name.
const (
	ExpireKeysName       = "iam:expire-keys"
	PruneIdempotencyName = "iam:prune-idempotency"
)

// Defaults of Options.
const (
	DefaultInterval          = 5 * time.Minute
	DefaultBatch             = 1000
	DefaultKeyGrace          = 24 * time.Hour
	DefaultIdempotencyMaxAge = 24 * time.Hour
)

// Options configure the jobs; zero values take the defaults.
type Options struct {
	// Interval between runs of each job (DefaultInterval).
	Interval time.Duration
	// Batch bounds the rows each statement deletes (DefaultBatch).
	Batch int32
	// KeyGrace is how long an expired API key is kept before it is deleted (DefaultKeyGrace).
	KeyGrace time.Duration
	// IdempotencyMaxAge is how long a stored idempotent response is kept
	// (DefaultIdempotencyMaxAge).
	IdempotencyMaxAge time.Duration
	// Logger receives failed runs.
	Logger *slog.Logger
}

func (o Options) withDefaults() Options {
	if o.Interval <= 0 {
		o.Interval = DefaultInterval
	}
	if o.Batch <= 0 {
		o.Batch = DefaultBatch
	}
	if o.KeyGrace <= 0 {
		o.KeyGrace = DefaultKeyGrace
	}
	if o.IdempotencyMaxAge <= 0 {
		o.IdempotencyMaxAge = DefaultIdempotencyMaxAge
	}
	return o
}

// Jobs returns every IAM job, for the iam role.
func Jobs(pool *pgxpool.Pool, opts Options) []locks.Job {
	return []locks.Job{ExpireKeys(pool, opts), PruneIdempotency(pool, opts)}
}

// ExpireKeys returns the job iam:expire-keys.
func ExpireKeys(pool *pgxpool.Pool, opts Options) locks.Job {
	return periodic(pool, ExpireKeysName, opts, func(ctx context.Context, l locks.Lock, opts Options) (int64, error) {
		return ExpireKeysOnce(ctx, pool, l, opts)
	})
}

// PruneIdempotency returns the job iam:prune-idempotency.
func PruneIdempotency(pool *pgxpool.Pool, opts Options) locks.Job {
	return periodic(pool, PruneIdempotencyName, opts, func(ctx context.Context, l locks.Lock, opts Options) (int64, error) {
		return PruneIdempotencyOnce(ctx, pool, l, opts)
	})
}

// ExpireKeysOnce deletes, under the lease l, every API key that expired more than
// opts.KeyGrace ago, with an audit row per tenant and batch (method "job/iam:expire-keys",
// request id "job-<uuid>"), and returns how many it deleted. It stops with lease.ErrStale once
// l is no longer the current holder's lease.
func ExpireKeysOnce(ctx context.Context, pool *pgxpool.Pool, l locks.Lock, opts Options) (int64, error) {
	opts = opts.withDefaults()
	return batches(ctx, pool, l, opts.Batch, func(q *db.Queries) (int64, error) {
		return q.ExpireAPIKeys(ctx, db.ExpireAPIKeysParams{
			GraceMs: opts.KeyGrace.Milliseconds(), Lim: opts.Batch, RequestID: "job-" + uuid.NewString(),
		})
	})
}

// PruneIdempotencyOnce deletes, under the lease l, every stored idempotent response older than
// opts.IdempotencyMaxAge, and returns how many it deleted.
func PruneIdempotencyOnce(ctx context.Context, pool *pgxpool.Pool, l locks.Lock, opts Options) (int64, error) {
	opts = opts.withDefaults()
	return batches(ctx, pool, l, opts.Batch, func(q *db.Queries) (int64, error) {
		return q.PruneIdempotencyKeys(ctx, db.PruneIdempotencyKeysParams{KeepMs: opts.IdempotencyMaxAge.Milliseconds(), Lim: opts.Batch})
	})
}

func periodic(pool *pgxpool.Pool, name string, opts Options, once func(context.Context, locks.Lock, Options) (int64, error)) locks.Job {
	opts = opts.withDefaults()
	return locks.Job{
		Name: name,
		Run: func(ctx context.Context, l locks.Lock) error {
			return jobrun.Every(ctx, pool, name, opts.Interval, opts.Logger, func(ctx context.Context) error {
				_, err := once(ctx, l, opts)
				return err
			})
		},
	}
}

// batches runs del, each time in its own transaction fenced by l, until it deletes less than
// batch rows, and returns the total.
func batches(ctx context.Context, pool *pgxpool.Pool, l locks.Lock, batch int32, del func(*db.Queries) (int64, error)) (int64, error) {
	var total int64
	for {
		var n int64
		err := locks.InTx(ctx, pool, l, func(tx pgx.Tx) error {
			var err error
			n, err = del(db.New(tx))
			return err
		})
		if err != nil {
			return total, err
		}
		total += n
		if n < int64(batch) {
			return total, nil
		}
	}
}
