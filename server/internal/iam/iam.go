// Package iam implements bettercompute.iam.v1.IamService over the embedded IAM tables. Every
// method acts in the caller's tenant: ids of other tenants' objects are simply not found.
package iam

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/better-compute/better-compute/gen/db"
	iamv1 "github.com/better-compute/better-compute/gen/go/bettercompute/iam/v1"
	"github.com/better-compute/better-compute/gen/go/bettercompute/iam/v1/iamv1connect"
	"github.com/better-compute/better-compute/internal/admission"
	"github.com/better-compute/better-compute/internal/apierr"
	"github.com/better-compute/better-compute/internal/auth"
	"github.com/better-compute/better-compute/internal/database"
	"github.com/better-compute/better-compute/internal/event"
	"github.com/better-compute/better-compute/internal/page"
	"github.com/better-compute/better-compute/internal/quota"
	"github.com/better-compute/better-compute/server/internal/nodes"
)

// Service answers IamService calls.
type Service struct {
	pool     *pgxpool.Pool
	admit    *admission.Admitter
	now      func() time.Time
	notifier nodes.RevocationNotifier
}

var _ iamv1connect.IamServiceHandler = (*Service)(nil)

// Option configures the service.
type Option func(*Service)

// WithRevocationNotifier has DeleteTenant tell the gateways, after its commit, to end the
// sessions of the nodes it revoked. Without it (or with nil) the gateways' own poll ends them
// within a few seconds.
func WithRevocationNotifier(n nodes.RevocationNotifier) Option {
	return func(s *Service) { s.notifier = n }
}

// New returns the service.
func New(pool *pgxpool.Pool, admit *admission.Admitter, opts ...Option) *Service {
	s := &Service{pool: pool, admit: admit, now: time.Now}
	for _, o := range opts {
		o(s)
	}
	return s
}

var tenantName = regexp.MustCompile(`^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$`)

// WhoAmI describes the caller.
func (s *Service) WhoAmI(ctx context.Context, _ *iamv1.WhoAmIRequest) (*iamv1.WhoAmIResponse, error) {
	p := auth.Caller(ctx)
	q := db.New(s.pool)
	pr, err := q.GetPrincipal(ctx, db.GetPrincipalParams{TenantID: p.TenantID, ID: p.ID})
	if err != nil {
		return nil, apierr.NotFoundIfNoRows(err, "principal %s no longer exists", p.ID)
	}
	t, err := q.GetTenant(ctx, db.GetTenantParams{TenantID: p.TenantID, ID: p.TenantID})
	if err != nil {
		return nil, err
	}
	res := &iamv1.WhoAmIResponse{Principal: principalToProto(pr), Tenant: tenantToProto(t), ApiKeyId: p.KeyID}
	for _, r := range p.Roles {
		res.Roles = append(res.Roles, r.Proto())
	}
	return res, nil
}

// CreateTenant creates a child tenant with an owner service account and its first key.
func (s *Service) CreateTenant(ctx context.Context, req *iamv1.CreateTenantRequest) (*iamv1.CreateTenantResponse, error) {
	if !tenantName.MatchString(req.GetName()) {
		return nil, apierr.InvalidArgument("name", "must be 1 to 63 lower case letters, digits and dashes, starting and ending with a letter or digit")
	}
	if len(req.GetDisplayName()) > 200 {
		return nil, apierr.InvalidArgument("display_name", "must be at most 200 characters")
	}
	p := auth.Caller(ctx)
	return admission.Do(ctx, s.admit, req, func(ctx context.Context, tx *admission.Tx) (*iamv1.CreateTenantResponse, error) {
		// The tenant and its owner (service account, owner binding, API key) in one statement,
		// as auth.MintAdminKey makes them for the root tenant.
		key := auth.NewKey()
		row, err := tx.Q.CreateTenantWithOwner(ctx, db.CreateTenantWithOwnerParams{
			ID: uuid.Must(uuid.NewV7()), ParentID: &p.TenantID, Name: req.GetName(), DisplayName: req.GetDisplayName(),
			OwnerID: uuid.Must(uuid.NewV7()), OwnerName: "owner", BindingID: uuid.Must(uuid.NewV7()),
			KeyID: key.ID, SecretHash: key.Hash(),
		})
		if err != nil {
			if database.IsUniqueViolation(err) {
				return nil, apierr.AlreadyExists("a tenant named %q already exists", req.GetName())
			}
			return nil, fmt.Errorf("create tenant %q with its owner: %w", req.GetName(), err)
		}
		t, owner := row.Tenant, row.Principal
		tx.Target("tenant", t.ID)
		if err := tx.Emit(p.TenantID, event.TenantCreated{TenantRef: event.TenantRef{ID: t.ID, Name: t.Name}}); err != nil {
			return nil, err
		}
		return &iamv1.CreateTenantResponse{Tenant: tenantToProto(t), Owner: principalToProto(owner), OwnerApiKey: key.String()}, nil
	})
}

