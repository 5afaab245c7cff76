// Package workflow holds the vocabulary and rules of workflows: rolling operations (upgrade the
// daemon, reboot, drain, configure, exec) over many nodes, a few at a time. The API
// (server/internal/workflows) creates and steers them; the controller
// (workers/internal/workflows) advances each node through its steps from what is recorded; the
// NodeSpec reconciler makes upgrade workflows for daemon versions. All three meet here.
package workflow

import (
	"fmt"
	"time"

	"github.com/google/uuid"

	"github.com/better-compute/better-compute/gen/db"
)

// Kind is the reconciler kind of the workflow controller; keys are workflow ids. The statements
// that wake it from SQL (FinishCommand, NodeHello in queries/) name it too.
const Kind = "workflow"

// States of a workflow.
const (
	Running   = db.WorkflowStateRunning
	Paused    = db.WorkflowStatePaused
	Succeeded = db.WorkflowStateSucceeded
	Failed    = db.WorkflowStateFailed
	Cancelled = db.WorkflowStateCancelled
)

// Finished reports whether a workflow in state s is over.
func Finished(s db.WorkflowState) bool { return s == Succeeded || s == Failed || s == Cancelled }

// Steps of a node in a workflow: pending until admitted, then cordon → drain → act → verify →
// uncordon, and one of the three ends.
const (
	StepPending   = db.WorkflowStepPending
	StepCordon    = db.WorkflowStepCordon
	StepDrain     = db.WorkflowStepDrain
	StepAct       = db.WorkflowStepAct
	StepVerify    = db.WorkflowStepVerify
	StepUncordon  = db.WorkflowStepUncordon
	StepSucceeded = db.WorkflowStepSucceeded
	StepFailed    = db.WorkflowStepFailed
	StepSkipped   = db.WorkflowStepSkipped
)

// InProgress reports whether a node at step s is admitted and not done: it counts towards the
// workflow's max_parallel.
func InProgress(s db.WorkflowStep) bool {
	switch s {
	case StepCordon, StepDrain, StepAct, StepVerify, StepUncordon:
		return true
	}
	return false
}

// Origins of a workflow.
const (
	// OriginAPI is a workflow made by workflows/create.
	OriginAPI = "api"
	// OriginSpec is an upgrade workflow made for NodeSpec daemon versions.
	OriginSpec = "spec"
)

// Bounds.
const (
	// MaxNodes bounds the nodes one workflow takes.
	MaxNodes = 10_000
	// MaxName bounds a workflow's name, MaxReason a pause's or cancel's reason.
	MaxName   = 128
	MaxReason = 256
)

// CommandKey is the idempotency key of the act step's command for a node in attempt n of a
// workflow: the controller may run the step any number of times, and each attempt still sends
// exactly one command.
func CommandKey(workflowID uuid.UUID, attempt int32) string {
	return fmt.Sprintf("workflow-%s-%d", workflowID, attempt)
}

// Counts are how many of a workflow's nodes are where.
type Counts struct {
	Total, Pending, InProgress, Succeeded, Failed, Skipped int32
}

// Add counts n nodes at step s.
func (c *Counts) Add(s db.WorkflowStep, n int32) {
	c.Total += n
	switch {
	case s == StepPending:
		c.Pending += n
	case InProgress(s):
		c.InProgress += n
	case s == StepSucceeded:
		c.Succeeded += n
	case s == StepFailed:
		c.Failed += n
	case s == StepSkipped:
		c.Skipped += n
	}
}

// Policy is how carefully a workflow goes.
type Policy struct {
	// MaxParallel nodes are in their steps at once.
	MaxParallel int32
	// MaxFailures failed nodes are tolerated; one more pauses the workflow.
	MaxFailures int32
	// MinHealthy is how long a node must be ready (and on the version) after uncordon before it
	// stops counting towards MaxParallel.
	MinHealthy time.Duration
	// DrainDeadline is how long the drain step waits for leases to end before ending them.
	DrainDeadline time.Duration
	// StepTimeout bounds the act, verify and uncordon steps together.
	StepTimeout time.Duration
}

// Policy bounds and defaults.
const (
	MaxParallelLimit     = 1000
	MaxMinHealthy        = time.Hour
	MaxDrainDeadline     = 7 * 24 * time.Hour
	MinStepTimeout       = time.Minute
	MaxStepTimeout       = 24 * time.Hour
	DefaultDrainDeadline = time.Hour
	DefaultStepTimeout   = 15 * time.Minute
)

// PolicyOf is a workflow row's policy.
func PolicyOf(w db.Workflow) Policy {
	return Policy{
		MaxParallel: w.MaxParallel, MaxFailures: w.MaxFailures,
		MinHealthy:    time.Duration(w.MinHealthyMs) * time.Millisecond,
		DrainDeadline: time.Duration(w.DrainDeadlineMs) * time.Millisecond,
		StepTimeout:   time.Duration(w.StepTimeoutMs) * time.Millisecond,
	}
}
