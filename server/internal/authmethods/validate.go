package authmethods

import (
	"context"
	"fmt"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/google/uuid"

	"github.com/better-compute/better-compute/gen/db"
	authv1 "github.com/better-compute/better-compute/gen/go/bettercompute/auth/v1"
	"github.com/better-compute/better-compute/internal/apierr"
	"github.com/better-compute/better-compute/internal/auth/sso"
	"github.com/better-compute/better-compute/internal/webhook"
)

// Bounds of an auth method's settings.
const (
	maxDisplayName  = 128
	maxRedirectURIs = 16
	maxScopes       = 32
	maxScopeLen     = 128
	maxAudiences    = 16
	maxAudienceLen  = 256
	maxClientID     = 256
	maxClientSecret = 1024
)

var (
	methodName = regexp.MustCompile(`^[a-z][a-z0-9-]{0,31}$`)
	// scopeToken is an OAuth scope (RFC 6749 §3.3): printable ASCII but space, " and \.
	scopeToken = regexp.MustCompile(`^[\x21\x23-\x5b\x5d-\x7e]+$`)
)

// Default claim paths, which an empty path of a request takes.
const (
	defaultGroupsClaim = "groups"
	defaultEmailClaim  = "email"
	defaultNameClaim   = "name"
)

// checkRuleTenants refuses rules that name a tenant other than the method's, unless the method
// is the root tenant's and the tenant is below it; a tenant that does not exist is refused
// alike.
func checkRuleTenants(ctx context.Context, q *db.Queries, tenant uuid.UUID, root bool, rules []*authv1.BindingRule) error {
	var ids []uuid.UUID
	var where []int
	for i, r := range rules {
		if r.GetTenantId() == "" {
			continue
		}
		id := uuid.MustParse(r.GetTenantId()) // checked by the rule validator
		if !slices.Contains(ids, id) {
			ids = append(ids, id)
			where = append(where, i)
		}
	}
	if len(ids) == 0 {
		return nil
	}
	// One count for all; the per-tenant look only when it falls short, to name the rule.
	n, err := q.CountRuleTenants(ctx, db.CountRuleTenantsParams{Ids: ids, TenantID: tenant, BelowAllowed: root})
	if err != nil {
		return fmt.Errorf("check the rules' tenants: %w", err)
	}
	if int(n) == len(ids) {
		return nil
	}
	for k, id := range ids {
		n, err := q.CountRuleTenants(ctx, db.CountRuleTenantsParams{Ids: []uuid.UUID{id}, TenantID: tenant, BelowAllowed: root})
		if err != nil {
			return fmt.Errorf("check the rules' tenants: %w", err)
		}
		if n == 0 {
			what := "the method's own tenant (or empty)"
			if root {
				what = "the root tenant or a tenant below it"
			}
			return apierr.InvalidArgument(fmt.Sprintf("auth_method.rules[%d].tenant_id", where[k]), "tenant %s is not %s", id, what)
		}
	}
	return nil
}

// checkIssuerURL checks an issuer or JWKS URL: https, or http when the deployment allows
// private issuers; no query, fragment or credentials; and (webhook.CheckURL) no private address
// unless allowed.
func checkIssuerURL(field, raw string, allowPrivate bool) error {
	if err := webhook.CheckURL(raw, allowPrivate); err != nil {
		return apierr.InvalidArgument(field, "%v", err)
	}
	u, _ := url.Parse(raw)
	if u.Scheme != "https" && !allowPrivate {
		return apierr.InvalidArgument(field, "must be an https URL (http only when the deployment sets auth.allowPrivateIssuers)")
	}
	if u.RawQuery != "" || u.Fragment != "" || strings.HasSuffix(raw, "?") || strings.HasSuffix(raw, "#") {
		return apierr.InvalidArgument(field, "must have no query or fragment")
	}
	return nil
}

// checkRedirectURI checks a redirect URI: an absolute http or https URL without a fragment.
func checkRedirectURI(field, raw string) error {
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.Opaque != "" {
		return apierr.InvalidArgument(field, "must be an absolute http or https URL")
	}
	if len(raw) > webhook.MaxURLLength {
		return apierr.InvalidArgument(field, "must be at most %d characters", webhook.MaxURLLength)
	}
	if u.Fragment != "" || u.User != nil {
		return apierr.InvalidArgument(field, "must have no fragment or credentials")
	}
	return nil
}