// GetTenant returns the caller's tenant or a child of it.
func (s *Service) GetTenant(ctx context.Context, req *iamv1.GetTenantRequest) (*iamv1.GetTenantResponse, error) {
	id, err := apierr.ParseID("id", req.GetId())
	if err != nil {
		return nil, err
	}
	t, err := db.New(s.pool).GetTenant(ctx, db.GetTenantParams{TenantID: auth.Caller(ctx).TenantID, ID: id})
	if err != nil {
		return nil, apierr.NotFoundIfNoRows(err, "tenant %s not found", id)
	}
	return &iamv1.GetTenantResponse{Tenant: tenantToProto(t)}, nil
}

// ListTenants lists the caller's tenant and its children.
func (s *Service) ListTenants(ctx context.Context, req *iamv1.ListTenantsRequest) (*iamv1.ListTenantsResponse, error) {
	size, after, err := page.Of(req.GetPageSize(), req.GetPageToken(), uuid.Nil)
	if err != nil {
		return nil, err
	}
	rows, err := db.New(s.pool).ListTenants(ctx, db.ListTenantsParams{TenantID: auth.Caller(ctx).TenantID, After: after, Lim: size + 1})
	if err != nil {
		return nil, err
	}
	rows, next := page.Next(rows, size, func(t db.Tenant) uuid.UUID { return t.ID })
	res := &iamv1.ListTenantsResponse{NextPageToken: next}
	for _, t := range rows {
		res.Tenants = append(res.Tenants, tenantToProto(t))
	}
	return res, nil
}

// CreatePrincipal creates a user or service account.
func (s *Service) CreatePrincipal(ctx context.Context, req *iamv1.CreatePrincipalRequest) (*iamv1.CreatePrincipalResponse, error) {
	kind, ok := kindFromProto(req.GetKind())
	if !ok {
		return nil, apierr.InvalidArgument("kind", "must be PRINCIPAL_KIND_USER or PRINCIPAL_KIND_SERVICE_ACCOUNT")
	}
	if n := req.GetName(); n == "" || len(n) > 128 || strings.TrimSpace(n) != n {
		return nil, apierr.InvalidArgument("name", "must be 1 to 128 characters without leading or trailing spaces")
	}
	if e := req.GetEmail(); e != "" && (kind != "user" || !strings.Contains(e, "@") || len(e) > 254) {
		return nil, apierr.InvalidArgument("email", "must be an email address, and only users have one")
	}
	p := auth.Caller(ctx)
	return admission.Do(ctx, s.admit, req, func(ctx context.Context, tx *admission.Tx) (*iamv1.CreatePrincipalResponse, error) {
		if err := quota.Check(ctx, tx.Q, p.TenantID, quota.Principals, 1); err != nil {
			return nil, err
		}
		pr, err := tx.Q.CreatePrincipal(ctx, db.CreatePrincipalParams{
			ID: uuid.Must(uuid.NewV7()), TenantID: p.TenantID, Kind: kind, Name: req.GetName(), Email: req.GetEmail(),
		})
		if err != nil {
			if database.IsUniqueViolation(err) {
				return nil, apierr.AlreadyExists("a principal named %q already exists in this tenant", req.GetName())
			}
			return nil, err
		}
		tx.Target("principal", pr.ID)
		return &iamv1.CreatePrincipalResponse{Principal: principalToProto(pr)}, nil
	})
}

