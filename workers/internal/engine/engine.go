// Package engine runs whatever work it is given under the worker roles of a process: reconcilers
// on shard membership (internal/shard, internal/reconcile), singleton jobs and self-managed loops
// under leases (internal/locks). It knows no domain work; the workers package gives it the
// domain's, and tests give it exactly the pieces they exercise. Every piece of work is
// single-writer through leases in PostgreSQL, so any number of processes may run any roles, and
// any of them may die at any moment.
package engine

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/better-compute/better-compute/internal/locks"
	"github.com/better-compute/better-compute/internal/reconcile"
	"github.com/better-compute/better-compute/internal/shard"
)

// Options say what work runs under which roles.
type Options struct {
	Pool *pgxpool.Pool
	// Roles are the worker roles to run; others are ignored.
	Roles map[string]bool
	// Reconcilers run under the role each declares.
	Reconcilers []reconcile.Registration
	// Jobs are singleton jobs per role.
	Jobs map[string][]locks.Job
	// Loops are long-running functions per role that manage their own locks (the sinks
	// dispatcher starts one singleton per sink).
	Loops map[string][]func(ctx context.Context, holder *locks.Holder)
	// HolderID names this process in the locks table; a unique one is made when empty.
	HolderID string
	// ShardTTL is how long a dead process's shards stay unserved (shard.DefaultTTL when zero);
	// tests that kill processes shorten it.
	ShardTTL time.Duration
	Logger   *slog.Logger
}

// Runtime is the worker side of one process.
type Runtime struct {
	opts       Options
	holder     *locks.Holder
	reconciles *reconcile.Runtime
	members    map[string]*shard.Member
}

// New prepares the runtime; Run starts it.
func New(opts Options) *Runtime {
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.HolderID == "" {
		opts.HolderID = NewHolderID()
	}
	holder := locks.NewHolder(opts.Pool, opts.HolderID, opts.Logger)
	rt := &Runtime{
		opts:       opts,
		holder:     holder,
		reconciles: reconcile.NewRuntime(opts.Pool, holder, opts.Logger),
		members:    map[string]*shard.Member{},
	}
	for _, reg := range opts.Reconcilers {
		rt.reconciles.Register(reg)
	}
	for _, role := range []string{reconcile.RoleControllers, reconcile.RoleScheduler} {
		if opts.Roles[role] {
			rt.members[role] = shard.NewMember(opts.Pool, holder, role, opts.ShardTTL, opts.Logger)
		}
	}
	return rt
}

// Holder is the process's lease identity.
func (rt *Runtime) Holder() *locks.Holder { return rt.holder }

// Reconcilers is the reconcile runtime, for waking kinds after local enqueues.
func (rt *Runtime) Reconcilers() *reconcile.Runtime { return rt.reconciles }

// Run runs the roles until ctx ends and everything has stopped, releasing leases on the way
// out.
func (rt *Runtime) Run(ctx context.Context) {
	log := rt.opts.Logger.With("holder", rt.holder.ID)
	var wg sync.WaitGroup
	for role, m := range rt.members {
		log.Info("joining shard membership", "role", role)
		wg.Go(func() { m.Run(ctx) })
	}
	if len(rt.members) > 0 {
		wg.Go(func() { rt.reconciles.Run(ctx, rt.members) })
	}
	for role, jobs := range rt.opts.Jobs {
		if !rt.opts.Roles[role] {
			continue
		}
		for _, job := range jobs {
			log.Info("running singleton job when its lease is free", "role", role, "job", job.Name)
			wg.Go(func() { rt.holder.RunJob(ctx, job) })
		}
	}
	for role, loops := range rt.opts.Loops {
		if !rt.opts.Roles[role] {
			continue
		}
		for _, loop := range loops {
			wg.Go(func() { loop(ctx, rt.holder) })
		}
	}
	wg.Wait()
}

// NewHolderID names a process uniquely: host, pid and a random suffix, so a restarted process
// is a new holder and never mistakes an old lease for its own.
func NewHolderID() string {
	host, _ := os.Hostname()
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	return fmt.Sprintf("%s-%d-%s", host, os.Getpid(), hex.EncodeToString(b))
}
