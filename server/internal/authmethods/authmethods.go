// Package authmethods implements bettercompute.auth.v1.AuthService: a tenant's auth methods
// (OIDC and JWT, with their binding rules), the sign-ins through them (the CLI's code flow with
// PKCE, the device flow, a machine's token exchange, and the dashboard's browser sign-in on
// POST {basePath}/auth/login and GET /auth/callback), the sessions they start, and signing out. The
// management methods act in the caller's tenant: other tenants' methods and sessions are simply
// not found. The sign-ins are public: the provider's verified token is the credential, and
// package sso verifies it.
package authmethods

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	"connectrpc.com/connect"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/better-compute/better-compute/gen/db"
	authv1 "github.com/better-compute/better-compute/gen/go/bettercompute/auth/v1"
	"github.com/better-compute/better-compute/gen/go/bettercompute/auth/v1/authv1connect"
	"github.com/better-compute/better-compute/internal/admission"
	"github.com/better-compute/better-compute/internal/apierr"
	"github.com/better-compute/better-compute/internal/auth"
	"github.com/better-compute/better-compute/internal/auth/sso"
	"github.com/better-compute/better-compute/internal/database"
	"github.com/better-compute/better-compute/internal/quota"
	"github.com/better-compute/better-compute/internal/seal"
)

// DefaultTokenTTL bounds the sessions of auth/exchangeToken unless configured.
const DefaultTokenTTL = time.Hour

// MaxPerTenant caps a tenant's auth methods: each is a provider the API talks to.
const MaxPerTenant = 16

// capName names the cap in refusals and in its advisory lock.
const capName = "authMethods"

// Options configure the service.
type Options struct {
	// AllowPrivateIssuers lets issuer and JWKS URLs be http and name private addresses (config
	// auth.allowPrivateIssuers).
	AllowPrivateIssuers bool
	// Sessions are the session lifetimes: of the sessions sign-ins start, and for sessions/list
	// to leave out idle ones.
	Sessions auth.SessionLifetimes
	// TokenTTL bounds the sessions auth/exchangeToken starts (config auth.tokenTTL).
	TokenTTL time.Duration
	// SSO verifies providers' tokens and talks to them (discovery, keys, code and device flows).
	SSO *sso.Client
	// BaseURL and BasePath are the deployment's public URL and the API's base path: the
	// dashboard's sign-in returns to {BaseURL}{BasePath}/auth/callback, and its cookies are
	// Secure when BaseURL is https.
	BaseURL, BasePath string
	// Limits are the per-tenant caps (the guard attaches them to API calls; the browser routes
	// are not API calls).
	Limits quota.Limits
	// Flows bound the unfinished sign-ins anonymous callers can start (config auth.flows.*);
	// zero fields take their defaults.
	Flows FlowLimits
	// Bridge authenticates a browser's session cookie, so a browser sign-in does not replace a
	// live session; nil checks nothing.
	Bridge auth.Bridge
	Logger *slog.Logger
}

// Service answers AuthService calls.
type Service struct {
	pool          *pgxpool.Pool
	admit         *admission.Admitter
	sealer        *seal.Sealer
	allowPrivate  bool
	sessions      auth.SessionLifetimes
	tokenTTL      time.Duration
	sso           *sso.Client
	callbackURL   string
	basePath      string
	secureCookies bool
	limits        quota.Limits
	flows         FlowLimits
	bridge        auth.Bridge
	log           *slog.Logger
}

var _ authv1connect.AuthServiceHandler = (*Service)(nil)

