// Package gpucontrol runs the GPU health reconciler (kind gpuhealth.ReconcileKind, keys node ids)
// on the worker runtime: for a node whose daemon pushed a changed health snapshot, or whose GPUs
// came, went or moved, it applies the health policy (gpustate.Apply) in one transaction and looks
// at the node again when a clean period or a signal's window ends.
package gpucontrol

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/better-compute/better-compute/gen/db"
	"github.com/better-compute/better-compute/internal/gpuhealth"
	"github.com/better-compute/better-compute/internal/gpustate"
	"github.com/better-compute/better-compute/internal/reconcile"
)

// Options configure the reconciler.
type Options struct {
	// Policy maps signals to effects; gpuhealth.DefaultPolicy() when its version is empty.
	Policy gpuhealth.Policy
	// Wake, when set, is called after commit with the kinds the change gave work (the placer
	// when a GPU is placeable again, the node life cycle when a drain started).
	Wake func(kind string)
	// Now is the clock; time.Now by default.
	Now    func() time.Time
	Logger *slog.Logger
}

// Registration is the reconciler's registration, under the controllers role, with a resync of
// the nodes whose health may still change on its own.
func Registration(pool *pgxpool.Pool, opts Options) reconcile.Registration {
	if opts.Policy.Version == "" {
		opts.Policy = gpuhealth.DefaultPolicy()
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	return reconcile.Registration{
		Reconciler: &reconciler{pool: pool, opts: opts},
		Role:       reconcile.RoleControllers,
		Resync:     func(ctx context.Context) ([]string, error) { return db.New(pool).GPUHealthResyncKeys(ctx) },
	}
}

type reconciler struct {
	pool *pgxpool.Pool
	opts Options
}

// Kind is gpuhealth.ReconcileKind.
func (r *reconciler) Kind() string { return gpuhealth.ReconcileKind }

// Reconcile applies the policy to node key.
func (r *reconciler) Reconcile(ctx context.Context, key string) error {
	id, err := uuid.Parse(key)
	if err != nil {
		return nil // not a node id: nothing to do, and nothing to retry
	}
	now := r.opts.Now()
	var out gpustate.Outcome
	err = pgx.BeginFunc(ctx, r.pool, func(tx pgx.Tx) error {
		var err error
		out, err = gpustate.Apply(ctx, tx, id, r.opts.Policy, now, nil)
		if err != nil || out.Recheck.IsZero() {
			return err
		}
		// In the transaction: the key is due again when the verdict may change by itself.
		delay := out.Recheck.Sub(now) + time.Millisecond
		return db.New(tx).DeferReconcile(ctx, db.DeferReconcileParams{Kind: gpuhealth.ReconcileKind, Key: key, DelayMs: delay.Milliseconds()})
	})
	if err != nil {
		return fmt.Errorf("GPU health of node %s: %w", id, err)
	}
	if out.Changed > 0 {
		r.opts.Logger.Info("GPU health changed", "node_id", id, "gpus", out.Changed)
	}
	if r.opts.Wake != nil {
		for _, kind := range out.Wake {
			r.opts.Wake(kind)
		}
	}
	return nil
}
