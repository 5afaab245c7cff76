package iam

import (
	"context"
	"slices"

	"github.com/google/uuid"

	"github.com/better-compute/better-compute/gen/db"
	"github.com/better-compute/better-compute/internal/apierr"
	"github.com/better-compute/better-compute/internal/auth"
)

// owners decides the rules that protect a tenant's owners, inside an IAM call's transaction:
//
//   - only an owner creates, deletes or changes the API keys and role bindings of an owner, and
//     only an owner grants or removes the owner role;
//   - the tenant keeps at least one owner, and at least one owner key that is not expired;
//   - granting owner revokes the principal's keys that a non-owner minted.
//
// lockOwners takes the tenant's row lock first (LockTenant), the lock every IAM change of the
// tenant and every change of its status takes, so what it reads (the caller's roles, the
// target's roles, the owner count) cannot change before the commit: a concurrent promotion
// waits, and is then checked against what this call did.
type owners struct {
	q      *db.Queries
	tenant uuid.UUID
	caller *auth.Principal
	// callerIsOwner is read in the transaction: the caller's roles at authentication may be
	// stale by the time the lock is held.
	callerIsOwner bool
}

// lockOwners locks the caller's tenant for an IAM change and reads whether the caller is owner.
func lockOwners(ctx context.Context, q *db.Queries, caller *auth.Principal) (*owners, error) {
	if err := q.LockTenant(ctx, caller.TenantID); err != nil {
		return nil, err
	}
	roles, err := q.PrincipalRoles(ctx, db.PrincipalRolesParams{TenantID: caller.TenantID, PrincipalID: caller.ID})
	if err != nil {
		return nil, err
	}
	// Both: the roles the IAM bridge granted the call, and the bindings as they are now.
	isOwner := caller.Can("iam.own") && slices.Contains(roles, string(auth.RoleOwner))
	return &owners{q: q, tenant: caller.TenantID, caller: caller, callerIsOwner: isOwner}, nil
}

// isOwner reports whether a principal of the tenant holds the owner role, or NotFound when the
// tenant has no such principal.
func (o *owners) isOwner(ctx context.Context, principal uuid.UUID) (bool, error) {
	if _, err := o.q.GetPrincipal(ctx, db.GetPrincipalParams{TenantID: o.tenant, ID: principal}); err != nil {
		return false, apierr.NotFoundIfNoRows(err, "principal %s not found", principal)
	}
	roles, err := o.q.PrincipalRoles(ctx, db.PrincipalRolesParams{TenantID: o.tenant, PrincipalID: principal})
	if err != nil {
		return false, err
	}
	return slices.Contains(roles, string(auth.RoleOwner)), nil
}

// requireOwner refuses a caller that is not an owner, saying what only owners may do.
func (o *owners) requireOwner(what string) error {
	if !o.callerIsOwner {
		return apierr.PermissionDenied("only owners may %s (principal %s is not an owner of this tenant)", what, o.caller.Name)
	}
	return nil
}

// removingOwner allows taking the owner role away from principal (by removing the binding or
// the principal) only for an owner, and never from the last owner or from the last owner that
// holds a usable key.
func (o *owners) removingOwner(ctx context.Context, principal uuid.UUID) error {
	if err := o.requireOwner("remove an owner"); err != nil {
		return err
	}
	n, err := o.q.CountOwners(ctx, o.tenant)
	if err != nil {
		return err
	}
	if n <= 1 {
		return apierr.FailedPrecondition("the tenant's last owner cannot be removed; make another principal owner first")
	}
	return o.keepsUsableOwnerKey(ctx, nil, &principal)
}

// keepsUsableOwnerKey refuses a change that would leave no owner with a key that is not expired,
// when the key or every key of the principal (either may be nil) goes away: the tenant would be
// locked out of its own IAM, and nothing inside the tenant could recover it.
func (o *owners) keepsUsableOwnerKey(ctx context.Context, key *string, principal *uuid.UUID) error {
	n, err := o.q.CountUsableOwnerKeys(ctx, db.CountUsableOwnerKeysParams{TenantID: o.tenant, ExceptKey: key, ExceptPrincipal: principal})
	if err != nil {
		return err
	}
	if n == 0 {
		return apierr.FailedPrecondition("this would leave no owner of the tenant with a usable API key; create another owner key first")
	}
	return nil
}
