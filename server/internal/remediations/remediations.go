// Package remediations implements bettercompute.remediations.v1.RemediationsService: the
// remediations of the caller's tenant's nodes (issue 35). The controller
// (workers/internal/remediator) climbs their ladders; this package lists them (List, Get),
// starts them by hand (Create), cancels them (Cancel) and puts the hardware of one that ended in
// service back in service (ReturnFromService). Every statement binds the caller's tenant, so
// another tenant's remediation is simply not found.
package remediations

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/better-compute/better-compute/gen/db"
	remediationsv1 "github.com/better-compute/better-compute/gen/go/bettercompute/remediations/v1"
	"github.com/better-compute/better-compute/gen/go/bettercompute/remediations/v1/remediationsv1connect"
	"github.com/better-compute/better-compute/internal/admission"
	"github.com/better-compute/better-compute/internal/apierr"
	"github.com/better-compute/better-compute/internal/auth"
	"github.com/better-compute/better-compute/internal/event"
	"github.com/better-compute/better-compute/internal/fleet"
	"github.com/better-compute/better-compute/internal/gpuhealth"
	"github.com/better-compute/better-compute/internal/gpustate"
	"github.com/better-compute/better-compute/internal/page"
	"github.com/better-compute/better-compute/internal/remediation"
)

// Limits of the requests, as remediations.proto documents them.
const (
	// MaxReasonLen bounds an operator's reason for a remediation, in characters.
	MaxReasonLen = 500
	// maxGPUUUIDLen bounds a GPU UUID (gpus.v1's rule).
	maxGPUUUIDLen = 128
)

// Ladders an operator's remediation climbs by default: a GPU reset for a GPU, a reboot for a node.
const (
	DefaultGPULadder  = "reset"
	DefaultNodeLadder = "reboot"
)

// Service answers RemediationsService calls.
type Service struct {
	pool  *pgxpool.Pool
	admit *admission.Admitter
	// policy is the remediation policy whose ladders Create offers.
	policy remediation.Policy
	// health decides a GPU's health after ReturnFromService clears it, as gpus/clear does.
	health gpuhealth.Policy
}

var _ remediationsv1connect.RemediationsServiceHandler = (*Service)(nil)

// New returns the service.
func New(pool *pgxpool.Pool, admit *admission.Admitter) *Service {
	return &Service{pool: pool, admit: admit, policy: remediation.DefaultPolicy(), health: gpuhealth.DefaultPolicy()}
}

// checkGPUUUID validates an optional GPU UUID of a request.
func checkGPUUUID(s string) error {
	if len(s) > maxGPUUUIDLen {
		return apierr.InvalidArgument("gpu_uuid", "must be a GPU UUID of at most %d characters", maxGPUUUIDLen)
	}
	for _, c := range s {
		if c < 0x21 || c > 0x7e {
			return apierr.InvalidArgument("gpu_uuid", "must be a GPU UUID (printable characters, no spaces), got %q", s)
		}
	}
	return nil
}

// Create starts a remediation of a node of the caller's tenant by hand (remediations/create):
// remediation.OpenLadder with the reason "manual" and the operator's words, in the call's
// transaction; the controller is woken after the commit.
func (s *Service) Create(ctx context.Context, req *remediationsv1.CreateRequest) (*remediationsv1.CreateResponse, error) {
	nodeID, err := apierr.ParseID("node_id", req.GetNodeId())
	errs := []error{err, checkGPUUUID(req.GetGpuUuid())}
	if n := utf8.RuneCountInString(req.GetReason()); n == 0 || n > MaxReasonLen {
		errs = append(errs, apierr.InvalidArgument("reason", "must be 1 to %d characters, got %d", MaxReasonLen, n))
	}
	ladder := req.GetLadder()
	switch {
	case ladder == "" && req.GetGpuUuid() != "":
		ladder = DefaultGPULadder
	case ladder == "":
		ladder = DefaultNodeLadder
	}
	if _, ok := s.policy.Ladders[ladder]; !ok {
		names := make([]string, 0, len(s.policy.Ladders))
		for n := range s.policy.Ladders {
			names = append(names, n)
		}
		slices.Sort(names)
		errs = append(errs, apierr.InvalidArgument("ladder", "must be one of the policy's ladders %q, got %q", names, ladder))
	}
	if err := apierr.Join(errs...); err != nil {
		return nil, err
	}
	p := auth.Caller(ctx)
	return admission.Do(ctx, s.admit, req, func(ctx context.Context, tx *admission.Tx) (*remediationsv1.CreateResponse, error) {
		tx.Target("node", nodeID)
		n, err := tx.Q.LockNodeOfTenant(ctx, db.LockNodeOfTenantParams{TenantID: p.TenantID, ID: nodeID})
		if err != nil {
			return nil, apierr.NotFoundIfNoRows(err, "node %s not found", nodeID)
		}
		if n.State == fleet.StateRetired {
			return nil, apierr.FailedPreconditionField("node_id", "node %s is retired", nodeID)
		}
		subject := remediation.Subject{Tenant: p.TenantID, Node: nodeID, Principal: &p.ID}
		if u := req.GetGpuUuid(); u != "" {
			g, err := tx.Q.GetGPU(ctx, db.GetGPUParams{TenantID: p.TenantID, Uuid: u})
			if err != nil && !errors.Is(err, pgx.ErrNoRows) {
				return nil, fmt.Errorf("read GPU %s: %w", u, err)
			}
			if err != nil || g.Device.NodeID != nodeID {
				return nil, apierr.InvalidArgument("gpu_uuid", "node %s has no GPU %s", nodeID, u)
			}
			subject.GPUUUID, subject.GPUSerial = u, g.Device.Serial
		}
		reason := remediation.Reason{Check: remediation.CheckManual, Detail: req.GetReason()}
		r, err := remediation.OpenLadder(ctx, tx.Q, subject, reason, s.policy, ladder)
		if errors.Is(err, remediation.ErrInProgress) {
			return nil, apierr.FailedPreconditionField("node_id", "node %s has a remediation in progress; cancel it first", nodeID)
		}
		if err != nil {
			return nil, err
		}
		tx.Wake(remediation.Kind)
		out, err := toProto(r, n.Hostname)
		if err != nil {
			return nil, err
		}
		return &remediationsv1.CreateResponse{Remediation: out}, nil
	})
}

