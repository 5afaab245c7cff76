package nodecontrol

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/better-compute/better-compute/gen/db"
	"github.com/better-compute/better-compute/internal/fleet"
	"github.com/better-compute/better-compute/internal/jobrun"
	"github.com/better-compute/better-compute/internal/locks"
)

// LivenessJobName is the liveness job's name: it runs under the lease "singleton:node-liveness"
// and records its runs in job_runs under this name.
const LivenessJobName = "node-liveness"

// Defaults of LivenessOptions.
const (
	DefaultLivenessInterval  = 5 * time.Second
	DefaultLivenessThreshold = 30 * time.Second
	DefaultLivenessBatch     = 1000
)

// LivenessHook acts, in the liveness job's transaction, on nodes that just went offline or came
// back online: for example marking their leases at risk and back. An error rolls the round back;
// it is retried at the next interval.
type LivenessHook func(ctx context.Context, tx pgx.Tx, nodeIDs []uuid.UUID) error

// LivenessOptions configure the liveness job; zero values take the defaults.
type LivenessOptions struct {
	// Interval between rounds (DefaultLivenessInterval). A round that fills a batch is followed
	// by another at once.
	Interval time.Duration
	// Threshold is how long a node may go unheard before it is offline (DefaultLivenessThreshold).
	// Gateways write heartbeats every half heartbeat interval (10s by default), so it must
	// exceed the daemon heartbeat interval by a good margin.
	Threshold time.Duration
	// Batch bounds the nodes each statement changes (DefaultLivenessBatch).
	Batch int32
	// OnOffline and OnOnline, when set, run in the transaction that marks the nodes.
	OnOffline, OnOnline LivenessHook
	// Wake, when set, is called after commit with fleet.KindLifecycle when nodes were enqueued (for
	// example a reconcile.Waker's Wake or a reconcile.Runtime's Poke).
	Wake func(kind string)
	// Woken, when set, starts a round when it receives (fleet.KindLiveness: a node said hello),
	// so a node is online as its session starts.
	Woken  <-chan struct{}
	Logger *slog.Logger
}

func (o LivenessOptions) withDefaults() LivenessOptions {
	if o.Interval <= 0 {
		o.Interval = DefaultLivenessInterval
	}
	if o.Threshold <= 0 {
		o.Threshold = DefaultLivenessThreshold
	}
	if o.Batch <= 0 {
		o.Batch = DefaultLivenessBatch
	}
	return o
}

// Liveness is what one round changed.
type Liveness struct {
	Offline, Online []uuid.UUID
}

// LivenessJob returns the node-liveness job, for the controllers role: every interval it marks
// offline the online nodes not heard from within the threshold and online the offline ones
// heard from again, each in one statement per batch that also writes their node.offline and
// node.online events, calls the hooks and enqueues the nodes' lifecycle, all in one transaction
// fenced by the job's lease.
func LivenessJob(pool *pgxpool.Pool, opts LivenessOptions) locks.Job {
	opts = opts.withDefaults()
	return locks.Job{
		Name: LivenessJobName,
		Run: func(ctx context.Context, l locks.Lock) error {
			return jobrun.EveryOrWoken(ctx, pool, LivenessJobName, opts.Interval, opts.Woken, opts.Logger, func(ctx context.Context) error {
				for {
					n, err := CheckLiveness(ctx, pool, l, opts)
					if err != nil || (len(n.Offline) < int(opts.Batch) && len(n.Online) < int(opts.Batch)) {
						return err
					}
				}
			})
		},
	}
}

// CheckLiveness runs one round of the liveness job under the lease l: it returns
// lease.ErrStale, and changes nothing, when l is no longer the current holder's lease.
func CheckLiveness(ctx context.Context, pool *pgxpool.Pool, l locks.Lock, opts LivenessOptions) (Liveness, error) {
	opts = opts.withDefaults()
	var out Liveness
	err := locks.InTx(ctx, pool, l, func(tx pgx.Tx) error {
		q := db.New(tx)
		var err error
		threshold := opts.Threshold.Milliseconds()
		if out.Offline, err = q.MarkNodesOffline(ctx, db.MarkNodesOfflineParams{ThresholdMs: threshold, Lim: opts.Batch}); err != nil {
			return fmt.Errorf("mark nodes offline: %w", err)
		}
		if out.Online, err = q.MarkNodesOnline(ctx, db.MarkNodesOnlineParams{ThresholdMs: threshold, Lim: opts.Batch}); err != nil {
			return fmt.Errorf("mark nodes online: %w", err)
		}
		if len(out.Offline) > 0 && opts.OnOffline != nil {
			if err := opts.OnOffline(ctx, tx, out.Offline); err != nil {
				return fmt.Errorf("on nodes offline: %w", err)
			}
		}
		if len(out.Online) > 0 && opts.OnOnline != nil {
			if err := opts.OnOnline(ctx, tx, out.Online); err != nil {
				return fmt.Errorf("on nodes online: %w", err)
			}
		}
		return fleet.Enqueue(ctx, q, fleet.KindLifecycle, append(append([]uuid.UUID(nil), out.Offline...), out.Online...)...)
	})
	if err != nil {
		return Liveness{}, err
	}
	if n := len(out.Offline) + len(out.Online); n > 0 {
		if opts.Logger != nil {
			opts.Logger.Info("node liveness changed", "offline", len(out.Offline), "online", len(out.Online))
		}
		if opts.Wake != nil {
			opts.Wake(fleet.KindLifecycle)
		}
	}
	return out, nil
}
