package provision

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"connectrpc.com/connect"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	provisionmodulev1 "github.com/better-compute/better-compute/gen/go/bettercompute/modules/provision/v1"
	provisiondb "github.com/better-compute/better-compute/gen/modules/provision/db"
	"github.com/better-compute/better-compute/internal/admission"
	"github.com/better-compute/better-compute/internal/apierr"
	"github.com/better-compute/better-compute/internal/auth"
	"github.com/better-compute/better-compute/internal/page"
	"github.com/better-compute/better-compute/internal/provision"
	"github.com/better-compute/better-compute/internal/reconcile"
)

// CreateMachine records a requested machine and enqueues it for the lifecycle controller.
func (s *service) CreateMachine(ctx context.Context, req *provisionmodulev1.CreateMachineRequest) (*provisionmodulev1.CreateMachineResponse, error) {
	if !namePattern.MatchString(req.GetName()) {
		return nil, apierr.InvalidArgument("name", nameRule)
	}
	if !namePattern.MatchString(req.GetClass()) {
		return nil, apierr.InvalidArgument("class", nameRule)
	}
	p := auth.Caller(ctx)
	return admission.Do(ctx, s.admit, req, func(ctx context.Context, tx *admission.Tx) (*provisionmodulev1.CreateMachineResponse, error) {
		q := provisiondb.New(tx.DB())
		if _, err := q.GetClass(ctx, provisiondb.GetClassParams{TenantID: p.TenantID, Name: req.GetClass()}); err != nil {
			if errors.Is(err, pgx.ErrNoRows) {
				return nil, apierr.InvalidArgument("class", "machine class %q not found", req.GetClass())
			}
			return nil, err
		}
		n, err := q.CountLiveMachines(ctx, p.TenantID)
		if err != nil {
			return nil, err
		}
		if most := int64(s.cfg.MaxMachinesPerTenant); n >= most {
			return nil, &apierr.Error{Code: connect.CodeResourceExhausted, Msg: fmt.Sprintf(
				"modules.provision.maxMachinesPerTenant: the tenant has %d machines and may have at most %d; delete some first", n, most)}
		}
		m, err := q.CreateMachine(ctx, provisiondb.CreateMachineParams{
			ID: uuid.Must(uuid.NewV7()), TenantID: p.TenantID, Class: req.GetClass(), Name: req.GetName(),
		})
		if errors.Is(err, pgx.ErrNoRows) {
			return nil, apierr.AlreadyExists("a machine named %s exists", req.GetName())
		}
		if err != nil {
			return nil, err
		}
		tx.Target("machine", m.ID)
		if err := q.AddMachineStep(ctx, provisiondb.AddMachineStepParams{MachineID: m.ID, State: StateRequested, Detail: "class " + m.Class}); err != nil {
			return nil, err
		}
		if err := reconcile.Enqueue(ctx, tx.Q, Kind, m.ID.String()); err != nil {
			return nil, err
		}
		tx.Wake(Kind)
		steps, err := q.ListMachineSteps(ctx, m.ID)
		if err != nil {
			return nil, err
		}
		return &provisionmodulev1.CreateMachineResponse{Machine: machineProto(m, steps)}, nil
	})
}

// GetMachine returns a machine of the caller's tenant with its steps.
func (s *service) GetMachine(ctx context.Context, req *provisionmodulev1.GetMachineRequest) (*provisionmodulev1.GetMachineResponse, error) {
	id, err := apierr.ParseID("id", req.GetId())
	if err != nil {
		return nil, err
	}
	q := provisiondb.New(s.pool)
	m, err := q.GetMachine(ctx, provisiondb.GetMachineParams{TenantID: auth.Caller(ctx).TenantID, ID: id})
	if err != nil {
		return nil, apierr.NotFoundIfNoRows(err, "machine %s not found", id)
	}
	steps, err := q.ListMachineSteps(ctx, id)
	if err != nil {
		return nil, err
	}
	return &provisionmodulev1.GetMachineResponse{Machine: machineProto(m, steps)}, nil
}

