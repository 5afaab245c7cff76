package authmethods

import (
	"bytes"
	"context"
	"fmt"
	"slices"

	"connectrpc.com/connect"
	"github.com/google/uuid"

	"github.com/better-compute/better-compute/gen/db"
	authv1 "github.com/better-compute/better-compute/gen/go/bettercompute/auth/v1"
	"github.com/better-compute/better-compute/internal/apierr"
	"github.com/better-compute/better-compute/internal/auth"
)

// What a method can reach (issue 31). Sign-in links an identity to the method that made it, so
// a method signs in as no principal another method made. On top of that, inside the admission
// transaction of authMethods/create and update:
//
//   - its issuer is its keys': a method may not name an issuer that another method of its tenant
//     (or of a tenant its rules name) uses with other keys, that is another JWKS URL (both empty:
//     both take the issuer's discovery document, the same keys);
//   - a method that could reach a principal holding owner needs an owner to create or change it.
//     It could reach a principal when the principal's identity is the method's (update), or is of
//     the method's issuer in the method's tenant or a tenant its rules name (the root tenant's
//     methods sign principals in below it), whichever method made it: an owner who signed in
//     through a deleted method of that issuer counts too. Any change of such a method counts,
//     its display name as much as its keys: when in doubt, an owner decides.
//
// Both read under the row locks of every tenant concerned (LockTenant, the lock of every IAM
// change, including granting owner), so a concurrent promotion cannot slip between the check and
// the commit.

// checkReach locks the tenants a method of the caller's tenant (being created, or the method id
// changed) concerns, then checks its issuer and, when it could reach an owner, that the caller
// is one; what names the change in the refusal.
func checkReach(ctx context.Context, q *db.Queries, caller *auth.Principal, m *authv1.AuthMethod, methodID *uuid.UUID, what string) error {
	r, err := newReach(ctx, q, caller.TenantID, m.GetRules(), methodID)
	if err != nil {
		return err
	}
	if err := r.lock(ctx, q); err != nil {
		return err
	}
	if err := r.checkIssuer(ctx, q, m); err != nil {
		return err
	}
	return r.checkOwners(ctx, q, caller, m.GetIssuer(), what)
}

// checkDeleteReach refuses a caller that is not an owner the deletion of method id, locked by the
// caller's tenant, when principals holding owner sign in through it: deleting it would lock them
// out of their sign-in, which is an owner's decision.
func checkDeleteReach(ctx context.Context, q *db.Queries, caller *auth.Principal, id uuid.UUID, what string) error {
	r, err := newReach(ctx, q, caller.TenantID, nil, &id)
	if err != nil {
		return err
	}
	if err := r.lock(ctx, q); err != nil {
		return err
	}
	// No issuer: only the method's own identities count.
	return r.checkOwners(ctx, q, caller, "", what)
}

// reach is the scope of a method being created or changed.
type reach struct {
	// tenants are the method's own (first) and those its rules name or its identities are in,
	// each once.
	tenants []uuid.UUID
	// methodID is the method being changed; nil on create.
	methodID *uuid.UUID
}

// newReach is the scope of a method of tenant with rules (and, on update, of the method id,
// whose identities' tenants count too).
func newReach(ctx context.Context, q *db.Queries, tenant uuid.UUID, rules []*authv1.BindingRule, methodID *uuid.UUID) (*reach, error) {
	r := &reach{tenants: []uuid.UUID{tenant}, methodID: methodID}
	var others []uuid.UUID
	for _, rule := range rules {
		if id, err := uuid.Parse(rule.GetTenantId()); err == nil {
			others = append(others, id)
		}
	}
	if methodID != nil {
		ids, err := q.MethodIdentityTenants(ctx, *methodID)
		if err != nil {
			return nil, fmt.Errorf("read the tenants of auth method %s's identities: %w", *methodID, err)
		}
		others = append(others, ids...)
	}
	// One order for every call (the method's tenant, then by id), so two of them cannot wait on
	// each other's locks.
	slices.SortFunc(others, func(a, b uuid.UUID) int { return bytes.Compare(a[:], b[:]) })
	for _, id := range slices.Compact(others) {
		if id != tenant {
			r.tenants = append(r.tenants, id)
		}
	}
	return r, nil
}

// lock takes the row lock of every tenant of the scope.
func (r *reach) lock(ctx context.Context, q *db.Queries) error {
	for _, id := range r.tenants {
		if err := q.LockTenant(ctx, id); err != nil {
			return fmt.Errorf("lock tenant %s: %w", id, err)
		}
	}
	return nil
}

// checkIssuer refuses an issuer that another method of the scope's tenants uses with other keys.
func (r *reach) checkIssuer(ctx context.Context, q *db.Queries, m *authv1.AuthMethod) error {
	n, err := q.CountIssuerConflicts(ctx, db.CountIssuerConflictsParams{
		TenantIds: r.tenants, Issuer: m.GetIssuer(), JwksUrl: m.GetJwksUrl(), ExceptID: r.methodID,
	})
	if err != nil {
		return fmt.Errorf("check the issuer of auth method %q: %w", m.GetName(), err)
	}
	if n > 0 {
		return &apierr.Error{Code: connect.CodeAlreadyExists, Field: "auth_method.issuer", Msg: fmt.Sprintf(
			"%q is the issuer of another auth method of this tenant (or of a tenant the rules name) with other keys: "+
				"a method may name an issuer only with its keys (the same jwks_url, or none for the issuer's discovery document)", m.GetIssuer())}
	}
	return nil
}

// checkOwners refuses a caller that is not an owner when the method could reach a principal
// holding owner.
func (r *reach) checkOwners(ctx context.Context, q *db.Queries, caller *auth.Principal, issuer, what string) error {
	n, err := q.CountReachableOwners(ctx, db.CountReachableOwnersParams{MethodID: r.methodID, Issuer: issuer, TenantIds: r.tenants})
	if err != nil {
		return fmt.Errorf("count the owners auth method could sign in as: %w", err)
	}
	if n == 0 {
		return nil
	}
	roles, err := q.PrincipalRoles(ctx, db.PrincipalRolesParams{TenantID: caller.TenantID, PrincipalID: caller.ID})
	if err != nil {
		return fmt.Errorf("read the caller's roles: %w", err)
	}
	// Both: the roles the call was authenticated with, and the bindings as they are now.
	if caller.Can("iam.own") && slices.Contains(roles, string(auth.RoleOwner)) {
		return nil
	}
	return apierr.PermissionDenied("only owners may %s: it could sign in as %d principal(s) holding owner "+
		"(principal %s is not an owner of this tenant)", what, n, caller.Name)
}