// GetPrincipal returns a principal of the caller's tenant.
func (s *Service) GetPrincipal(ctx context.Context, req *iamv1.GetPrincipalRequest) (*iamv1.GetPrincipalResponse, error) {
	id, err := apierr.ParseID("id", req.GetId())
	if err != nil {
		return nil, err
	}
	pr, err := db.New(s.pool).GetPrincipal(ctx, db.GetPrincipalParams{TenantID: auth.Caller(ctx).TenantID, ID: id})
	if err != nil {
		return nil, apierr.NotFoundIfNoRows(err, "principal %s not found", id)
	}
	return &iamv1.GetPrincipalResponse{Principal: principalToProto(pr)}, nil
}

// ListPrincipals lists the principals of the caller's tenant.
func (s *Service) ListPrincipals(ctx context.Context, req *iamv1.ListPrincipalsRequest) (*iamv1.ListPrincipalsResponse, error) {
	size, after, err := page.Of(req.GetPageSize(), req.GetPageToken(), uuid.Nil)
	if err != nil {
		return nil, err
	}
	rows, err := db.New(s.pool).ListPrincipals(ctx, db.ListPrincipalsParams{TenantID: auth.Caller(ctx).TenantID, After: after, Lim: size + 1})
	if err != nil {
		return nil, err
	}
	rows, next := page.Next(rows, size, func(p db.Principal) uuid.UUID { return p.ID })
	res := &iamv1.ListPrincipalsResponse{NextPageToken: next}
	for _, p := range rows {
		res.Principals = append(res.Principals, principalToProto(p))
	}
	return res, nil
}

// DeletePrincipal deletes a principal, its keys and its bindings. Deleting an owner needs the
// owner role, and the last owner (or the last owner with a usable key) cannot be deleted.
func (s *Service) DeletePrincipal(ctx context.Context, req *iamv1.DeletePrincipalRequest) (*iamv1.DeletePrincipalResponse, error) {
	id, err := apierr.ParseID("id", req.GetId())
	if err != nil {
		return nil, err
	}
	p := auth.Caller(ctx)
	return admission.Do(ctx, s.admit, req, func(ctx context.Context, tx *admission.Tx) (*iamv1.DeletePrincipalResponse, error) {
		tx.Target("principal", id)
		o, err := lockOwners(ctx, tx.Q, p)
		if err != nil {
			return nil, err
		}
		owner, err := o.isOwner(ctx, id)
		if err != nil {
			return nil, err
		}
		if owner {
			if err := o.removingOwner(ctx, id); err != nil {
				return nil, err
			}
		}
		n, err := tx.Q.DeletePrincipal(ctx, db.DeletePrincipalParams{TenantID: p.TenantID, ID: id})
		if err != nil {
			return nil, err
		}
		if n == 0 {
			return nil, apierr.NotFound("principal %s not found", id)
		}
		return &iamv1.DeletePrincipalResponse{}, nil
	})
}

// CreateApiKey mints a key for a principal of the caller's tenant. Only owners mint keys for an
// owner; the key records its creator and whether the creator was an owner (see CreateRoleBinding).
func (s *Service) CreateApiKey(ctx context.Context, req *iamv1.CreateApiKeyRequest) (*iamv1.CreateApiKeyResponse, error) {
	pid, err := apierr.ParseID("principal_id", req.GetPrincipalId())
	if err != nil {
		return nil, err
	}
	if len(req.GetName()) > 128 {
		return nil, apierr.InvalidArgument("name", "must be at most 128 characters")
	}
	var expires *time.Time
	if req.GetExpireTime() != nil {
		if err := req.GetExpireTime().CheckValid(); err != nil {
			return nil, apierr.InvalidArgument("expire_time", "%v", err)
		}
		t := req.GetExpireTime().AsTime()
		if !t.After(s.now()) {
			return nil, apierr.InvalidArgument("expire_time", "must be in the future")
		}
		expires = &t
	}
	p := auth.Caller(ctx)
	return admission.Do(ctx, s.admit, req, func(ctx context.Context, tx *admission.Tx) (*iamv1.CreateApiKeyResponse, error) {
		o, err := lockOwners(ctx, tx.Q, p)
		if err != nil {
			return nil, err
		}
		owner, err := o.isOwner(ctx, pid)
		if err != nil {
			return nil, err
		}
		// A key acts with its principal's roles: minting one for an owner is acting as owner.
		if owner {
			if err := o.requireOwner("create API keys for an owner"); err != nil {
				return nil, err
			}
		}
		if err := quota.Check(ctx, tx.Q, p.TenantID, quota.APIKeys, 1); err != nil {
			return nil, err
		}
		key := auth.NewKey()
		k, err := tx.Q.CreateAPIKey(ctx, db.CreateAPIKeyParams{
			ID: key.ID, TenantID: p.TenantID, PrincipalID: pid, Name: req.GetName(), SecretHash: key.Hash(), ExpiresAt: expires,
			CreatedBy: &p.ID, CreatedByOwner: o.callerIsOwner,
		})
		if err != nil {
			return nil, err
		}
		tx.Target("apiKey", k.ID)
		return &iamv1.CreateApiKeyResponse{ApiKey: apiKeyToProto(k), Key: key.String()}, nil
	})
}

