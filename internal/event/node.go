package event

import (
	"encoding/json"
	"time"

	"github.com/google/uuid"
)

// nodeSubject is the subject of a node's events.
func nodeSubject(id uuid.UUID) string { return "node/" + id.String() }

// NodeJoined is emitted by the gateway when a daemon joins with a join token and becomes a node
// (state joining).
type NodeJoined struct {
	// ID is the new node's id.
	ID uuid.UUID `json:"id"`
	// Hostname is the hostname the daemon gave at join.
	Hostname string `json:"hostname"`
}

// Type is "node.joined".
func (NodeJoined) Type() string { return "node.joined" }

// Subject is "node/<id>".
func (e NodeJoined) Subject() string { return nodeSubject(e.ID) }

// NodeTransition is the payload of a node's change of life-cycle state.
type NodeTransition struct {
	// ID is the node's id.
	ID uuid.UUID `json:"id"`
	// Hostname is the node's hostname.
	Hostname string `json:"hostname"`
	// From is the state the node left.
	From string `json:"from"`
	// To is the state the node is now in.
	To string `json:"to"`
}

// Subject is "node/<id>".
func (e NodeTransition) Subject() string { return nodeSubject(e.ID) }

// NodeReady is emitted when a joining node's daemon says hello for the first time (joining ->
// ready). The gateway's RecordNodeHello statement writes it.
type NodeReady struct{ NodeTransition }

// Type is "node.ready".
func (NodeReady) Type() string { return "node.ready" }

// NodeCordoned is emitted by nodes/cordon: the node takes no new placements.
type NodeCordoned struct{ NodeTransition }

// Type is "node.cordoned".
func (NodeCordoned) Type() string { return "node.cordoned" }

// NodeUncordoned is emitted by nodes/uncordon: the node is ready again.
type NodeUncordoned struct{ NodeTransition }

// Type is "node.uncordoned".
func (NodeUncordoned) Type() string { return "node.uncordoned" }

// NodeDraining is emitted by nodes/drain: the node takes no new placements and its daemon is
// told to drain; it becomes drained when no lease holds anything on it.
type NodeDraining struct{ NodeTransition }

// Type is "node.draining".
func (NodeDraining) Type() string { return "node.draining" }

// NodeDrained is emitted by the node life-cycle reconciler when a draining node holds no lease
// any more (draining -> drained).
type NodeDrained struct{ NodeTransition }

// Type is "node.drained".
func (NodeDrained) Type() string { return "node.drained" }

// NodeRetired is emitted by nodes/retire: a drained node is retired for good (and revoked).
type NodeRetired struct{ NodeTransition }

// Type is "node.retired".
func (NodeRetired) Type() string { return "node.retired" }

// NodeRevoked is emitted when a node's identity is revoked (nodes/revoke, nodes/retire, or its
// tenant's deletion): its certificate is not renewed and its session ends.
type NodeRevoked struct {
	// ID is the node's id.
	ID uuid.UUID `json:"id"`
	// Hostname is the node's hostname.
	Hostname string `json:"hostname"`
}

// Type is "node.revoked".
func (NodeRevoked) Type() string { return "node.revoked" }

// Subject is "node/<id>".
func (e NodeRevoked) Subject() string { return nodeSubject(e.ID) }

// NodeLabeled is emitted by nodes/label when a node's labels change.
type NodeLabeled struct {
	// ID is the node's id.
	ID uuid.UUID `json:"id"`
	// Labels are the node's labels after the change.
	Labels map[string]string `json:"labels"`
}

// Type is "node.labeled".
func (NodeLabeled) Type() string { return "node.labeled" }

// Subject is "node/<id>".
func (e NodeLabeled) Subject() string { return nodeSubject(e.ID) }

// NodeSpecUpdated is emitted when a node's desired spec (labels, taints, daemon version,
// configuration) changes, with its new generation.
type NodeSpecUpdated struct {
	// ID is the node's id.
	ID uuid.UUID `json:"id"`
	// Generation is the spec's new generation.
	Generation int64 `json:"generation"`
}

// Type is "node.spec.updated".
func (NodeSpecUpdated) Type() string { return "node.spec.updated" }

// Subject is "node/<id>".
func (e NodeSpecUpdated) Subject() string { return nodeSubject(e.ID) }

// NodeSpecOutcome is the payload of the NodeSpec reconciler's verdict on a spec generation.
type NodeSpecOutcome struct {
	// ID is the node's id.
	ID uuid.UUID `json:"id"`
	// Generation is the spec generation the outcome is for.
	Generation int64 `json:"generation"`
	// Reason is the SpecApplied condition's reason, a CamelCase word.
	Reason string `json:"reason"`
	// Message is the SpecApplied condition's message, for people.
	Message string `json:"message"`
}

// Subject is "node/<id>".
func (e NodeSpecOutcome) Subject() string { return nodeSubject(e.ID) }

// NodeSpecApplied is emitted by the NodeSpec reconciler when a node has applied its spec's
// generation.
type NodeSpecApplied struct{ NodeSpecOutcome }

// Type is "node.spec.applied".
func (NodeSpecApplied) Type() string { return "node.spec.applied" }

// NodeSpecFailed is emitted by the NodeSpec reconciler when applying a generation failed: once
// per failed attempt, or when the reason changes.
type NodeSpecFailed struct{ NodeSpecOutcome }

// Type is "node.spec.failed".
func (NodeSpecFailed) Type() string { return "node.spec.failed" }

// NodeLiveness is the payload of a node going offline or coming back.
type NodeLiveness struct {
	// ID is the node's id.
	ID uuid.UUID `json:"id"`
	// LastSeenTime is when a gateway last heard from the node; null if never.
	LastSeenTime *time.Time `json:"lastSeenTime"`
}

// Subject is "node/<id>".
func (e NodeLiveness) Subject() string { return nodeSubject(e.ID) }

// NodeOffline is emitted by the liveness job when an online node has not been heard from within
// the threshold. The MarkNodesOffline statement writes it.
type NodeOffline struct{ NodeLiveness }

// Type is "node.offline".
func (NodeOffline) Type() string { return "node.offline" }

// NodeOnline is emitted by the liveness job when an offline node is heard from again. The
// MarkNodesOnline statement writes it.
type NodeOnline struct{ NodeLiveness }

// Type is "node.online".
func (NodeOnline) Type() string { return "node.online" }

// NodeInventoryChanged is emitted when a node reports an inventory that differs from the stored
// one (at hello, or as a collectInventory result). The RecordNodeHello and RecordNodeInventory
// statements write it.
type NodeInventoryChanged struct {
	// ID is the node's id.
	ID uuid.UUID `json:"id"`
	// Inventory is the new inventory, as nodes/get returns it.
	Inventory json.RawMessage `json:"inventory"`
}

// Type is "node.inventory.changed".
func (NodeInventoryChanged) Type() string { return "node.inventory.changed" }

// Subject is "node/<id>".
func (e NodeInventoryChanged) Subject() string { return nodeSubject(e.ID) }
