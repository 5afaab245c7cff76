package gpus

import (
	"context"
	"unicode/utf8"

	"connectrpc.com/connect"

	"github.com/better-compute/better-compute/gen/db"
	gpusv1 "github.com/better-compute/better-compute/gen/go/bettercompute/gpus/v1"
	"github.com/better-compute/better-compute/internal/apierr"
	"github.com/better-compute/better-compute/internal/auth"
)

// maxReasonLen bounds an operator's reason for a quarantine, in characters.
const maxReasonLen = 500

// Quarantine takes a GPU out of service by hand (gpus/quarantine). Not implemented yet: the
// request is validated and the GPU looked up (InvalidArgument, NotFound), then it answers
// Unimplemented.
func (s *Service) Quarantine(ctx context.Context, req *gpusv1.QuarantineRequest) (*gpusv1.QuarantineResponse, error) {
	var reasonErr error
	if n := utf8.RuneCountInString(req.GetReason()); n == 0 || n > maxReasonLen {
		reasonErr = apierr.InvalidArgument("reason", "must be 1 to %d characters, got %d", maxReasonLen, n)
	}
	if err := apierr.Join(checkUUID(req.GetUuid()), reasonErr); err != nil {
		return nil, err
	}
	return nil, s.notYet(ctx, "quarantine", req.GetUuid())
}

// Clear puts a GPU back in service (gpus/clear). Not implemented yet: the request is validated
// and the GPU looked up (InvalidArgument, NotFound), then it answers Unimplemented.
func (s *Service) Clear(ctx context.Context, req *gpusv1.ClearRequest) (*gpusv1.ClearResponse, error) {
	if err := checkUUID(req.GetUuid()); err != nil {
		return nil, err
	}
	return nil, s.notYet(ctx, "clear", req.GetUuid())
}

// notYet answers the methods that change a GPU's health until they are written (they share the
// health reconciler's evaluation of a GPU's signals, which is being built with it): NotFound for
// a GPU the tenant does not have, else Unimplemented.
func (s *Service) notYet(ctx context.Context, method, gpu string) error {
	if _, err := db.New(s.pool).GetGPU(ctx, db.GetGPUParams{TenantID: auth.Caller(ctx).TenantID, Uuid: gpu}); err != nil {
		return apierr.NotFoundIfNoRows(err, "GPU %s not found", gpu)
	}
	return &apierr.Error{Code: connect.CodeUnimplemented, Msg: "gpus/" + method + " is not implemented yet"}
}
