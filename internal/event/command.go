package event

import "github.com/google/uuid"

// commandSubject is the subject of a command's events.
func commandSubject(id uuid.UUID) string { return "command/" + id.String() }

// CommandRef is the payload of a command's events: which command, for which node, of which type.
type CommandRef struct {
	// ID is the command's id.
	ID uuid.UUID `json:"id"`
	// NodeID is the node the command is for.
	NodeID uuid.UUID `json:"nodeId"`
	// Type is the command's type, for example "exec" or "drain".
	Type string `json:"type"`
}

// Subject is "command/<id>".
func (e CommandRef) Subject() string { return commandSubject(e.ID) }

// CommandCreated is emitted when a command is created for a node: by commands/create (one per
// target node) and by the node reconcilers (drain, upgrade, configure, …).
type CommandCreated struct{ CommandRef }

// Type is "command.created".
func (CommandCreated) Type() string { return "command.created" }

// CommandSucceeded is emitted by the gateway when a node reports a command succeeded; the
// result is on the command (commands/get).
type CommandSucceeded struct{ CommandRef }

// Type is "command.succeeded".
func (CommandSucceeded) Type() string { return "command.succeeded" }

// CommandFailed is emitted by the gateway when a node reports a command failed, or its result
// could not be stored.
type CommandFailed struct{ CommandRef }

// Type is "command.failed".
func (CommandFailed) Type() string { return "command.failed" }

// CommandCancelled is emitted by commands/cancel.
type CommandCancelled struct {
	CommandRef
	// PreviousState is the state the command was cancelled in (pending, sent or acked).
	PreviousState string `json:"previousState"`
}

// Type is "command.cancelled".
func (CommandCancelled) Type() string { return "command.cancelled" }