// ListMachines lists the caller tenant's machines by id.
func (s *service) ListMachines(ctx context.Context, req *provisionmodulev1.ListMachinesRequest) (*provisionmodulev1.ListMachinesResponse, error) {
	if c := req.GetClass(); c != "" && !namePattern.MatchString(c) {
		return nil, apierr.InvalidArgument("class", nameRule)
	}
	size, after, err := page.Of(req.GetPageSize(), req.GetPageToken(), uuid.Nil)
	if err != nil {
		return nil, err
	}
	rows, err := provisiondb.New(s.pool).ListMachines(ctx, provisiondb.ListMachinesParams{
		TenantID: auth.Caller(ctx).TenantID, After: after, Class: req.GetClass(), Lim: size + 1,
	})
	if err != nil {
		return nil, err
	}
	rows, next := page.Next(rows, size, func(m provisiondb.ProvisionMachine) uuid.UUID { return m.ID })
	res := &provisionmodulev1.ListMachinesResponse{NextPageToken: next}
	for _, m := range rows {
		res.Machines = append(res.Machines, machineProto(m, nil))
	}
	return res, nil
}

// DeleteMachine moves a machine to deleting and enqueues it; one deleting or further on is
// returned as it is.
func (s *service) DeleteMachine(ctx context.Context, req *provisionmodulev1.DeleteMachineRequest) (*provisionmodulev1.DeleteMachineResponse, error) {
	id, err := apierr.ParseID("id", req.GetId())
	if err != nil {
		return nil, err
	}
	p := auth.Caller(ctx)
	return admission.Do(ctx, s.admit, req, func(ctx context.Context, tx *admission.Tx) (*provisionmodulev1.DeleteMachineResponse, error) {
		tx.Target("machine", id)
		q := provisiondb.New(tx.DB())
		m, err := q.LockMachineOfTenant(ctx, provisiondb.LockMachineOfTenantParams{TenantID: p.TenantID, ID: id})
		if err != nil {
			return nil, apierr.NotFoundIfNoRows(err, "machine %s not found", id)
		}
		if slices.Contains(deletable, m.State) {
			if m, err = q.SetMachineState(ctx, provisiondb.SetMachineStateParams{ID: id, State: StateDeleting, FromState: m.State, Reason: m.Reason}); err != nil {
				return nil, fmt.Errorf("move machine %s to deleting: %w", id, err)
			}
			if err := q.AddMachineStep(ctx, provisiondb.AddMachineStepParams{MachineID: id, State: StateDeleting, Detail: "deletion asked for"}); err != nil {
				return nil, err
			}
			if err := reconcile.Enqueue(ctx, tx.Q, Kind, id.String()); err != nil {
				return nil, err
			}
			tx.Wake(Kind)
		}
		steps, err := q.ListMachineSteps(ctx, id)
		if err != nil {
			return nil, err
		}
		return &provisionmodulev1.DeleteMachineResponse{Machine: machineProto(m, steps)}, nil
	})
}

// PowerCycleMachine resets a machine through its provider and records the step.
func (s *service) PowerCycleMachine(ctx context.Context, req *provisionmodulev1.PowerCycleMachineRequest) (*provisionmodulev1.PowerCycleMachineResponse, error) {
	id, err := apierr.ParseID("id", req.GetId())
	if err != nil {
		return nil, err
	}
	p := auth.Caller(ctx)
	return admission.Do(ctx, s.admit, req, func(ctx context.Context, tx *admission.Tx) (*provisionmodulev1.PowerCycleMachineResponse, error) {
		tx.Target("machine", id)
		q := provisiondb.New(tx.DB())
		m, err := q.LockMachineOfTenant(ctx, provisiondb.LockMachineOfTenantParams{TenantID: p.TenantID, ID: id})
		if err != nil {
			return nil, apierr.NotFoundIfNoRows(err, "machine %s not found", id)
		}
		if !slices.Contains(atProvider, m.State) || m.ProviderID == "" {
			return nil, apierr.FailedPrecondition("machine %s is %s: only booting, joined and ready machines can be power cycled", id, m.State)
		}
		c, err := q.GetClass(ctx, provisiondb.GetClassParams{TenantID: m.TenantID, Name: m.Class})
		if err != nil {
			return nil, fmt.Errorf("read class %s: %w", m.Class, err)
		}
		prov, err := s.open.open(c)
		if err != nil {
			return nil, apierr.FailedPrecondition("machine %s: %v", id, err)
		}
		if err := prov.Power(ctx, m.ProviderID, provision.PowerReset); err != nil {
			return nil, &apierr.Error{Code: connect.CodeUnavailable, Msg: fmt.Sprintf("machine %s: the provider did not reset it: %v", id, err)}
		}
		if err := q.AddMachineStep(ctx, provisiondb.AddMachineStepParams{MachineID: id, State: m.State, Detail: "power cycled"}); err != nil {
			return nil, err
		}
		steps, err := q.ListMachineSteps(ctx, id)
		if err != nil {
			return nil, err
		}
		return &provisionmodulev1.PowerCycleMachineResponse{Machine: machineProto(m, steps)}, nil
	})
}
