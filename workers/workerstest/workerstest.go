// Package workerstest runs pieces of the worker roles in tests outside the workers tree: exactly
// the reconcilers and jobs a test names, with the intervals it chooses, on the same engine the
// roles run on. Production code builds the roles with workers.New.
package workerstest

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/better-compute/better-compute/internal/config"
	"github.com/better-compute/better-compute/internal/locks"
	"github.com/better-compute/better-compute/internal/reconcile"
	"github.com/better-compute/better-compute/workers/internal/commandsweep"
	"github.com/better-compute/better-compute/workers/internal/engine"
	"github.com/better-compute/better-compute/workers/internal/nodecontrol"
	"github.com/better-compute/better-compute/workers/internal/placer"
	"github.com/better-compute/better-compute/workers/internal/placer/placertest"
	"github.com/better-compute/better-compute/workers/internal/retention"
	"github.com/better-compute/better-compute/workers/internal/workflows"
)

// Options say which work runs under which roles (the workers package's role names).
type Options struct {
	Pool        *pgxpool.Pool
	Roles       []string
	Reconcilers []reconcile.Registration
	Jobs        map[string][]locks.Job
	// ShardTTL is how long a dead process's shards stay unserved (shard.DefaultTTL when zero);
	// tests that kill processes shorten it.
	ShardTTL time.Duration
}

// Runtime runs the work Options name until its context ends.
type Runtime interface {
	Run(ctx context.Context)
}

// New prepares the work for a caller that runs it itself (a child process of a kill test).
func New(opts Options) Runtime {
	roles := map[string]bool{}
	for _, r := range opts.Roles {
		roles[r] = true
	}
	return engine.New(engine.Options{
		Pool: opts.Pool, Roles: roles, Reconcilers: opts.Reconcilers, Jobs: opts.Jobs, ShardTTL: opts.ShardTTL,
	})
}

// Run runs the work until the test ends, and waits for it to stop.
func Run(t testing.TB, opts Options) {
	t.Helper()
	rt := New(opts)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); rt.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
}

// NodeControlOptions tune the node life-cycle and NodeSpec reconcilers.
type NodeControlOptions = nodecontrol.Options

// NodeControl are the node life-cycle and NodeSpec reconcilers (controllers role).
func NodeControl(pool *pgxpool.Pool, opts NodeControlOptions) []reconcile.Registration {
	return nodecontrol.Reconcilers(pool, opts)
}

// LivenessOptions tune the liveness job.
type LivenessOptions = nodecontrol.LivenessOptions

// Liveness is the job that marks silent nodes offline (controllers role).
func Liveness(pool *pgxpool.Pool, opts LivenessOptions) locks.Job {
	return nodecontrol.LivenessJob(pool, opts)
}

// WorkflowOptions tune the workflow reconciler.
type WorkflowOptions = workflows.Options

// Workflows is the workflow reconciler (controllers role).
func Workflows(pool *pgxpool.Pool, opts WorkflowOptions) reconcile.Registration {
	return workflows.Reconciler(pool, opts)
}

// PlacerOptions tune the capacity placer.
type PlacerOptions = placer.Options

// RunPlacer runs the capacity placer as the scheduler role runs it until the test ends, and
// returns its runtime once it holds every shard.
func RunPlacer(t testing.TB, pool *pgxpool.Pool, opts PlacerOptions) *reconcile.Runtime {
	t.Helper()
	return placertest.Run(t, pool, opts)
}

// Prune runs one round of the retention job with these retention periods, under the job's
// lease as the controllers role holds it.
func Prune(t testing.TB, pool *pgxpool.Pool, periods config.Retention) {
	t.Helper()
	ctx := context.Background()
	ls, err := locks.NewHolder(pool, "workerstest-retention", nil).Acquire(ctx, time.Minute, "singleton:"+retention.Name)
	if err != nil || len(ls) != 1 {
		t.Fatalf("retention lease: %v %v", ls, err)
	}
	if _, err := retention.Prune(ctx, pool, ls[0], retention.Options{Retention: periods}); err != nil {
		t.Fatal(err)
	}
}

// CommandSweeperOptions tune the CommandSweeper.
type CommandSweeperOptions = commandsweep.SweeperOptions

// CommandSweeper is the job that re-queues commands sent but not acked in time and expires
// overdue ones (controllers role).
func CommandSweeper(pool *pgxpool.Pool, opts CommandSweeperOptions) locks.Job {
	return commandsweep.Sweeper(pool, opts)
}
