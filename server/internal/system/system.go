// Package system implements bettercompute.system.v1.SystemService: what a client can learn about
// the deployment before it authenticates.
package system

import (
	"context"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	systemv1 "github.com/better-compute/better-compute/gen/go/bettercompute/system/v1"
	"github.com/better-compute/better-compute/gen/go/bettercompute/system/v1/systemv1connect"
	"github.com/better-compute/better-compute/internal/buildinfo"
)

// Service answers SystemService calls.
type Service struct {
	trustDomain string
	now         func() time.Time
}

var _ systemv1connect.SystemServiceHandler = (*Service)(nil)

// New returns the service for a deployment with the given trust domain (empty until the PKI is
// initialised).
func New(trustDomain string) *Service {
	return &Service{trustDomain: trustDomain, now: time.Now}
}

// Info reports the version, build, trust domain and server clock.
func (s *Service) Info(context.Context, *systemv1.InfoRequest) (*systemv1.InfoResponse, error) {
	return &systemv1.InfoResponse{
		Version:     buildinfo.Version,
		Build:       buildinfo.Build(),
		TrustDomain: s.trustDomain,
		ServerTime:  timestamppb.New(s.now()),
	}, nil
}