// New returns the service. sealer seals client secrets (auth.NewClientSecretSealer of the
// deployment secret, which the sign-in opens them with).
func New(pool *pgxpool.Pool, admit *admission.Admitter, sealer *seal.Sealer, opts Options) *Service {
	if opts.TokenTTL <= 0 {
		opts.TokenTTL = DefaultTokenTTL
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.SSO == nil {
		opts.SSO = sso.New(sso.Options{AllowPrivate: opts.AllowPrivateIssuers, Logger: opts.Logger})
	}
	base := strings.TrimSuffix(opts.BaseURL, "/")
	s := &Service{
		pool: pool, admit: admit, sealer: sealer, allowPrivate: opts.AllowPrivateIssuers, sessions: opts.Sessions,
		tokenTTL: opts.TokenTTL, sso: opts.SSO, basePath: opts.BasePath, limits: opts.Limits, log: opts.Logger,
		flows: opts.Flows.withDefaults(), bridge: opts.Bridge,
	}
	if base != "" {
		s.callbackURL, s.secureCookies = base+opts.BasePath+CallbackPath, strings.HasPrefix(base, "https://")
	}
	return s
}

// CreateAuthMethod adds an auth method to the caller's tenant, its client secret sealed. Its
// issuer must not be another method's with other keys, and a method that could sign in as an
// owner takes an owner to add (reach.go).
func (s *Service) CreateAuthMethod(ctx context.Context, req *authv1.CreateAuthMethodRequest) (*authv1.CreateAuthMethodResponse, error) {
	m, err := s.validate(req.GetAuthMethod(), true)
	if err != nil {
		return nil, err
	}
	rules, paths, err := encode(m)
	if err != nil {
		return nil, err
	}
	p := auth.Caller(ctx)
	return admission.Do(ctx, s.admit, req, func(ctx context.Context, tx *admission.Tx) (*authv1.CreateAuthMethodResponse, error) {
		if err := checkCap(ctx, tx.Q, p.TenantID); err != nil {
			return nil, err
		}
		if err := checkRuleTenants(ctx, tx.Q, p.TenantID, p.RootTenant, m.GetRules()); err != nil {
			return nil, err
		}
		if err := checkReach(ctx, tx.Q, p, m, nil, fmt.Sprintf("create auth method %q", m.GetName())); err != nil {
			return nil, err
		}
		id := uuid.Must(uuid.NewV7())
		row, err := tx.Q.CreateAuthMethod(ctx, db.CreateAuthMethodParams{
			ID: id, TenantID: p.TenantID, Name: m.GetName(), DisplayName: m.GetDisplayName(), Kind: kindToDB(m.GetKind()),
			Issuer: m.GetIssuer(), ClientID: m.GetClientId(), ClientSecretSealed: auth.SealClientSecret(s.sealer, id, m.GetClientSecret()),
			Scopes: m.GetScopes(), RedirectUris: m.GetRedirectUris(), JwksUrl: m.GetJwksUrl(), Audiences: m.GetAudiences(),
			ClaimPaths: paths, Rules: rules,
		})
		if err != nil {
			if database.IsUniqueViolation(err) {
				return nil, apierr.AlreadyExists("an auth method named %q already exists in the tenant", m.GetName())
			}
			return nil, fmt.Errorf("create auth method %q: %w", m.GetName(), err)
		}
		tx.Target("authMethod", row.Name)
		out, err := toProto(row)
		if err != nil {
			return nil, err
		}
		return &authv1.CreateAuthMethodResponse{AuthMethod: out}, nil
	})
}

// checkCap refuses a create past MaxPerTenant. The advisory lock makes concurrent creates in a
// tenant count one another.
func checkCap(ctx context.Context, q *db.Queries, tenant uuid.UUID) error {
	if err := q.LockTenantLimit(ctx, db.LockTenantLimitParams{LimitName: capName, TenantID: tenant}); err != nil {
		return fmt.Errorf("lock tenant cap %s: %w", capName, err)
	}
	n, err := q.CountAuthMethods(ctx, tenant)
	if err != nil {
		return fmt.Errorf("count auth methods: %w", err)
	}
	if n >= MaxPerTenant {
		return &apierr.Error{Code: connect.CodeResourceExhausted, Msg: fmt.Sprintf(
			"%s: the tenant has %d auth methods and may have at most %d; delete some first", capName, n, MaxPerTenant)}
	}
	return nil
}

// ListAuthMethods lists the caller's tenant's auth methods by name, without their secrets.
func (s *Service) ListAuthMethods(ctx context.Context, _ *authv1.ListAuthMethodsRequest) (*authv1.ListAuthMethodsResponse, error) {
	rows, err := db.New(s.pool).ListAuthMethods(ctx, auth.Caller(ctx).TenantID)
	if err != nil {
		return nil, fmt.Errorf("list auth methods: %w", err)
	}
	res := &authv1.ListAuthMethodsResponse{AuthMethods: []*authv1.AuthMethod{}}
	for _, r := range rows {
		m, err := toProto(r)
		if err != nil {
			return nil, err
		}
		res.AuthMethods = append(res.AuthMethods, m)
	}
	return res, nil
}

// UpdateAuthMethod replaces a method's settings and rules; an empty client secret keeps the
// stored one. As on create, the issuer is checked, and a method that could sign in as an owner
// takes an owner to change (reach.go).
func (s *Service) UpdateAuthMethod(ctx context.Context, req *authv1.UpdateAuthMethodRequest) (*authv1.UpdateAuthMethodResponse, error) {
	m, err := s.validate(req.GetAuthMethod(), false)
	if err != nil {
		return nil, err
	}
	rules, paths, err := encode(m)
	if err != nil {
		return nil, err
	}
	p := auth.Caller(ctx)
	return admission.Do(ctx, s.admit, req, func(ctx context.Context, tx *admission.Tx) (*authv1.UpdateAuthMethodResponse, error) {
		tx.Target("authMethod", m.GetName())
		// The tenant first, as every IAM change locks it, then the method.
		if err := tx.Q.LockTenant(ctx, p.TenantID); err != nil {
			return nil, fmt.Errorf("lock tenant %s: %w", p.TenantID, err)
		}
		old, err := tx.Q.LockAuthMethodByName(ctx, db.LockAuthMethodByNameParams{TenantID: p.TenantID, Name: m.GetName()})
		if err != nil {
			return nil, apierr.NotFoundIfNoRows(err, "auth method %q not found", m.GetName())
		}
		secret := old.ClientSecretSealed
		switch {
		case m.GetKind() == authv1.AuthMethodKind_AUTH_METHOD_KIND_JWT:
			secret = []byte{}
		case m.GetClientSecret() != "":
			secret = auth.SealClientSecret(s.sealer, old.ID, m.GetClientSecret())
		case len(secret) == 0:
			return nil, apierr.InvalidArgument("auth_method.client_secret", "required for OIDC: the method has none stored")
		}
		if err := checkRuleTenants(ctx, tx.Q, p.TenantID, p.RootTenant, m.GetRules()); err != nil {
			return nil, err
		}
		if err := checkReach(ctx, tx.Q, p, m, &old.ID, fmt.Sprintf("change auth method %q", m.GetName())); err != nil {
			return nil, err
		}
		row, err := tx.Q.UpdateAuthMethod(ctx, db.UpdateAuthMethodParams{
			TenantID: p.TenantID, ID: old.ID, DisplayName: m.GetDisplayName(), Kind: kindToDB(m.GetKind()),
			Issuer: m.GetIssuer(), ClientID: m.GetClientId(), ClientSecretSealed: secret,
			Scopes: m.GetScopes(), RedirectUris: m.GetRedirectUris(), JwksUrl: m.GetJwksUrl(), Audiences: m.GetAudiences(),
			ClaimPaths: paths, Rules: rules,
		})
		if err != nil {
			return nil, fmt.Errorf("update auth method %q: %w", m.GetName(), err)
		}
		out, err := toProto(row)
		if err != nil {
			return nil, err
		}
		return &authv1.UpdateAuthMethodResponse{AuthMethod: out}, nil
	})
}

// DeleteAuthMethod deletes a method and ends the sessions it started.
func (s *Service) DeleteAuthMethod(ctx context.Context, req *authv1.DeleteAuthMethodRequest) (*authv1.DeleteAuthMethodResponse, error) {
	if !methodName.MatchString(req.GetName()) {
		return nil, apierr.InvalidArgument("name", "must be 1 to 32 lower-case letters, digits and hyphens, starting with a letter")
	}
	p := auth.Caller(ctx)
	return admission.Do(ctx, s.admit, req, func(ctx context.Context, tx *admission.Tx) (*authv1.DeleteAuthMethodResponse, error) {
		tx.Target("authMethod", req.GetName())
		old, err := tx.Q.LockAuthMethodByName(ctx, db.LockAuthMethodByNameParams{TenantID: p.TenantID, Name: req.GetName()})
		if err != nil {
			return nil, apierr.NotFoundIfNoRows(err, "auth method %q not found", req.GetName())
		}
		if err := checkDeleteReach(ctx, tx.Q, p, old.ID, fmt.Sprintf("delete auth method %q", req.GetName())); err != nil {
			return nil, err
		}
		ended, err := tx.Q.EndAuthMethodSessions(ctx, db.EndAuthMethodSessionsParams{TenantID: p.TenantID, Name: req.GetName()})
		if err != nil {
			return nil, fmt.Errorf("end the sessions of auth method %q: %w", req.GetName(), err)
		}
		if _, err := tx.Q.DeleteAuthMethod(ctx, db.DeleteAuthMethodParams{TenantID: p.TenantID, Name: req.GetName()}); err != nil {
			return nil, apierr.NotFoundIfNoRows(err, "auth method %q not found", req.GetName())
		}
		return &authv1.DeleteAuthMethodResponse{SessionsEnded: ended}, nil
	})
}

// ListLoginMethods names a tenant's OIDC methods; an unknown tenant has none, so the answer
// does not tell which tenants exist.
func (s *Service) ListLoginMethods(ctx context.Context, req *authv1.ListLoginMethodsRequest) (*authv1.ListLoginMethodsResponse, error) {
	t := req.GetTenant()
	if t == "" || len(t) > 64 {
		return nil, apierr.InvalidArgument("tenant", "required: the tenant's name or id")
	}
	params := db.ListLoginMethodsParams{TenantName: t}
	if id, err := uuid.Parse(t); err == nil {
		params = db.ListLoginMethodsParams{TenantID: &id}
	}
	rows, err := db.New(s.pool).ListLoginMethods(ctx, params)
	if err != nil {
		return nil, fmt.Errorf("list login methods: %w", err)
	}
	res := &authv1.ListLoginMethodsResponse{Methods: []*authv1.LoginMethod{}}
	for _, r := range rows {
		res.Methods = append(res.Methods, &authv1.LoginMethod{
			Name: r.Name, DisplayName: orDefault(r.DisplayName, r.Name), DeviceFlow: s.offersDevice(ctx, r.Issuer),
		})
	}
	return res, nil
}

// discoveryWait bounds how long auth/loginMethods waits for a provider's discovery document
// (cached for an hour once fetched) to say whether it offers the device flow.
const discoveryWait = 2 * time.Second

// offersDevice says whether the issuer's discovery document names a device authorization
// endpoint; false when it cannot be had in time.
func (s *Service) offersDevice(ctx context.Context, issuer string) bool {
	ctx, cancel := context.WithTimeout(ctx, discoveryWait)
	defer cancel()
	p, err := s.sso.Discovery().Provider(ctx, issuer)
	return err == nil && p.DeviceAuthorizationEndpoint != ""
}

// encode returns a validated method's rules, in priority order, and claim paths as the database
// stores them.
func encode(m *authv1.AuthMethod) (rules, paths []byte, err error) {
	sorted := slices.Clone(m.GetRules())
	slices.SortStableFunc(sorted, func(a, b *authv1.BindingRule) int { return cmp.Compare(a.GetPriority(), b.GetPriority()) })
	if rules, err = auth.EncodeRules(sorted); err != nil {
		return nil, nil, err
	}
	if paths, err = auth.EncodeClaimPaths(m.GetClaimPaths()); err != nil {
		return nil, nil, err
	}
	return rules, paths, nil
}

func kindToDB(k authv1.AuthMethodKind) string {
	if k == authv1.AuthMethodKind_AUTH_METHOD_KIND_JWT {
		return "jwt"
	}
	return "oidc"
}

// toProto is a stored method as the API shows it: never its client secret.
func toProto(r db.AuthMethod) (*authv1.AuthMethod, error) {
	rules, err := auth.DecodeRules(r.Rules)
	if err != nil {
		return nil, fmt.Errorf("auth method %s: %w", r.ID, err)
	}
	paths, err := auth.DecodeClaimPaths(r.ClaimPaths)
	if err != nil {
		return nil, fmt.Errorf("auth method %s: %w", r.ID, err)
	}
	kind := authv1.AuthMethodKind_AUTH_METHOD_KIND_OIDC
	if r.Kind == "jwt" {
		kind = authv1.AuthMethodKind_AUTH_METHOD_KIND_JWT
	}
	return &authv1.AuthMethod{
		Id: r.ID.String(), TenantId: r.TenantID.String(), Name: r.Name, DisplayName: r.DisplayName, Kind: kind,
		Issuer: r.Issuer, ClientId: r.ClientID, Scopes: r.Scopes, RedirectUris: r.RedirectUris, JwksUrl: r.JwksUrl,
		Audiences: r.Audiences, ClaimPaths: paths, Rules: rules,
		CreateTime: timestamppb.New(r.CreatedAt), UpdateTime: timestamppb.New(r.UpdatedAt),
	}, nil
}