// Get returns a remediation of the caller's tenant.
func (s *Service) Get(ctx context.Context, req *remediationsv1.GetRequest) (*remediationsv1.GetResponse, error) {
	id, err := apierr.ParseID("id", req.GetId())
	if err != nil {
		return nil, err
	}
	row, err := db.New(s.pool).GetRemediation(ctx, db.GetRemediationParams{TenantID: auth.Caller(ctx).TenantID, ID: id})
	if err != nil {
		return nil, apierr.NotFoundIfNoRows(err, "remediation %s not found", id)
	}
	out, err := toProto(row.Remediation, row.Hostname)
	if err != nil {
		return nil, err
	}
	return &remediationsv1.GetResponse{Remediation: out}, nil
}

// List lists the caller's tenant's remediations that match every filter, by id (oldest first).
func (s *Service) List(ctx context.Context, req *remediationsv1.ListRequest) (*remediationsv1.ListResponse, error) {
	params := db.ListRemediationsParams{TenantID: auth.Caller(ctx).TenantID, GpuUuid: req.GetGpuUuid()}
	var errs []error
	if st := req.GetState(); st != remediationsv1.State_STATE_UNSPECIFIED {
		state, ok := stateOf(st)
		if !ok {
			errs = append(errs, apierr.InvalidArgument("state", "must be a remediation state, got %v", st))
		}
		params.State = state
	}
	nodeID, err := apierr.ParseOptionalID("node_id", req.GetNodeId())
	errs = append(errs, err, checkGPUUUID(req.GetGpuUuid()))
	params.NodeID = nodeID
	size, err := page.Size(req.GetPageSize())
	errs = append(errs, err)
	after, err := page.Parse(req.GetPageToken(), uuid.Nil)
	errs = append(errs, err)
	if err := apierr.Join(errs...); err != nil {
		return nil, err
	}
	params.After, params.Lim = after, size+1
	rows, err := db.New(s.pool).ListRemediations(ctx, params)
	if err != nil {
		return nil, fmt.Errorf("list remediations: %w", err)
	}
	rows, next := page.Next(rows, size, func(r db.ListRemediationsRow) uuid.UUID { return r.Remediation.ID })
	res := &remediationsv1.ListResponse{NextPageToken: next, Remediations: make([]*remediationsv1.Remediation, 0, len(rows))}
	for _, r := range rows {
		out, err := toProto(r.Remediation, r.Hostname)
		if err != nil {
			return nil, err
		}
		res.Remediations = append(res.Remediations, out)
	}
	return res, nil
}

