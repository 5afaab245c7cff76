package event

import "github.com/google/uuid"

// workflowSubject is the subject of a workflow's events, so a consumer sees one workflow's
// events in order.
func workflowSubject(id uuid.UUID) string { return "workflow/" + id.String() }

// WorkflowChange is the payload of a workflow's change of state.
type WorkflowChange struct {
	// ID is the workflow's id.
	ID uuid.UUID `json:"id"`
	// Name is the workflow's name.
	Name string `json:"name,omitempty"`
	// Action is what it does to each node: upgrade, reboot, drain, configure or exec.
	Action string `json:"action"`
	// State is the workflow's state after the change.
	State string `json:"state"`
	// Reason says why it paused, failed or was cancelled.
	Reason string `json:"reason,omitempty"`
	// Nodes is how many nodes it took.
	Nodes int32 `json:"nodes"`
	// Failed is how many of them failed so far.
	Failed int32 `json:"failed"`
}

// Subject is "workflow/<id>".
func (e WorkflowChange) Subject() string { return workflowSubject(e.ID) }

// WorkflowCreated is emitted by workflows/create, and when a NodeSpec's daemon version makes one.
type WorkflowCreated struct{ WorkflowChange }

// Type is "workflow.created".
func (WorkflowCreated) Type() string { return "workflow.created" }

// WorkflowPaused is emitted by workflows/pause, and by the controller when more nodes failed than
// the workflow tolerates.
type WorkflowPaused struct{ WorkflowChange }

// Type is "workflow.paused".
func (WorkflowPaused) Type() string { return "workflow.paused" }

// WorkflowResumed is emitted by workflows/resume.
type WorkflowResumed struct{ WorkflowChange }

// Type is "workflow.resumed".
func (WorkflowResumed) Type() string { return "workflow.resumed" }

// WorkflowSucceeded is emitted when every node of a workflow succeeded or was skipped.
type WorkflowSucceeded struct{ WorkflowChange }

// Type is "workflow.succeeded".
func (WorkflowSucceeded) Type() string { return "workflow.succeeded" }

// WorkflowFailed is emitted when every node of a workflow is done and some failed.
type WorkflowFailed struct{ WorkflowChange }

// Type is "workflow.failed".
func (WorkflowFailed) Type() string { return "workflow.failed" }

// WorkflowCancelled is emitted by workflows/cancel.
type WorkflowCancelled struct{ WorkflowChange }

// Type is "workflow.cancelled".
func (WorkflowCancelled) Type() string { return "workflow.cancelled" }

// WorkflowNodeChange is the payload of one node's progress in a workflow.
type WorkflowNodeChange struct {
	// WorkflowID is the workflow's id.
	WorkflowID uuid.UUID `json:"workflowId"`
	// NodeID is the node's id.
	NodeID uuid.UUID `json:"nodeId"`
	// Hostname is the node's hostname.
	Hostname string `json:"hostname"`
	// Attempt counts from 1; a retry after workflows/resume is the next.
	Attempt int32 `json:"attempt"`
	// Message says what happened, for people.
	Message string `json:"message,omitempty"`
}

// Subject is "workflow/<id>": a workflow's node events are in order with the workflow's own.
func (e WorkflowNodeChange) Subject() string { return workflowSubject(e.WorkflowID) }

// WorkflowNodeStarted is emitted when a workflow admits a node (it is cordoned next).
type WorkflowNodeStarted struct{ WorkflowNodeChange }

// Type is "workflow.node.started".
func (WorkflowNodeStarted) Type() string { return "workflow.node.started" }

// WorkflowNodeSucceeded is emitted when a node has been healthy for the workflow's min_healthy
// after its action.
type WorkflowNodeSucceeded struct{ WorkflowNodeChange }

// Type is "workflow.node.succeeded".
func (WorkflowNodeSucceeded) Type() string { return "workflow.node.succeeded" }

// WorkflowNodeFailed is emitted when a node's step fails; a node the workflow cordoned stays
// cordoned.
type WorkflowNodeFailed struct{ WorkflowNodeChange }

// Type is "workflow.node.failed".
func (WorkflowNodeFailed) Type() string { return "workflow.node.failed" }
