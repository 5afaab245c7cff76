// Package fleet holds the vocabulary and rules of nodes that the API, the node controllers and
// the gateway share: a node's life-cycle states, its conditions, its labels (their syntax and
// storage), its taints and the tolerations that match them, its NodeSpec as nodes.spec stores it,
// and the reconciler kinds the API queues nodes for. It knows nothing of who calls it: it imports
// only the standard library, gen/ and the plumbing below the role trees.
package fleet

import (
	"context"

	"github.com/google/uuid"

	"github.com/better-compute/better-compute/gen/db"
	"github.com/better-compute/better-compute/internal/enqueue"
)

// State is a node's life-cycle state. It is the database's node_state enum, as sqlc generates it
// (queries/migrations/0015_state_types.sql): the database says which states exist, and this is
// not a second list of them.
type State = db.NodeState

// Node life-cycle states (nodes.state).
const (
	StateJoining  = db.NodeStateJoining
	StateReady    = db.NodeStateReady
	StateCordoned = db.NodeStateCordoned
	StateDraining = db.NodeStateDraining
	StateDrained  = db.NodeStateDrained
	StateRetired  = db.NodeStateRetired
)

// Reconciler kinds of nodes, whose keys are node ids: the API queues a node for them in the
// transaction of each change, and workers/internal/nodecontrol runs them.
const (
	// KindLifecycle moves draining nodes to drained and keeps the Schedulable condition.
	KindLifecycle = "node.lifecycle"
	// KindSpec brings a node to its NodeSpec and keeps the SpecApplied condition.
	KindSpec = "node.spec"
	// KindLiveness is not a reconciler but the wake-up of the liveness job: a gateway sends it
	// when a node says hello, so the node is online as its session starts rather than at the
	// job's next round.
	KindLiveness = "node.liveness"
)

// Enqueue queues nodes for a reconciler kind; run it with q bound to the transaction of the
// change, so the nodes are queued exactly when it commits, then wake the kind after commit if
// you can.
func Enqueue(ctx context.Context, q *db.Queries, kind string, ids ...uuid.UUID) error {
	return enqueue.IDs(ctx, q, kind, ids...)
}

// MaxJoinTokenUses is the most nodes one join token may admit: enough for a rack's bulk
// provisioning, few enough that a leaked token is bounded.
const MaxJoinTokenUses = 10000
