package pools

import (
	"context"
	"errors"

	"connectrpc.com/connect"

	poolsv1 "github.com/better-compute/better-compute/gen/go/bettercompute/pools/v1"
)

// Grant shares a pool with another tenant.
func (s *Service) Grant(context.Context, *poolsv1.GrantRequest) (*poolsv1.GrantResponse, error) {
	return nil, connect.NewError(connect.CodeUnimplemented, errors.New("pools/grant is being built"))
}

// RevokeGrant ends a grant.
func (s *Service) RevokeGrant(context.Context, *poolsv1.RevokeGrantRequest) (*poolsv1.RevokeGrantResponse, error) {
	return nil, connect.NewError(connect.CodeUnimplemented, errors.New("pools/revokeGrant is being built"))
}

// ListGrants lists grants.
func (s *Service) ListGrants(context.Context, *poolsv1.ListGrantsRequest) (*poolsv1.ListGrantsResponse, error) {
	return nil, connect.NewError(connect.CodeUnimplemented, errors.New("pools/listGrants is being built"))
}

// ListPreemptions lists preemptions.
func (s *Service) ListPreemptions(context.Context, *poolsv1.ListPreemptionsRequest) (*poolsv1.ListPreemptionsResponse, error) {
	return nil, connect.NewError(connect.CodeUnimplemented, errors.New("pools/listPreemptions is being built"))
}
