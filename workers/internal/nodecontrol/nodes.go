// Package nodes runs the fleet's node controllers on the worker runtime:
//
//   - the node.lifecycle reconciler moves draining nodes to drained once they have no active
//     leases (sending their daemon a "drain" command) and keeps the Schedulable condition;
//   - the node.spec reconciler brings a node to its NodeSpec (labels and taints on the node row,
//     an upgrade workflow for a different daemon version, a "configure" command for a new
//     config), records the observed generation and keeps the SpecApplied condition;
//   - the node-liveness job marks nodes offline when their heartbeats stop and online when they
//     resume, in batches, with events, and lets the lead's hooks mark their leases at risk.
//
// Keys of both reconcilers are node ids. The API enqueues them in the transaction of each change
// (fleet.Enqueue); the liveness job enqueues the lifecycle of nodes whose liveness changed; and both
// reconcilers, while they wait for something that does not enqueue them (a lease ending, a
// command finishing), look again after a delay.
package nodecontrol

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"google.golang.org/protobuf/proto"

	"github.com/better-compute/better-compute/gen/db"
	daemonv1 "github.com/better-compute/better-compute/gen/go/bettercompute/daemon/v1"
	"github.com/better-compute/better-compute/internal/command"
	"github.com/better-compute/better-compute/internal/reconcile"
)

// Command types the reconcilers send to daemons.
const (
	// CommandDrain tells a daemon its node is draining (daemonv1.DrainPayload).
	CommandDrain = command.Drain
	// CommandUndrain tells the daemon to accept work again after an uncordon.
	CommandUndrain = command.Undrain
	// CommandUpgrade asks a daemon to run another version (daemonv1.UpgradePayload).
	CommandUpgrade = command.Upgrade
	// CommandConfigure asks a daemon to apply a configuration (daemonv1.ConfigurePayload).
	CommandConfigure = command.Configure
)

// drainPayload is the stored form of a drain command's (empty) payload.
var drainPayload = mustEncode(&daemonv1.DrainPayload{})

// mustEncode is command.Encode of a payload that always encodes (a constant one).
func mustEncode(p proto.Message) []byte {
	b, err := command.Encode(p)
	if err != nil {
		panic(err)
	}
	return b
}

// ActiveLeases counts the leases still active on a node; a draining node becomes drained when it
// has none.
type ActiveLeases func(ctx context.Context, nodeID uuid.UUID) (int, error)

// CommandNotifier tells gateways that nodes have new commands (gateway.Notifier does); gateways
// also find them within a second without it.
type CommandNotifier interface {
	CommandsCreated(ctx context.Context, nodeIDs []uuid.UUID)
}

// Defaults of Options.
const (
	DefaultDrainPoll        = 5 * time.Second
	DefaultCommandPoll      = 2 * time.Second
	DefaultRetryFailedAfter = 5 * time.Minute
	DefaultDrainTimeout     = 10 * time.Minute
	DefaultUpgradeTimeout   = 15 * time.Minute
	DefaultConfigureTimeout = 5 * time.Minute
)

// Options configure the reconcilers; zero values take the defaults.
type Options struct {
	// ActiveLeases counts a node's active leases; nil counts none, so drains complete at once.
	// It is called outside the reconciler's transaction; the placer must not place on a node
	// that is not ready (checking the state under the node's row lock), so the count cannot grow
	// once the node is draining.
	ActiveLeases ActiveLeases
	// Notifier, when set, is told of the commands the reconcilers create, after commit.
	Notifier CommandNotifier
	// DrainPoll is how often a draining node with active leases is looked at again.
	DrainPoll time.Duration
	// CommandPoll is how often a node waiting for an upgrade or configure command is looked at
	// again.
	CommandPoll time.Duration
	// RetryFailedAfter is how long after a failed (or expired) upgrade or configure command a
	// new one is sent for the same spec.
	RetryFailedAfter time.Duration
	// Deadlines of the commands the reconcilers send.
	DrainTimeout, UpgradeTimeout, ConfigureTimeout time.Duration
	// ResyncEvery is how often every node that needs it is enqueued again (draining nodes, nodes
	// without a Schedulable condition, nodes that differ from their spec); the reconcile
	// runtime's default when zero.
	ResyncEvery time.Duration
	Logger      *slog.Logger
}

func (o Options) withDefaults() Options {
	set := func(d *time.Duration, def time.Duration) {
		if *d <= 0 {
			*d = def
		}
	}
	set(&o.DrainPoll, DefaultDrainPoll)
	set(&o.CommandPoll, DefaultCommandPoll)
	set(&o.RetryFailedAfter, DefaultRetryFailedAfter)
	set(&o.DrainTimeout, DefaultDrainTimeout)
	set(&o.UpgradeTimeout, DefaultUpgradeTimeout)
	set(&o.ConfigureTimeout, DefaultConfigureTimeout)
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return o
}

// Reconcilers returns the node.lifecycle and node.spec reconcilers, for the controllers role.
func Reconcilers(pool *pgxpool.Pool, opts Options) []reconcile.Registration {
	opts = opts.withDefaults()
	return []reconcile.Registration{
		{
			Reconciler:  &lifecycleReconciler{pool: pool, opts: opts},
			Role:        reconcile.RoleControllers,
			Resync:      func(ctx context.Context) ([]string, error) { return db.New(pool).LifecycleResyncNodeKeys(ctx) },
			ResyncEvery: opts.ResyncEvery,
		},
		{
			Reconciler:  &specReconciler{pool: pool, opts: opts},
			Role:        reconcile.RoleControllers,
			Resync:      func(ctx context.Context) ([]string, error) { return db.New(pool).SpecDriftNodeKeys(ctx) },
			ResyncEvery: opts.ResyncEvery,
		},
	}
}

// lookAgain makes key of kind due again after d, even though the reconcile in progress succeeds.
func lookAgain(ctx context.Context, pool *pgxpool.Pool, kind, key string, d time.Duration) error {
	if err := db.New(pool).DeferReconcile(ctx, db.DeferReconcileParams{Kind: kind, Key: key, DelayMs: d.Milliseconds()}); err != nil {
		return fmt.Errorf("look at %s %s again later: %w", kind, key, err)
	}
	return nil
}

// newCommand creates a command for node n (command.Create).
func newCommand(ctx context.Context, q *db.Queries, n db.Node, typ, key string, payload []byte, timeout time.Duration) (db.Command, bool, error) {
	return command.Create(ctx, q, n.TenantID, n.ID, typ, key, payload, timeout)
}

// lockNode reads node id for update in tx; ok is false when it does not exist.
func lockNode(ctx context.Context, q *db.Queries, id uuid.UUID) (n db.Node, ok bool, err error) {
	n, err = q.LockNode(ctx, id)
	if errors.Is(err, pgx.ErrNoRows) {
		return n, false, nil
	}
	if err != nil {
		return n, false, fmt.Errorf("read node %s: %w", id, err)
	}
	return n, true, nil
}
