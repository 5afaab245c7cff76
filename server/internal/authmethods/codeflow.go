package authmethods

import (
	"context"
	"errors"
	"net"
	"net/url"
	"slices"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/better-compute/better-compute/gen/db"
	authv1 "github.com/better-compute/better-compute/gen/go/bettercompute/auth/v1"
	"github.com/better-compute/better-compute/internal/apierr"
	"github.com/better-compute/better-compute/internal/auth"
	"github.com/better-compute/better-compute/internal/auth/sso"
)

// The kinds of flow (auth_flows.kind).
const (
	flowBrowser = "browser"
	flowCLI     = "cli"
	flowDevice  = "device"
)

// StartLogin begins an authorization code flow with PKCE for a client that receives the
// redirect itself (the CLI on a loopback address).
func (s *Service) StartLogin(ctx context.Context, req *authv1.StartLoginRequest) (*authv1.StartLoginResponse, error) {
	m, err := s.loginMethod(ctx, req.GetTenant(), req.GetMethod(), "oidc")
	if err != nil {
		return nil, err
	}
	if !redirectAllowed(m.row.RedirectUris, req.GetRedirectUri()) {
		return nil, apierr.InvalidArgument("redirect_uri", "must be one of auth method %q's redirect URIs (a loopback one matches whatever its port)", m.row.Name)
	}
	authURL, state, expires, err := s.beginCodeFlow(ctx, m, flowCLI, req.GetRedirectUri(), "")
	if err != nil {
		return nil, err
	}
	return &authv1.StartLoginResponse{AuthorizationUrl: authURL, State: state, ExpireTime: timestamppb.New(expires)}, nil
}

// CompleteLogin finishes a flow StartLogin began, once.
func (s *Service) CompleteLogin(ctx context.Context, req *authv1.CompleteLoginRequest) (*authv1.CompleteLoginResponse, error) {
	if req.GetCode() == "" || len(req.GetCode()) > 2048 {
		return nil, apierr.InvalidArgument("code", "must be the code the provider's redirect carried")
	}
	f, verifier, err := s.spendFlow(ctx, flowCLI, req.GetState())
	if err != nil {
		return nil, err
	}
	login, err := s.completeCodeFlow(ctx, f, verifier, req.GetCode(), auth.SessionCLI)
	if err != nil {
		return nil, err
	}
	return &authv1.CompleteLoginResponse{Login: login}, nil
}

// beginCodeFlow records a code flow of kind and returns the provider's authorization URL, the
// state and when the flow expires.
func (s *Service) beginCodeFlow(ctx context.Context, m *method, kind, redirectURI, returnTo string) (authURL, state string, expires time.Time, err error) {
	p, err := s.sso.Discovery().Provider(ctx, m.row.Issuer)
	if err != nil {
		return "", "", time.Time{}, refused("sign-in through "+m.row.Name, err)
	}
	if err := p.CheckOIDC(); err != nil {
		return "", "", time.Time{}, refused("sign-in through "+m.row.Name, err)
	}
	state, nonce := sso.NewState(), sso.NewNonce()
	verifier, challenge := sso.NewPKCE()
	expires = time.Now().Add(flowTTL)
	if err := s.startFlow(ctx, m, kind, state, redirectURI, nonce, verifier, returnTo, expires); err != nil {
		return "", "", time.Time{}, err
	}
	return sso.AuthorizationURL(p, m.row.ClientID, redirectURI, m.row.Scopes, state, nonce, challenge), state, expires, nil
}

// completeCodeFlow redeems the code of a spent flow (with its PKCE verifier), verifies the ID
// token (issuer, audience, expiry, the flow's nonce), completes its claims from userinfo, and
// signs in.
func (s *Service) completeCodeFlow(ctx context.Context, f db.AuthFlow, verifier, code, kind string) (*authv1.Login, error) {
	m, err := s.methodByID(ctx, f.AuthMethodID)
	if err != nil {
		return nil, err
	}
	p, secret, err := s.provider(ctx, m, "sign-in")
	if err != nil {
		return nil, err
	}
	idToken, accessToken, err := s.sso.Exchange(ctx, p, m.row.ClientID, secret, f.RedirectUri, code, verifier)
	if err != nil {
		return nil, refused("sign-in through "+m.row.Name, err)
	}
	claims, err := s.sso.VerifyIDToken(ctx, m.verifier(), idToken, f.Nonce)
	if err != nil {
		return nil, refused("sign-in through "+m.row.Name, err)
	}
	if claims, err = s.withUserInfo(ctx, p, claims, accessToken); err != nil {
		return nil, refused("sign-in through "+m.row.Name, err)
	}
	return s.signIn(ctx, m, claims, kind, time.Time{})
}

// withUserInfo completes an ID token's claims with the provider's userinfo answer, when it has a
// userinfo endpoint: many providers put groups, email and name only there.
func (s *Service) withUserInfo(ctx context.Context, p *sso.Provider, claims sso.Claims, accessToken string) (sso.Claims, error) {
	if p.UserinfoEndpoint == "" || accessToken == "" {
		return claims, nil
	}
	info, err := s.sso.UserInfo(ctx, p, accessToken)
	if errors.Is(err, sso.ErrNotSupported) {
		return claims, nil
	}
	if err != nil {
		return nil, err
	}
	return sso.MergeUserInfo(claims, info)
}

// redirectAllowed says whether uri is one of the registered redirect URIs; a loopback http one
// matches whatever its port (RFC 8252 7.3), since a native client listens where it can.
func redirectAllowed(registered []string, uri string) bool {
	if uri == "" || len(uri) > 2048 {
		return false
	}
	if slices.Contains(registered, uri) {
		return true
	}
	u, err := url.Parse(uri)
	if err != nil || u.Scheme != "http" || !loopback(u.Hostname()) || u.RawQuery != "" || u.Fragment != "" || u.User != nil {
		return false
	}
	for _, r := range registered {
		ru, err := url.Parse(r)
		if err == nil && ru.Scheme == "http" && ru.Hostname() == u.Hostname() && ru.Path == u.Path {
			return true
		}
	}
	return false
}

func loopback(host string) bool {
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
