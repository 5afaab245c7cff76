package authmethods

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/better-compute/better-compute/gen/db"
	authv1 "github.com/better-compute/better-compute/gen/go/bettercompute/auth/v1"
	"github.com/better-compute/better-compute/internal/apierr"
	"github.com/better-compute/better-compute/internal/auth"
	"github.com/better-compute/better-compute/internal/auth/sso"
)

// StartDeviceLogin begins a device authorization flow at the method's provider: the device code
// stays here (sealed), the caller gets the user code to show and a handle to poll with.
func (s *Service) StartDeviceLogin(ctx context.Context, req *authv1.StartDeviceLoginRequest) (*authv1.StartDeviceLoginResponse, error) {
	m, err := s.loginMethod(ctx, req.GetTenant(), req.GetMethod(), "oidc")
	if err != nil {
		return nil, err
	}
	p, secret, err := s.provider(ctx, m, "device sign-in")
	if err != nil {
		return nil, err
	}
	da, err := s.sso.StartDevice(ctx, p, m.row.ClientID, secret, m.row.Scopes)
	if err != nil {
		return nil, refused("device sign-in through "+m.row.Name, err)
	}
	expires := time.Now().Add(flowTTL)
	if !da.Expiry.IsZero() && da.Expiry.Before(expires) {
		expires = da.Expiry
	}
	handle := sso.NewState()
	if err := s.startFlow(ctx, m, flowDevice, handle, "", "", da.DeviceCode, "", expires); err != nil {
		return nil, err
	}
	return &authv1.StartDeviceLoginResponse{
		Handle: handle, UserCode: da.UserCode, VerificationUri: da.VerificationURI,
		VerificationUriComplete: da.VerificationURIComplete, IntervalSeconds: int32(max(da.Interval, 5)),
		ExpireTime: timestamppb.New(expires),
	}, nil
}

// PollDeviceLogin asks the provider once whether the user approved; once they have, the flow is
// spent and the sign-in completes.
func (s *Service) PollDeviceLogin(ctx context.Context, req *authv1.PollDeviceLoginRequest) (*authv1.PollDeviceLoginResponse, error) {
	h := req.GetHandle()
	if h == "" || len(h) > 256 {
		return nil, apierr.InvalidArgument("handle", "must be the handle auth/startDeviceLogin returned")
	}
	f, err := db.New(s.pool).GetDeviceFlow(ctx, hashState(h))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, apierr.PermissionDenied("this device sign-in is unknown, already used or expired: start again")
	}
	if err != nil {
		return nil, fmt.Errorf("read the device sign-in: %w", err)
	}
	deviceCode, err := s.sealer.Open(f.SecretSealed, flowAAD(f.StateHash))
	if err != nil {
		return nil, fmt.Errorf("open the device sign-in's code: %w", err)
	}
	m, err := s.methodByID(ctx, f.AuthMethodID)
	if err != nil {
		return nil, err
	}
	p, secret, err := s.provider(ctx, m, "device sign-in")
	if err != nil {
		return nil, err
	}
	poll, err := s.sso.PollDevice(ctx, p, m.row.ClientID, secret, string(deviceCode))
	if err != nil {
		return nil, refused("device sign-in through "+m.row.Name, err)
	}
	switch poll.Status {
	case sso.DevicePending, sso.DeviceSlowDown:
		return &authv1.PollDeviceLoginResponse{Pending: true}, nil
	case sso.DeviceApproved:
	default:
		return nil, apierr.PermissionDenied("the device sign-in was refused or expired at the identity provider: start again")
	}
	// Spent once: of two polls that both saw the approval, one signs in.
	if _, _, err := s.spendFlow(ctx, flowDevice, h); err != nil {
		return nil, err
	}
	claims, err := s.sso.VerifyIDToken(ctx, m.verifier(), poll.IDToken, "")
	if err != nil {
		return nil, refused("device sign-in through "+m.row.Name, err)
	}
	if claims, err = s.withUserInfo(ctx, p, claims, poll.AccessToken); err != nil {
		return nil, refused("device sign-in through "+m.row.Name, err)
	}
	login, err := s.signIn(ctx, m, claims, auth.SessionCLI, time.Time{})
	if err != nil {
		return nil, err
	}
	return &authv1.PollDeviceLoginResponse{Login: login}, nil
}
