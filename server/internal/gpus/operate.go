package gpus

import (
	"context"

	"connectrpc.com/connect"

	gpusv1 "github.com/better-compute/better-compute/gen/go/bettercompute/gpus/v1"
	"github.com/better-compute/better-compute/internal/apierr"
)

// notYet answers the methods that change a GPU's health until they are written: they share the
// health reconciler's evaluation of a GPU's signals, which is being built with it.
func notYet(method string) error {
	return &apierr.Error{Code: connect.CodeUnimplemented, Msg: "gpus/" + method + " is not implemented yet"}
}

// Quarantine takes a GPU out of service by hand (gpus/quarantine). Not implemented yet.
func (s *Service) Quarantine(context.Context, *gpusv1.QuarantineRequest) (*gpusv1.QuarantineResponse, error) {
	return nil, notYet("quarantine")
}

// Clear puts a GPU back in service (gpus/clear). Not implemented yet.
func (s *Service) Clear(context.Context, *gpusv1.ClearRequest) (*gpusv1.ClearResponse, error) {
	return nil, notYet("clear")
}
