// Package remediator is the remediation controller (kind remediation.Kind, keys remediation
// ids) on the worker runtime: it takes a waiting remediation when its pools' budgets allow, and
// climbs its ladder one step at a time, each step's start and end in a transaction of its own,
// so a controller killed at any point resumes where the database says and no step's effect is
// applied twice (commands carry idempotency keys of the remediation and step).
package remediator

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/better-compute/better-compute/gen/db"
	"github.com/better-compute/better-compute/internal/gpuhealth"
	"github.com/better-compute/better-compute/internal/reconcile"
	"github.com/better-compute/better-compute/internal/remediation"
)

// CommandNotifier tells gateways that nodes have new commands (they also find them within a
// second without it).
type CommandNotifier interface {
	CommandsCreated(ctx context.Context, nodeIDs []uuid.UUID)
}

// Options configure the controller.
type Options struct {
	// Notifier, when set, is told of the commands the controller creates, after commit.
	Notifier CommandNotifier
	// Wake, when set, is called after commit with the kinds a step gave work (the placer when a
	// lease ended, the node life cycle when a drain started).
	Wake func(kind string)
	// Health is the GPU health policy the verify step applies after acknowledging the signals;
	// gpuhealth.DefaultPolicy() when its version is empty.
	Health gpuhealth.Policy
	// VerifyWindow, when set, replaces every verify step's window: the simulator and the tests
	// use seconds where a fleet wants minutes.
	VerifyWindow time.Duration
	// PowerCycle power-cycles the machine behind a node that no longer answers, reporting false
	// when nothing can (no provider holds it); nil: nothing can.
	PowerCycle func(ctx context.Context, node uuid.UUID) (bool, error)
	// Replace replaces the machine behind a node with a new one of its class, reporting false
	// when nothing can; nil: nothing can.
	Replace func(ctx context.Context, node uuid.UUID) (bool, error)
	// PowerCycleWait is how long a power-cycled node has to answer again; DefaultPowerCycleWait
	// when zero.
	PowerCycleWait time.Duration
	// RebootWait is how long a rebooted node has to come back (its daemon's new session);
	// DefaultRebootWait when zero.
	RebootWait time.Duration
	// Poll is how often a step waiting on something that does not wake the controller (a
	// command, leases ending, a window) is looked at again; DefaultPoll when zero.
	Poll time.Duration
	// Now is the clock; time.Now by default.
	Now    func() time.Time
	Logger *slog.Logger
}

// Defaults of Options.
const (
	DefaultPoll           = 2 * time.Second
	DefaultPowerCycleWait = 15 * time.Minute
	DefaultRebootWait     = 15 * time.Minute
)

// Registration is the controller's registration, under the controllers role, resyncing every
// remediation in progress.
func Registration(pool *pgxpool.Pool, opts Options) reconcile.Registration {
	if opts.Health.Version == "" {
		opts.Health = gpuhealth.DefaultPolicy()
	}
	if opts.Poll <= 0 {
		opts.Poll = DefaultPoll
	}
	if opts.PowerCycleWait <= 0 {
		opts.PowerCycleWait = DefaultPowerCycleWait
	}
	if opts.RebootWait <= 0 {
		opts.RebootWait = DefaultRebootWait
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	return reconcile.Registration{
		Reconciler: &controller{pool: pool, opts: opts},
		Role:       reconcile.RoleControllers,
		Resync: func(ctx context.Context) ([]string, error) {
			ids, err := db.New(pool).ActiveRemediationIDs(ctx)
			if err != nil {
				return nil, err
			}
			keys := make([]string, len(ids))
			for i, id := range ids {
				keys[i] = id.String()
			}
			return keys, nil
		},
	}
}

type controller struct {
	pool *pgxpool.Pool
	opts Options
}

// Kind is remediation.Kind.
func (c *controller) Kind() string { return remediation.Kind }

// Reconcile moves remediation key as far as it can go now.
func (c *controller) Reconcile(ctx context.Context, key string) error {
	id, err := uuid.Parse(key)
	if err != nil {
		return nil // not a remediation id: nothing to do, nothing to retry
	}
	var out effects
	err = pgx.BeginFunc(ctx, c.pool, func(tx pgx.Tx) error {
		out = effects{}
		q := db.New(tx)
		r, err := q.LockRemediation(ctx, id)
		if errors.Is(err, pgx.ErrNoRows) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("lock remediation %s: %w", id, err)
		}
		w := &work{c: c, q: q, tx: tx, r: r, now: c.opts.Now(), out: &out}
		if err := w.run(ctx); err != nil {
			return fmt.Errorf("remediation %s: %w", id, err)
		}
		if out.recheck > 0 {
			return q.DeferReconcile(ctx, db.DeferReconcileParams{Kind: remediation.Kind, Key: key, DelayMs: out.recheck.Milliseconds() + 1})
		}
		return nil
	})
	if err != nil {
		return err
	}
	if c.opts.Notifier != nil && len(out.commands) > 0 {
		c.opts.Notifier.CommandsCreated(ctx, out.commands)
	}
	if c.opts.Wake != nil {
		for _, k := range out.wake {
			c.opts.Wake(k)
		}
	}
	return nil
}

// effects is what a reconcile leaves for after its commit.
type effects struct {
	recheck  time.Duration
	commands []uuid.UUID
	wake     []string
}
