// Package workers runs the worker roles of a process: the controllers (node life cycle, NodeSpec,
// workflows, the command sweep, liveness, metering and retention), the scheduler (the capacity
// placer), the sinks (webhook and module event delivery) and iam (key and session expiry), with
// whatever reconcilers, jobs and sinks modules add. Every piece of work is single-writer through
// leases in PostgreSQL, so any number of processes may run any roles, and any of them may die at
// any moment.
package workers

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/better-compute/better-compute/internal/config"
	"github.com/better-compute/better-compute/internal/fleet"
	"github.com/better-compute/better-compute/internal/locks"
	"github.com/better-compute/better-compute/internal/reconcile"
	"github.com/better-compute/better-compute/internal/seal"
	"github.com/better-compute/better-compute/internal/sinks"
	"github.com/better-compute/better-compute/internal/webhook"
	"github.com/better-compute/better-compute/workers/internal/commandsweep"
	"github.com/better-compute/better-compute/workers/internal/engine"
	"github.com/better-compute/better-compute/workers/internal/gpucontrol"
	"github.com/better-compute/better-compute/workers/internal/iamjobs"
	"github.com/better-compute/better-compute/workers/internal/idlejob"
	"github.com/better-compute/better-compute/workers/internal/metering"
	"github.com/better-compute/better-compute/workers/internal/nodecontrol"
	"github.com/better-compute/better-compute/workers/internal/placer"
	"github.com/better-compute/better-compute/workers/internal/remediator"
	"github.com/better-compute/better-compute/workers/internal/retention"
	"github.com/better-compute/better-compute/workers/internal/workflows"
)

// The worker roles, as the configuration's roles list names them.
const (
	RoleControllers = config.RoleControllers
	RoleScheduler   = config.RoleScheduler
	RoleSinks       = config.RoleSinks
	RoleIAM         = config.RoleIAM
)

// Roles are every worker role.
var Roles = []string{RoleControllers, RoleScheduler, RoleSinks, RoleIAM}

// Notifier tells gateways that nodes have new commands (gateway.Notifier does). Without one,
// gateways still find them within a second.
type Notifier interface {
	CommandsCreated(ctx context.Context, nodeIDs []uuid.UUID)
}

// Options configure the worker roles of a process.
type Options struct {
	// Pool is the migrated database.
	Pool *pgxpool.Pool
	// Roles are the worker roles to run; names that are not worker roles are ignored.
	Roles []string
	// Secret is the deployment secret, which seals webhook signing secrets; the sinks role needs
	// it.
	Secret string
	// Notifier pokes gateways after commands are written; none without the machine PKI.
	Notifier Notifier
	// Retention says how long finished work is kept (config retention.*).
	Retention config.Retention
	// Webhooks bound webhook delivery (config webhooks.*).
	Webhooks config.Webhooks
	// Reconcilers, Jobs and Sinks are work beyond the domain's, as modules add it: reconcilers
	// run under the role each declares, jobs are singletons per role, sinks are delivered to by
	// the sinks role beside webhooks.
	Reconcilers []reconcile.Registration
	Jobs        map[string][]locks.Job
	Sinks       []sinks.Sink
	// PowerCycle power-cycles the machine behind a node that no longer answers, for the
	// remediation controller (the modules' moduleset.Workers.PowerCycle); nil when nothing can.
	PowerCycle func(ctx context.Context, node uuid.UUID) (bool, error)
	// Replace replaces the machine behind a node with a new one of its class, for the
	// remediation controller (moduleset.Workers.Replace); nil when nothing can.
	Replace func(ctx context.Context, node uuid.UUID) (bool, error)
	// HolderID names this process in the locks table; a unique one is made when empty.
	HolderID string
	Logger   *slog.Logger
}

// Workers are the worker roles of one process, ready to run.
type Workers struct {
	rt   *engine.Runtime
	opts Options
}

