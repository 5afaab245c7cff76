package gpus

import (
	"context"
	"errors"
	"time"
	"unicode/utf8"

	"github.com/better-compute/better-compute/gen/db"
	gpusv1 "github.com/better-compute/better-compute/gen/go/bettercompute/gpus/v1"
	"github.com/better-compute/better-compute/internal/admission"
	"github.com/better-compute/better-compute/internal/apierr"
	"github.com/better-compute/better-compute/internal/auth"
	"github.com/better-compute/better-compute/internal/gpustate"
)

// maxReasonLen bounds an operator's reason for a quarantine, in characters.
const maxReasonLen = 500

// Quarantine takes a GPU out of service by hand (gpus/quarantine): gpustate.Quarantine in the
// call's transaction, so the GPU is unhealthy, its history and events written, when the call
// returns.
func (s *Service) Quarantine(ctx context.Context, req *gpusv1.QuarantineRequest) (*gpusv1.QuarantineResponse, error) {
	var reasonErr error
	if n := utf8.RuneCountInString(req.GetReason()); n == 0 || n > maxReasonLen {
		reasonErr = apierr.InvalidArgument("reason", "must be 1 to %d characters, got %d", maxReasonLen, n)
	}
	if err := apierr.Join(checkUUID(req.GetUuid()), reasonErr); err != nil {
		return nil, err
	}
	p := auth.Caller(ctx)
	return admission.Do(ctx, s.admit, req, func(ctx context.Context, tx *admission.Tx) (*gpusv1.QuarantineResponse, error) {
		tx.Target("gpu", req.GetUuid())
		op, err := gpustate.Quarantine(ctx, tx.DB(), p.TenantID, req.GetUuid(), p.ID, req.GetReason(), s.policy, time.Now())
		gpu, err := s.operated(ctx, tx, op, err, req.GetUuid())
		if err != nil {
			return nil, err
		}
		return &gpusv1.QuarantineResponse{Gpu: gpu}, nil
	})
}

// Clear puts a GPU back in service (gpus/clear): gpustate.Clear in the call's transaction.
func (s *Service) Clear(ctx context.Context, req *gpusv1.ClearRequest) (*gpusv1.ClearResponse, error) {
	if err := checkUUID(req.GetUuid()); err != nil {
		return nil, err
	}
	p := auth.Caller(ctx)
	return admission.Do(ctx, s.admit, req, func(ctx context.Context, tx *admission.Tx) (*gpusv1.ClearResponse, error) {
		tx.Target("gpu", req.GetUuid())
		op, err := gpustate.Clear(ctx, tx.DB(), p.TenantID, req.GetUuid(), p.ID, s.policy, time.Now())
		gpu, err := s.operated(ctx, tx, op, err, req.GetUuid())
		if err != nil {
			return nil, err
		}
		return &gpusv1.ClearResponse{Gpu: gpu}, nil
	})
}

// operated turns an operation's result into the GPU as it now is, waking what the change gave
// work once the call commits.
func (s *Service) operated(ctx context.Context, tx *admission.Tx, op gpustate.Operated, err error, uuid string) (*gpusv1.Gpu, error) {
	if errors.Is(err, gpustate.ErrNotFound) {
		return nil, apierr.NotFound("GPU %s not found", uuid)
	}
	if err != nil {
		return nil, err
	}
	for _, kind := range op.Outcome.Wake {
		tx.Wake(kind)
	}
	row, err := tx.Q.GetGPU(ctx, db.GetGPUParams{TenantID: auth.Caller(ctx).TenantID, Uuid: uuid})
	if err != nil {
		return nil, apierr.NotFoundIfNoRows(err, "GPU %s not found", uuid)
	}
	return gpuToProto(row.Device, row.Hostname, row.LeaseID)
}
