package authmethods

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/better-compute/better-compute/gen/db"
	authv1 "github.com/better-compute/better-compute/gen/go/bettercompute/auth/v1"
	iamv1 "github.com/better-compute/better-compute/gen/go/bettercompute/iam/v1"
	"github.com/better-compute/better-compute/internal/apierr"
	"github.com/better-compute/better-compute/internal/auth"
	"github.com/better-compute/better-compute/internal/auth/sso"
)

// flowTTL bounds a sign-in flow: from its start to its completion, the user has this long at
// the provider's login page.
const flowTTL = 10 * time.Minute

// method is a stored auth method, as a sign-in reads it.
type method struct {
	row   db.AuthMethod
	rules []*authv1.BindingRule
	paths *authv1.ClaimPaths
}

// verifier is what verifying the method's tokens needs.
func (m *method) verifier() sso.Method {
	kind := sso.KindOIDC
	if m.row.Kind == "jwt" {
		kind = sso.KindJWT
	}
	return sso.Method{
		Kind: kind, Issuer: m.row.Issuer, ClientID: m.row.ClientID, JWKSURL: m.row.JwksUrl,
		Audiences: m.row.Audiences, ClaimPaths: sso.ClaimPathsFromProto(m.paths),
	}
}

// loginMethod reads the method a public sign-in call names, by its tenant's name or id and its
// name; kind is the kind it must be ("oidc" or "jwt"). An unknown, deleted or suspended tenant, an
// unknown method and one of the other kind are all the same NotFound, so the call tells nothing
// about which.
func (s *Service) loginMethod(ctx context.Context, tenant, name, kind string) (*method, error) {
	if tenant == "" {
		return nil, apierr.InvalidArgument("tenant", "name the tenant (its name or id)")
	}
	if name == "" {
		return nil, apierr.InvalidArgument("method", "name the auth method")
	}
	p := db.GetLoginAuthMethodParams{TenantName: tenant, Name: name}
	if id, err := uuid.Parse(tenant); err == nil {
		p.TenantID = &id
	}
	row, err := db.New(s.pool).GetLoginAuthMethod(ctx, p)
	if errors.Is(err, pgx.ErrNoRows) || (err == nil && row.AuthMethod.Kind != kind) {
		return nil, apierr.NotFound("tenant %q has no %s auth method %q", tenant, kindName(kind), name)
	}
	if err != nil {
		return nil, fmt.Errorf("read auth method %q of tenant %q: %w", name, tenant, err)
	}
	return decodeMethod(row.AuthMethod)
}

// methodByID reads the method a flow in progress was started with.
func (s *Service) methodByID(ctx context.Context, id uuid.UUID) (*method, error) {
	row, err := db.New(s.pool).GetAuthMethodByID(ctx, id)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, apierr.PermissionDenied("the auth method this sign-in started with was deleted")
	}
	if err != nil {
		return nil, fmt.Errorf("read auth method %s: %w", id, err)
	}
	return decodeMethod(row)
}

func decodeMethod(row db.AuthMethod) (*method, error) {
	rules, err := auth.DecodeRules(row.Rules)
	if err != nil {
		return nil, fmt.Errorf("auth method %s: %w", row.ID, err)
	}
	paths, err := auth.DecodeClaimPaths(row.ClaimPaths)
	if err != nil {
		return nil, fmt.Errorf("auth method %s: %w", row.ID, err)
	}
	return &method{row: row, rules: rules, paths: paths}, nil
}

func kindName(kind string) string {
	if kind == "jwt" {
		return "JWT"
	}
	return "OIDC"
}

// refused turns a failed verification or provider call into the caller's error: a token or
// answer that does not verify is Unauthenticated with the reason (sso.Reason: never the token,
// its claims or the provider's URLs), an unreachable or misconfigured provider Unavailable, and
// anything else stays internal.
func refused(what string, err error) error {
	reason := sso.Reason(err)
	switch {
	case reason == "":
		return fmt.Errorf("%s: %w", what, err)
	case errors.Is(err, sso.ErrProvider), errors.Is(err, sso.ErrKeysUnavailable):
		return apierr.Unavailable("%s: %s", what, reason)
	case errors.Is(err, sso.ErrNotSupported), errors.Is(err, sso.ErrMethod):
		return apierr.FailedPrecondition("%s: %s", what, reason)
	default:
		return apierr.Unauthenticated("%s: %s", what, reason)
	}
}

