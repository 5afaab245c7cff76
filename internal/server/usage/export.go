package usage

import (
	"context"
	"errors"

	"connectrpc.com/connect"

	usagev1 "github.com/better-compute/better-compute/gen/go/bettercompute/usage/v1"
)

// Export returns a period's usage, encoded for a billing system.
func (s *Service) Export(context.Context, *usagev1.ExportRequest) (*usagev1.ExportResponse, error) {
	return nil, connect.NewError(connect.CodeUnimplemented, errors.New("usage/export is being built"))
}