// ListApiKeys lists keys of the caller's tenant.
func (s *Service) ListApiKeys(ctx context.Context, req *iamv1.ListApiKeysRequest) (*iamv1.ListApiKeysResponse, error) {
	pid, err := apierr.ParseOptionalID("principal_id", req.GetPrincipalId())
	if err != nil {
		return nil, err
	}
	size, after, err := page.Of(req.GetPageSize(), req.GetPageToken(), "")
	if err != nil {
		return nil, err
	}
	rows, err := db.New(s.pool).ListAPIKeys(ctx, db.ListAPIKeysParams{TenantID: auth.Caller(ctx).TenantID, PrincipalID: pid, After: after, Lim: size + 1})
	if err != nil {
		return nil, err
	}
	rows, next := page.Next(rows, size, func(k db.ApiKey) string { return k.ID })
	res := &iamv1.ListApiKeysResponse{NextPageToken: next}
	for _, k := range rows {
		res.ApiKeys = append(res.ApiKeys, apiKeyToProto(k))
	}
	return res, nil
}

// DeleteApiKey revokes a key; the next call with it is refused. Only owners revoke an owner's
// keys, and the tenant's last usable owner key cannot be revoked.
func (s *Service) DeleteApiKey(ctx context.Context, req *iamv1.DeleteApiKeyRequest) (*iamv1.DeleteApiKeyResponse, error) {
	id := req.GetId()
	if id == "" || len(id) > 64 {
		return nil, apierr.InvalidArgument("id", "must be an API key id (1 to 64 characters)")
	}
	p := auth.Caller(ctx)
	return admission.Do(ctx, s.admit, req, func(ctx context.Context, tx *admission.Tx) (*iamv1.DeleteApiKeyResponse, error) {
		tx.Target("apiKey", id)
		o, err := lockOwners(ctx, tx.Q, p)
		if err != nil {
			return nil, err
		}
		k, err := tx.Q.GetAPIKey(ctx, db.GetAPIKeyParams{TenantID: p.TenantID, ID: id})
		if err != nil {
			return nil, apierr.NotFoundIfNoRows(err, "API key %s not found", id)
		}
		owner, err := o.isOwner(ctx, k.PrincipalID)
		if err != nil {
			return nil, err
		}
		if owner {
			if err := o.requireOwner("revoke the API keys of an owner"); err != nil {
				return nil, err
			}
			if err := o.keepsUsableOwnerKey(ctx, &id, nil); err != nil {
				return nil, err
			}
		}
		if _, err := tx.Q.DeleteAPIKey(ctx, db.DeleteAPIKeyParams{TenantID: p.TenantID, ID: id}); err != nil {
			return nil, err
		}
		return &iamv1.DeleteApiKeyResponse{}, nil
	})
}