// signIn maps a verified token's claims through the method's binding rules and, when a rule
// matches, signs the principal in (auth.SignIn: just in time, linked by issuer and subject, its
// rule roles replaced) and starts a session of kind ending at expires at the latest. No rule
// matched: PermissionDenied, and nothing is created.
func (s *Service) signIn(ctx context.Context, m *method, claims sso.Claims, kind string, expires time.Time) (*authv1.Login, error) {
	binding, ok := sso.Evaluate(m.rules, sso.ClaimPathsFromProto(m.paths), claims)
	if !ok {
		return nil, apierr.PermissionDenied("no binding rule of auth method %q matches this sign-in: no access", m.row.Name)
	}
	tenant := m.row.TenantID
	if binding.TenantID != "" {
		id, err := uuid.Parse(binding.TenantID)
		if err != nil {
			return nil, fmt.Errorf("auth method %s: rule tenant %q: %w", m.row.ID, binding.TenantID, err)
		}
		tenant = id
	}
	roles := make([]auth.Role, 0, len(binding.Roles))
	for _, r := range binding.Roles {
		if role, ok := auth.RoleFromProto(r); ok {
			roles = append(roles, role)
		}
	}
	paths := sso.ClaimPathsFromProto(m.paths)
	p, err := auth.SignIn(ctx, s.pool, auth.SignInParams{
		Method: auth.SignInMethod{ID: m.row.ID, TenantID: m.row.TenantID, Name: m.row.Name},
		Issuer: claims.Issuer(), Subject: claims.Subject(),
		Email: claims.String(paths.Resolve("email")), Name: claims.String(paths.Resolve("name")),
		TenantID: tenant, Roles: roles,
	})
	if err != nil {
		return nil, err
	}
	sess, err := auth.StartSession(ctx, s.pool, s.sessions, auth.SessionParams{
		TenantID: p.TenantID, PrincipalID: p.ID, AuthMethodID: &m.row.ID, Kind: kind, ExpiresAt: expires,
	})
	if err != nil {
		return nil, fmt.Errorf("start the session of principal %s: %w", p.ID, err)
	}
	out := &authv1.Login{
		SessionToken: sess.Token, ExpireTime: timestamppb.New(sess.ExpiresAt),
		Principal: &iamv1.Principal{Id: p.ID.String(), TenantId: p.TenantID.String(), Kind: iamv1.PrincipalKind_PRINCIPAL_KIND_USER, Name: p.Name},
		Tenant:    &iamv1.Tenant{Id: p.TenantID.String()},
	}
	if t, err := db.New(s.pool).GetTenant(ctx, db.GetTenantParams{TenantID: p.TenantID, ID: p.TenantID}); err == nil {
		out.Tenant.Name, out.Tenant.DisplayName = t.Name, t.DisplayName
	}
	for _, r := range p.Roles {
		out.Roles = append(out.Roles, r.Proto())
	}
	return out, nil
}

// hashState is how a flow's state (or a device flow's handle) is stored and found.
func hashState(state string) []byte {
	sum := sha256.Sum256([]byte(state))
	return sum[:]
}

// flowAAD binds a flow's sealed secret to its row.
func flowAAD(stateHash []byte) []byte { return append([]byte("auth_flow:"), stateHash...) }

// spendFlow spends a flow of kind by its state, once: an unknown, used, expired or tampered
// state is refused alike. It returns the flow and its opened secret.
func (s *Service) spendFlow(ctx context.Context, kind, state string) (db.AuthFlow, string, error) {
	if state == "" || len(state) > 256 {
		return db.AuthFlow{}, "", apierr.InvalidArgument("state", "must be the state the sign-in started with")
	}
	h := hashState(state)
	f, err := db.New(s.pool).SpendAuthFlow(ctx, db.SpendAuthFlowParams{StateHash: h, Kind: kind})
	if errors.Is(err, pgx.ErrNoRows) {
		return db.AuthFlow{}, "", apierr.PermissionDenied("this sign-in is unknown, already used or expired: start again")
	}
	if err != nil {
		return db.AuthFlow{}, "", fmt.Errorf("spend the sign-in flow: %w", err)
	}
	secret, err := s.sealer.Open(f.SecretSealed, flowAAD(h))
	if err != nil {
		return db.AuthFlow{}, "", fmt.Errorf("open the sign-in flow's secret: %w", err)
	}
	return f, string(secret), nil
}

// provider is the method's provider, from its discovery document, and its opened client secret.
func (s *Service) provider(ctx context.Context, m *method, what string) (*sso.Provider, string, error) {
	p, err := s.sso.Discovery().Provider(ctx, m.row.Issuer)
	if err != nil {
		return nil, "", refused(what+" through "+m.row.Name, err)
	}
	secret, err := s.clientSecret(m)
	if err != nil {
		return nil, "", err
	}
	return p, secret, nil
}

// clientSecret opens the method's client secret.
func (s *Service) clientSecret(m *method) (string, error) {
	if len(m.row.ClientSecretSealed) == 0 {
		return "", nil
	}
	secret, err := auth.OpenClientSecret(s.sealer, m.row.ID, m.row.ClientSecretSealed)
	if err != nil {
		return "", fmt.Errorf("open the client secret of auth method %s: %w", m.row.ID, err)
	}
	return secret, nil
}