// end ends a remediation of the caller's tenant by hand in the call's transaction: it is locked,
// checked to be in one of from (else failed_precondition, with rule), moved to state with an
// entry for its current step (outcome state, the caller named in the detail), and the tenant's
// waiting remediations woken. before runs on the locked row first.
func (s *Service) end(ctx context.Context, tx *admission.Tx, rawID string, from []string, state, rule string,
	before func(db.Remediation) error,
) (db.Remediation, error) {
	id, err := apierr.ParseID("id", rawID)
	if err != nil {
		return db.Remediation{}, err
	}
	p := auth.Caller(ctx)
	tx.Target("remediation", id)
	r, err := tx.Q.LockRemediationOfTenant(ctx, db.LockRemediationOfTenantParams{TenantID: p.TenantID, ID: id})
	if err != nil {
		return r, apierr.NotFoundIfNoRows(err, "remediation %s not found", id)
	}
	if !slices.Contains(from, r.State) {
		return r, apierr.FailedPrecondition("remediation %s is %s: %s", id, r.State, rule)
	}
	if before != nil {
		if err := before(r); err != nil {
			return r, err
		}
	}
	steps, err := remediation.Steps(r)
	if err != nil {
		return r, err
	}
	history, err := remediation.History(r)
	if err != nil {
		return r, err
	}
	now := time.Now().UTC()
	started := now
	if r.StepStartedAt != nil && r.State == remediation.StateRunning {
		started = *r.StepStartedAt
	}
	action := ""
	if int(r.Step) < len(steps) {
		action = steps[r.Step].Action
	}
	history = append(history, remediation.Entry{
		Step: int(r.Step), Action: action, Outcome: state, Detail: fmt.Sprintf("%s by principal %s", state, p.ID),
		StartedAt: started.Format(time.RFC3339Nano), EndedAt: now.Format(time.RFC3339Nano),
	})
	h, err := jsonHistory(history)
	if err != nil {
		return r, err
	}
	r, err = tx.Q.EndRemediationOfTenant(ctx, db.EndRemediationOfTenantParams{TenantID: p.TenantID, ID: id, State: state, History: h})
	if err != nil {
		return r, fmt.Errorf("end remediation %s: %w", id, err)
	}
	woke, err := remediation.WakeWaiting(ctx, tx.Q, p.TenantID)
	if err != nil {
		return r, err
	}
	if woke {
		tx.Wake(remediation.Kind)
	}
	return r, nil
}

// described is a remediation read back with its node's hostname, in the call's transaction.
func (s *Service) described(ctx context.Context, tx *admission.Tx, id uuid.UUID) (*remediationsv1.Remediation, error) {
	row, err := tx.Q.GetRemediation(ctx, db.GetRemediationParams{TenantID: auth.Caller(ctx).TenantID, ID: id})
	if err != nil {
		return nil, apierr.NotFoundIfNoRows(err, "remediation %s not found", id)
	}
	return toProto(row.Remediation, row.Hostname)
}

// Cancel ends a waiting or running remediation (remediations/cancel): it becomes cancelled,
// remediation.cancelled is emitted, and the node is left as it is.
func (s *Service) Cancel(ctx context.Context, req *remediationsv1.CancelRequest) (*remediationsv1.CancelResponse, error) {
	return admission.Do(ctx, s.admit, req, func(ctx context.Context, tx *admission.Tx) (*remediationsv1.CancelResponse, error) {
		r, err := s.end(ctx, tx, req.GetId(), []string{remediation.StateWaiting, remediation.StateRunning}, remediation.StateCancelled,
			"only a waiting or running remediation can be cancelled", nil)
		if err != nil {
			return nil, err
		}
		if err := tx.Emit(r.TenantID, event.RemediationCancelled{RemediationChange: remediation.Change(r)}); err != nil {
			return nil, err
		}
		out, err := s.described(ctx, tx, r.ID)
		if err != nil {
			return nil, err
		}
		return &remediationsv1.CancelResponse{Remediation: out}, nil
	})
}

// ReturnFromService puts the hardware of a remediation in state service back in service
// (remediations/returnFromService; issue 35 calls it gpus/returnFromService): its GPU is
// cleared as gpus/clear does (gpustate.Clear, the caller as principal), its node made ready
// again as nodes/uncordon does (remediation.ReturnNode), and the remediation becomes returned.
func (s *Service) ReturnFromService(ctx context.Context, req *remediationsv1.ReturnFromServiceRequest) (*remediationsv1.ReturnFromServiceResponse, error) {
	p := auth.Caller(ctx)
	return admission.Do(ctx, s.admit, req, func(ctx context.Context, tx *admission.Tx) (*remediationsv1.ReturnFromServiceResponse, error) {
		r, err := s.end(ctx, tx, req.GetId(), []string{remediation.StateService}, remediation.StateReturned,
			"only a remediation in service can be returned from it", func(r db.Remediation) error {
				if r.GpuUuid != "" {
					op, err := gpustate.Clear(ctx, tx.DB(), p.TenantID, r.GpuUuid, p.ID, s.health, time.Now())
					switch {
					case errors.Is(err, gpustate.ErrNotFound):
						// The GPU was replaced (a new UUID): nothing of the old one to clear.
					case err != nil:
						return err
					default:
						for _, kind := range op.Outcome.Wake {
							tx.Wake(kind)
						}
					}
				}
				moved, err := remediation.ReturnNode(ctx, tx.Q, p.TenantID, r.NodeID)
				if err != nil {
					return err
				}
				if moved {
					tx.Wake(fleet.KindLifecycle)
				}
				return nil
			})
		if err != nil {
			return nil, err
		}
		out, err := s.described(ctx, tx, r.ID)
		if err != nil {
			return nil, err
		}
		return &remediationsv1.ReturnFromServiceResponse{Remediation: out}, nil
	})
}
