package authmethods

import (
	"context"
	"time"

	authv1 "github.com/better-compute/better-compute/gen/go/bettercompute/auth/v1"
	"github.com/better-compute/better-compute/internal/apierr"
	"github.com/better-compute/better-compute/internal/auth"
)

// maxJWTBytes bounds a machine's token: workload identity tokens are a few kilobytes.
const maxJWTBytes = 16 << 10

// ExchangeToken signs a machine in with a JWT of its platform: verified against the JWT
// method (issuer, audiences, expiry), mapped by its rules, and given a session that ends with
// the token, at most auth.tokenTTL from now.
func (s *Service) ExchangeToken(ctx context.Context, req *authv1.ExchangeTokenRequest) (*authv1.ExchangeTokenResponse, error) {
	if req.GetToken() == "" || len(req.GetToken()) > maxJWTBytes {
		return nil, apierr.InvalidArgument("token", "must be a JWT of at most %d bytes", maxJWTBytes)
	}
	m, err := s.loginMethod(ctx, req.GetTenant(), req.GetMethod(), "jwt")
	if err != nil {
		return nil, err
	}
	claims, err := s.sso.VerifyJWT(ctx, m.verifier(), req.GetToken())
	if err != nil {
		return nil, refused("token exchange through "+m.row.Name, err)
	}
	expires := time.Now().Add(s.tokenTTL)
	if exp, ok, _ := claims.Time("exp"); ok && exp.Before(expires) {
		expires = exp
	}
	login, err := s.signIn(ctx, m, claims, auth.SessionToken, expires)
	if err != nil {
		return nil, err
	}
	return &authv1.ExchangeTokenResponse{Login: login}, nil
}
