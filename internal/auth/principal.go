// Package auth holds who is calling and what they may do: the Principal, the roles and their
// permissions, the API key format, and the Bridge through which an IAM system authenticates
// callers and decides calls. The embedded IAM (API keys and role bindings in PostgreSQL) is one
// Bridge; an external one (OIDC with JWKS) can be plugged in without touching the handlers.
package auth

import (
	"context"
	"slices"

	"github.com/google/uuid"
)

// Principal is an authenticated caller.
type Principal struct {
	ID       uuid.UUID
	TenantID uuid.UUID
	// Kind is "user" or "service_account".
	Kind string
	Name string
	// RootTenant is true for principals of the deployment's root tenant (the operator).
	RootTenant bool
	// Roles the principal holds in its tenant.
	Roles []Role
	// KeyID is the API key the call used, if any.
	KeyID string
	// SessionID is the session the call used (a sign-in's bearer token or the dashboard's
	// cookie), if any; then KeyID is empty.
	SessionID string
}

// Can reports whether any of the principal's roles grants permission.
func (p *Principal) Can(permission string) bool {
	return slices.ContainsFunc(p.Roles, func(r Role) bool { return r.Grants(permission) })
}

type principalKey struct{}

// WithPrincipal returns a context carrying p.
func WithPrincipal(ctx context.Context, p *Principal) context.Context {
	return context.WithValue(ctx, principalKey{}, p)
}

// PrincipalFrom returns the caller, if the call was authenticated.
func PrincipalFrom(ctx context.Context) (*Principal, bool) {
	p, ok := ctx.Value(principalKey{}).(*Principal)
	return p, ok && p != nil
}

// Caller returns the authenticated principal of a call to a method that is not public: the
// guard lets no such call through without one. Use PrincipalFrom where a call may be anonymous.
func Caller(ctx context.Context) *Principal {
	p, _ := PrincipalFrom(ctx)
	return p
}
