package remediation

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/better-compute/better-compute/gen/db"
	"github.com/better-compute/better-compute/internal/enqueue"
	"github.com/better-compute/better-compute/internal/event"
)

// Kind is the controller's reconciler kind; its keys are remediation ids.
const Kind = "gpu.remediation"

// States of a remediation.
const (
	StateWaiting   = "waiting"
	StateRunning   = "running"
	StateSucceeded = "succeeded"
	StateService   = "service"
	// StateReturned is a remediation in service whose hardware an operator put back in service
	// (remediations/returnFromService).
	StateReturned  = "returned"
	StateCancelled = "cancelled"
	StateFailed    = "failed"
)

// CheckManual is the check of a remediation an operator started by hand (remediations/create).
const CheckManual = "manual"

// Reason is what a remediation repairs: the strongest health reason of the GPU (or node) that
// turned unhealthy, or an operator's (Check CheckManual, Detail their words).
type Reason struct {
	Check string
	Code  int64
	// Detail is an operator's reason for a remediation started by hand; empty otherwise.
	Detail string
}

// String is the reason as "check code" ("xid 79"), or "check" without a code.
func (r Reason) String() string {
	if r.Code == 0 {
		return r.Check
	}
	return fmt.Sprintf("%s %d", r.Check, r.Code)
}

// Subject is what a remediation is of: a node, and the GPU on it when one GPU is at fault.
type Subject struct {
	Tenant, Node uuid.UUID
	GPUUUID      string
	GPUSerial    string
	// Principal started it by hand; nil when health did.
	Principal *uuid.UUID
}

// ErrInProgress is Open's error when the node already has a remediation in progress.
var ErrInProgress = errors.New("the node has a remediation in progress")

// ErrNoLadder is OpenLadder's error when the policy has no ladder of the name.
var ErrNoLadder = errors.New("the remediation policy has no such ladder")

// Open starts a remediation of the subject for the reason, on the ladder the policy picks, in
// the caller's transaction, and queues it for the controller (the caller wakes Kind after the
// commit). It returns ErrInProgress when the node has one already.
func Open(ctx context.Context, q *db.Queries, s Subject, r Reason, p Policy) (db.Remediation, error) {
	p, err := withPools(ctx, q, s.Node, p)
	if err != nil {
		return db.Remediation{}, err
	}
	name, _ := p.LadderFor(r.Check, r.Code)
	return openLadder(ctx, q, s, r, p, name)
}

// withPools is p with the overrides of the pools node is a member of, in pool id order.
func withPools(ctx context.Context, q *db.Queries, node uuid.UUID, p Policy) (Policy, error) {
	rows, err := q.NodeRemediationOverrides(ctx, node)
	if err != nil {
		return p, fmt.Errorf("read the remediation overrides of node %s's pools: %w", node, err)
	}
	os := make([]Override, 0, len(rows))
	for _, b := range rows {
		o, err := ParseOverride(b, p)
		if err != nil {
			return p, err
		}
		os = append(os, o)
	}
	return p.With(os...), nil
}

// OpenLadder is Open on the policy's ladder of a name, which an operator picked
// (remediations/create); ErrNoLadder when the policy has none of that name.
func OpenLadder(ctx context.Context, q *db.Queries, s Subject, r Reason, p Policy, name string) (db.Remediation, error) {
	p, err := withPools(ctx, q, s.Node, p)
	if err != nil {
		return db.Remediation{}, err
	}
	return openLadder(ctx, q, s, r, p, name)
}

// openLadder opens a remediation on p's ladder name, p having the node's pools' overrides.
func openLadder(ctx context.Context, q *db.Queries, s Subject, r Reason, p Policy, name string) (db.Remediation, error) {
	ladder, ok := p.Ladders[name]
	if !ok {
		return db.Remediation{}, fmt.Errorf("%w: %q", ErrNoLadder, name)
	}
	steps, err := json.Marshal(ladder.Steps)
	if err != nil {
		return db.Remediation{}, fmt.Errorf("encode the ladder: %w", err)
	}
	auto, err := q.NodeRemediationSettings(ctx, s.Node)
	if err != nil {
		return db.Remediation{}, fmt.Errorf("read the node's remediation settings: %w", err)
	}
	row, err := q.OpenRemediation(ctx, db.OpenRemediationParams{
		ID: uuid.Must(uuid.NewV7()), TenantID: s.Tenant, NodeID: s.Node, GpuUuid: s.GPUUUID, GpuSerial: s.GPUSerial,
		ReasonCheck: r.Check, ReasonCode: r.Code, ReasonDetail: r.Detail, Ladder: name, PolicyVersion: p.Version, Steps: steps,
		FailureDomain: auto.FailureDomain, PrincipalID: s.Principal,
	})
	if errors.Is(err, pgx.ErrNoRows) {
		return db.Remediation{}, ErrInProgress
	}
	if err != nil {
		return db.Remediation{}, fmt.Errorf("open a remediation of node %s: %w", s.Node, err)
	}
	if err := enqueue.IDs(ctx, q, Kind, row.ID); err != nil {
		return db.Remediation{}, err
	}
	return row, event.Emit(ctx, q, s.Tenant, Started(row))
}

// Automatic reports whether health may start a remediation of the node by itself: none of its
// pools turned that off.
func Automatic(ctx context.Context, q *db.Queries, node uuid.UUID) (bool, error) {
	a, err := q.NodeRemediationSettings(ctx, node)
	if err != nil {
		return false, fmt.Errorf("read the node's remediation settings: %w", err)
	}
	return a.Auto, nil
}