// New prepares the roles; Run starts them.
func New(opts Options) (*Workers, error) {
	if opts.Pool == nil {
		return nil, errors.New("workers: a database pool is required")
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	roles := map[string]bool{}
	for _, r := range opts.Roles {
		if slices.Contains(Roles, r) {
			roles[r] = true
		}
	}
	var sealer *seal.Sealer
	if roles[RoleSinks] {
		var err error
		if sealer, err = webhook.NewSealer(opts.Secret); err != nil {
			return nil, fmt.Errorf("workers: sinks: %w", err)
		}
	}
	pool, log := opts.Pool, opts.Logger
	livenessWoken := make(chan struct{}, 1)
	jobs := map[string][]locks.Job{
		RoleControllers: {
			commandsweep.Sweeper(pool, commandsweep.SweeperOptions{Logger: log}),
			retention.Job(pool, retention.Options{Retention: opts.Retention, Logger: log}),
			// A node that goes silent puts its leases at risk; they are placed again when it
			// returns. A gateway's wake-up at a node's hello starts a round at once.
			nodecontrol.LivenessJob(pool, nodecontrol.LivenessOptions{OnOffline: placer.MarkAtRisk, OnOnline: placer.MarkPlaced, Woken: livenessWoken, Logger: log}),
			metering.Job(pool, metering.Options{Logger: log}),
			idlejob.Job(pool, idlejob.Options{Logger: log}),
		},
		RoleIAM: iamjobs.Jobs(pool, iamjobs.Options{Logger: log}),
	}
	for role, more := range opts.Jobs {
		jobs[role] = append(jobs[role], more...)
	}
	// Reconcilers that give others work poke them in-process after their commit; other processes
	// find it at their next poll.
	var rt *engine.Runtime
	poke := func(kind string) { rt.Reconcilers().Poke(kind) }
	rt = engine.New(engine.Options{
		Pool: pool, Roles: roles, Logger: log, HolderID: opts.HolderID,
		Reconcilers: slices.Concat(domainReconcilers(pool, opts, poke, log), opts.Reconcilers),
		Jobs:        jobs,
		Loops: map[string][]func(context.Context, *locks.Holder){
			RoleSinks: {func(ctx context.Context, h *locks.Holder) {
				r := opts.Webhooks.Retry
				err := sinks.Run(ctx, h, pool, sinks.Options{
					Sealer: sealer, AllowPrivate: opts.Webhooks.AllowPrivate, Logger: log, Sinks: opts.Sinks,
					MinBackoff: r.MinBackoff, MaxBackoff: r.MaxBackoff, GiveUpAfter: r.GiveUpAfter, MaxDeadLetters: r.MaxDeadLetters,
				})
				if err != nil {
					log.Error("sinks role stopped", "err", err)
				}
			}},
		},
	})
	rt.Reconcilers().Subscribe(fleet.KindLiveness, livenessWoken)
	return &Workers{rt: rt, opts: opts}, nil
}

// domainReconcilers are node life cycle, NodeSpec, GPU health, remediation and workflows
// (controllers), and
// the capacity placer (scheduler).
func domainReconcilers(pool *pgxpool.Pool, o Options, poke func(kind string), log *slog.Logger) []reconcile.Registration {
	notifier := o.Notifier
	opts := nodecontrol.Options{
		ActiveLeases: func(ctx context.Context, node uuid.UUID) (int, error) { return placer.ActiveLeases(ctx, pool, node) },
		Logger:       log,
	}
	wopts := workflows.Options{Logger: log}
	ropts := remediator.Options{Wake: poke, PowerCycle: o.PowerCycle, Replace: o.Replace, Logger: log}
	if notifier != nil {
		opts.Notifier, wopts.Notifier, ropts.Notifier = notifier, notifier, notifier
	}
	return append(nodecontrol.Reconcilers(pool, opts),
		gpucontrol.Registration(pool, gpucontrol.Options{Wake: poke, Logger: log}),
		remediator.Registration(pool, ropts),
		placer.Registration(pool, placer.Options{Logger: log}),
		workflows.Reconciler(pool, wopts))
}

// HolderID is the name this process's leases are held under.
func (w *Workers) HolderID() string { return w.rt.Holder().ID }

// Local is the reconcile runtime, which reconcile.NewWaker pokes in-process: a wake after a local
// commit runs a round here at once instead of at the next poll.
func (w *Workers) Local() *reconcile.Runtime { return w.rt.Reconcilers() }

// Run runs the roles until ctx ends and everything has stopped, releasing leases on the way out.
func (w *Workers) Run(ctx context.Context) {
	w.opts.Logger.Info("worker roles starting", "roles", w.opts.Roles, "holder", w.HolderID())
	w.rt.Run(ctx)
}

// NewHolderID names a process uniquely: host, pid and a random suffix, so a restarted process is
// a new holder and never mistakes an old lease for its own.
func NewHolderID() string { return engine.NewHolderID() }