// validate checks a request's method and returns it normalised (claim paths defaulted; encode
// puts the rules in priority order). secretRequired is whether an OIDC method needs a client secret in the
// request (create; update keeps the stored one).
func (s *Service) validate(m *authv1.AuthMethod, secretRequired bool) (*authv1.AuthMethod, error) {
	if m == nil {
		return nil, apierr.InvalidArgument("auth_method", "required")
	}
	if !methodName.MatchString(m.GetName()) {
		return nil, apierr.InvalidArgument("auth_method.name", "must be 1 to 32 lower-case letters, digits and hyphens, starting with a letter")
	}
	if utf8.RuneCountInString(m.GetDisplayName()) > maxDisplayName || !utf8.ValidString(m.GetDisplayName()) {
		return nil, apierr.InvalidArgument("auth_method.display_name", "must be at most %d characters", maxDisplayName)
	}
	oidc := m.GetKind() == authv1.AuthMethodKind_AUTH_METHOD_KIND_OIDC
	switch {
	case oidc:
		if err := checkIssuerURL("auth_method.issuer", m.GetIssuer(), s.allowPrivate); err != nil {
			return nil, err
		}
		if m.GetClientId() == "" || len(m.GetClientId()) > maxClientID {
			return nil, apierr.InvalidArgument("auth_method.client_id", "required for OIDC, at most %d characters", maxClientID)
		}
		if secretRequired && m.GetClientSecret() == "" {
			return nil, apierr.InvalidArgument("auth_method.client_secret", "required for OIDC")
		}
		if len(m.GetRedirectUris()) == 0 {
			return nil, apierr.InvalidArgument("auth_method.redirect_uris", "required for OIDC: the dashboard's {baseURL}{basePath}/auth/callback, and http://127.0.0.1/callback for the CLI")
		}
		if m.GetJwksUrl() != "" {
			return nil, apierr.InvalidArgument("auth_method.jwks_url", "only JWT methods take one: an OIDC method's keys are in its discovery document")
		}
	case m.GetKind() == authv1.AuthMethodKind_AUTH_METHOD_KIND_JWT:
		// Always an issuer, even with a jwks_url: every token's iss is checked against it, and
		// identities are linked by it (issue 31).
		if m.GetIssuer() == "" {
			return nil, apierr.InvalidArgument("auth_method.issuer", "required: the iss of the method's tokens (also with a jwks_url)")
		}
		if err := checkIssuerURL("auth_method.issuer", m.GetIssuer(), s.allowPrivate); err != nil {
			return nil, err
		}
		if m.GetJwksUrl() != "" {
			if err := checkIssuerURL("auth_method.jwks_url", m.GetJwksUrl(), s.allowPrivate); err != nil {
				return nil, err
			}
		}
		if len(m.GetAudiences()) == 0 {
			return nil, apierr.InvalidArgument("auth_method.audiences", "a JWT method needs at least one audience")
		}
		if m.GetClientSecret() != "" {
			return nil, apierr.InvalidArgument("auth_method.client_secret", "only OIDC methods take one")
		}
		if len(m.GetRedirectUris()) > 0 {
			return nil, apierr.InvalidArgument("auth_method.redirect_uris", "only OIDC methods take them")
		}
	default:
		return nil, apierr.InvalidArgument("auth_method.kind", "must be AUTH_METHOD_KIND_OIDC or AUTH_METHOD_KIND_JWT")
	}
	if len(m.GetClientSecret()) > maxClientSecret {
		return nil, apierr.InvalidArgument("auth_method.client_secret", "must be at most %d characters", maxClientSecret)
	}
	if len(m.GetRedirectUris()) > maxRedirectURIs {
		return nil, apierr.InvalidArgument("auth_method.redirect_uris", "at most %d", maxRedirectURIs)
	}
	for i, u := range m.GetRedirectUris() {
		if err := checkRedirectURI(fmt.Sprintf("auth_method.redirect_uris[%d]", i), u); err != nil {
			return nil, err
		}
	}
	if len(m.GetScopes()) > maxScopes {
		return nil, apierr.InvalidArgument("auth_method.scopes", "at most %d", maxScopes)
	}
	for i, sc := range m.GetScopes() {
		if len(sc) > maxScopeLen || !scopeToken.MatchString(sc) {
			return nil, apierr.InvalidArgument(fmt.Sprintf("auth_method.scopes[%d]", i), "must be 1 to %d printable characters without spaces", maxScopeLen)
		}
	}
	if len(m.GetAudiences()) > maxAudiences {
		return nil, apierr.InvalidArgument("auth_method.audiences", "at most %d", maxAudiences)
	}
	for i, a := range m.GetAudiences() {
		if a == "" || len(a) > maxAudienceLen || !utf8.ValidString(a) {
			return nil, apierr.InvalidArgument(fmt.Sprintf("auth_method.audiences[%d]", i), "must be 1 to %d characters", maxAudienceLen)
		}
	}
	paths := &authv1.ClaimPaths{
		Groups: orDefault(m.GetClaimPaths().GetGroups(), defaultGroupsClaim),
		Email:  orDefault(m.GetClaimPaths().GetEmail(), defaultEmailClaim),
		Name:   orDefault(m.GetClaimPaths().GetName(), defaultNameClaim),
	}
	for field, p := range map[string]string{"groups": paths.Groups, "email": paths.Email, "name": paths.Name} {
		if msg := sso.CheckClaimPath(p); msg != "" {
			return nil, apierr.InvalidArgument("auth_method.claim_paths."+field, "%s", msg)
		}
	}
	if err := sso.ValidateRulesField("auth_method.rules", m.GetRules()); err != nil {
		return nil, err
	}
	return &authv1.AuthMethod{
		Name: m.GetName(), DisplayName: m.GetDisplayName(), Kind: m.GetKind(), Issuer: m.GetIssuer(),
		ClientId: m.GetClientId(), ClientSecret: m.GetClientSecret(), Scopes: nonNil(m.GetScopes()),
		RedirectUris: nonNil(m.GetRedirectUris()), JwksUrl: m.GetJwksUrl(), Audiences: nonNil(m.GetAudiences()),
		ClaimPaths: paths, Rules: m.GetRules(),
	}, nil
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}