// CreateRoleBinding grants a role. Granting owner, or any role to an owner, needs the owner role.
// Granting owner revokes the principal's keys that a non-owner minted: such a key may be in a
// non-owner's hands, and must not start acting as an owner's.
func (s *Service) CreateRoleBinding(ctx context.Context, req *iamv1.CreateRoleBindingRequest) (*iamv1.CreateRoleBindingResponse, error) {
	pid, err := apierr.ParseID("principal_id", req.GetPrincipalId())
	if err != nil {
		return nil, err
	}
	role, ok := auth.RoleFromProto(req.GetRole())
	if !ok {
		return nil, apierr.InvalidArgument("role", "must be ROLE_OWNER, ROLE_ADMIN, ROLE_OPERATOR or ROLE_VIEWER")
	}
	p := auth.Caller(ctx)
	return admission.Do(ctx, s.admit, req, func(ctx context.Context, tx *admission.Tx) (*iamv1.CreateRoleBindingResponse, error) {
		o, err := lockOwners(ctx, tx.Q, p)
		if err != nil {
			return nil, err
		}
		owner, err := o.isOwner(ctx, pid)
		if err != nil {
			return nil, err
		}
		switch {
		case role == auth.RoleOwner:
			err = o.requireOwner("grant the owner role")
		case owner:
			err = o.requireOwner("change the role bindings of an owner")
		}
		if err != nil {
			return nil, err
		}
		b, err := tx.Q.CreateRoleBinding(ctx, db.CreateRoleBindingParams{
			ID: uuid.Must(uuid.NewV7()), TenantID: p.TenantID, PrincipalID: pid, Role: string(role),
		})
		if err != nil {
			if database.IsUniqueViolation(err) {
				return nil, apierr.AlreadyExists("principal %s already has the %s role", pid, role)
			}
			return nil, err
		}
		tx.Target("roleBinding", b.ID)
		res := &iamv1.CreateRoleBindingResponse{RoleBinding: roleBindingToProto(b)}
		if role == auth.RoleOwner && !owner {
			if res.RevokedApiKeyIds, err = tx.Q.RevokeKeysNotMintedByOwner(ctx, db.RevokeKeysNotMintedByOwnerParams{TenantID: p.TenantID, PrincipalID: pid}); err != nil {
				return nil, fmt.Errorf("revoke keys of new owner %s that a non-owner minted: %w", pid, err)
			}
		}
		return res, nil
	})
}

// ListRoleBindings lists bindings of the caller's tenant.
func (s *Service) ListRoleBindings(ctx context.Context, req *iamv1.ListRoleBindingsRequest) (*iamv1.ListRoleBindingsResponse, error) {
	pid, err := apierr.ParseOptionalID("principal_id", req.GetPrincipalId())
	if err != nil {
		return nil, err
	}
	size, after, err := page.Of(req.GetPageSize(), req.GetPageToken(), uuid.Nil)
	if err != nil {
		return nil, err
	}
	rows, err := db.New(s.pool).ListRoleBindings(ctx, db.ListRoleBindingsParams{TenantID: auth.Caller(ctx).TenantID, PrincipalID: pid, After: after, Lim: size + 1})
	if err != nil {
		return nil, err
	}
	rows, next := page.Next(rows, size, func(b db.RoleBinding) uuid.UUID { return b.ID })
	res := &iamv1.ListRoleBindingsResponse{NextPageToken: next}
	for _, b := range rows {
		res.RoleBindings = append(res.RoleBindings, roleBindingToProto(b))
	}
	return res, nil
}

// DeleteRoleBinding removes a binding. Removing an owner, or any binding of an owner, needs the
// owner role, and the last owner (or the last owner with a usable key) cannot be removed.
func (s *Service) DeleteRoleBinding(ctx context.Context, req *iamv1.DeleteRoleBindingRequest) (*iamv1.DeleteRoleBindingResponse, error) {
	id, err := apierr.ParseID("id", req.GetId())
	if err != nil {
		return nil, err
	}
	p := auth.Caller(ctx)
	return admission.Do(ctx, s.admit, req, func(ctx context.Context, tx *admission.Tx) (*iamv1.DeleteRoleBindingResponse, error) {
		tx.Target("roleBinding", id)
		o, err := lockOwners(ctx, tx.Q, p)
		if err != nil {
			return nil, err
		}
		b, err := tx.Q.GetRoleBinding(ctx, db.GetRoleBindingParams{TenantID: p.TenantID, ID: id})
		if err != nil {
			return nil, apierr.NotFoundIfNoRows(err, "role binding %s not found", id)
		}
		owner, err := o.isOwner(ctx, b.PrincipalID)
		if err != nil {
			return nil, err
		}
		switch {
		case b.Role == string(auth.RoleOwner):
			err = o.removingOwner(ctx, b.PrincipalID)
		case owner:
			err = o.requireOwner("change the role bindings of an owner")
		}
		if err != nil {
			return nil, err
		}
		if _, err := tx.Q.DeleteRoleBinding(ctx, db.DeleteRoleBindingParams{TenantID: p.TenantID, ID: id}); err != nil {
			return nil, err
		}
		return &iamv1.DeleteRoleBindingResponse{}, nil
	})
}
