-- A tenant's auth methods (issue 23) and the identities that link a provider's subject to a
-- principal. Every statement the API's handlers run takes the caller's tenant id.

-- name: CountAuthMethods :one
-- Under LockTenant, for the cap on a tenant's methods.
SELECT count(*) FROM auth_methods WHERE tenant_id = sqlc.arg(tenant_id);

-- name: CreateAuthMethod :one
INSERT INTO auth_methods (id, tenant_id, name, display_name, kind, issuer, client_id, client_secret_sealed,
                          scopes, redirect_uris, jwks_url, audiences, claim_paths, rules)
VALUES (sqlc.arg(id), sqlc.arg(tenant_id), sqlc.arg(name), sqlc.arg(display_name), sqlc.arg(kind), sqlc.arg(issuer),
        sqlc.arg(client_id), sqlc.arg(client_secret_sealed), sqlc.arg(scopes)::text[], sqlc.arg(redirect_uris)::text[],
        sqlc.arg(jwks_url), sqlc.arg(audiences)::text[], sqlc.arg(claim_paths), sqlc.arg(rules))
RETURNING *;

-- name: ListAuthMethods :many
SELECT * FROM auth_methods WHERE tenant_id = sqlc.arg(tenant_id) ORDER BY name;

-- name: GetAuthMethodByName :one
SELECT * FROM auth_methods WHERE tenant_id = sqlc.arg(tenant_id) AND name = sqlc.arg(name);

-- name: LockAuthMethodByName :one
-- authMethods/update: the stored method, locked until the update commits.
SELECT * FROM auth_methods WHERE tenant_id = sqlc.arg(tenant_id) AND name = sqlc.arg(name) FOR UPDATE;

-- name: UpdateAuthMethod :one
UPDATE auth_methods
SET display_name = sqlc.arg(display_name), kind = sqlc.arg(kind), issuer = sqlc.arg(issuer),
    client_id = sqlc.arg(client_id), client_secret_sealed = sqlc.arg(client_secret_sealed),
    scopes = sqlc.arg(scopes)::text[], redirect_uris = sqlc.arg(redirect_uris)::text[], jwks_url = sqlc.arg(jwks_url),
    audiences = sqlc.arg(audiences)::text[], claim_paths = sqlc.arg(claim_paths), rules = sqlc.arg(rules),
    updated_at = now()
WHERE tenant_id = sqlc.arg(tenant_id) AND id = sqlc.arg(id)
RETURNING *;

-- name: DeleteAuthMethod :one
-- Its sessions go with it (ON DELETE CASCADE), after EndAuthMethodSessions counted them.
DELETE FROM auth_methods WHERE tenant_id = sqlc.arg(tenant_id) AND name = sqlc.arg(name) RETURNING id;

-- name: ListLoginMethods :many
-- auth/loginMethods (public): a tenant's OIDC methods, the tenant named by id or name; none for
-- an unknown, deleted or suspended tenant.
SELECT m.name, m.display_name, m.issuer
FROM auth_methods m JOIN tenants t ON t.id = m.tenant_id
WHERE (t.id = sqlc.narg(tenant_id)::uuid OR t.name = sqlc.arg(tenant_name)::text)
  AND t.deleted_at IS NULL AND t.suspended_at IS NULL AND m.kind = 'oidc'
ORDER BY m.name;

-- name: CountRuleTenants :one
-- How many of the given tenants a rule of a method of tenant_id may name: the method's tenant
-- itself, and, when it is the root tenant (below_allowed), any tenant below it; deleted ones
-- never.
WITH RECURSIVE below AS (
    SELECT r.id FROM tenants r WHERE r.id = sqlc.arg(tenant_id)::uuid
    UNION
    SELECT t.id FROM tenants t JOIN below b ON t.parent_id = b.id WHERE sqlc.arg(below_allowed)::bool
)
SELECT count(*) FROM tenants x
WHERE x.id = ANY(sqlc.arg(ids)::uuid[]) AND x.deleted_at IS NULL AND x.id IN (SELECT b.id FROM below b);

-- name: GetIdentity :one
-- The principal a provider's subject signed in as before through this method, locked for the
-- sign-in. Another method's identity of the same issuer and subject is never found (issue 31).
SELECT i.principal_id, p.name AS principal_name
FROM principal_identities i JOIN principals p ON p.id = i.principal_id
WHERE i.tenant_id = sqlc.arg(tenant_id) AND i.auth_method_id = sqlc.arg(auth_method_id)::uuid
  AND i.issuer = sqlc.arg(issuer) AND i.subject = sqlc.arg(subject)
FOR UPDATE OF i;

-- name: CreateIdentity :execrows
-- Links a principal just created to the provider's subject through the method; 0 rows when a
-- concurrent sign-in of the same subject through the same method won the race.
INSERT INTO principal_identities (principal_id, tenant_id, issuer, subject, auth_method_id)
VALUES (sqlc.arg(principal_id), sqlc.arg(tenant_id), sqlc.arg(issuer), sqlc.arg(subject), sqlc.arg(auth_method_id)::uuid)
ON CONFLICT (tenant_id, auth_method_id, issuer, subject) DO NOTHING;

-- name: TouchIdentity :exec
UPDATE principal_identities SET last_login_at = now()
WHERE tenant_id = sqlc.arg(tenant_id) AND principal_id = sqlc.arg(principal_id);

-- name: CountIssuerConflicts :one
-- authMethods/create and update: methods of the given tenants (the method's own and those its
-- rules name) other than the method itself that name the issuer with other keys: a JWKS URL
-- other than this one's (empty for both: both take the issuer's discovery document).
SELECT count(*) FROM auth_methods
WHERE tenant_id = ANY(sqlc.arg(tenant_ids)::uuid[]) AND issuer = sqlc.arg(issuer)
  AND jwks_url <> sqlc.arg(jwks_url) AND id IS DISTINCT FROM sqlc.narg(except_id)::uuid;

-- name: MethodIdentityTenants :many
-- The tenants a method's identities are in: its own, and below it for the root tenant's.
SELECT DISTINCT tenant_id FROM principal_identities WHERE auth_method_id = sqlc.arg(auth_method_id)::uuid;

-- name: CountReachableOwners :one
-- The owner check of authMethods/create and update: principals holding owner that the method
-- could sign in as, that is whose identity is the method's (method_id; null on create), or is
-- of the method's issuer in one of the given tenants (the method's own and those its rules
-- name), whichever method made it.
SELECT count(DISTINCT i.principal_id) FROM principal_identities i
WHERE (i.auth_method_id = sqlc.narg(method_id)::uuid
       OR (i.issuer = sqlc.arg(issuer) AND i.tenant_id = ANY(sqlc.arg(tenant_ids)::uuid[])))
  AND EXISTS (SELECT 1 FROM role_bindings rb WHERE rb.principal_id = i.principal_id AND rb.role = 'owner');

-- name: SetPrincipalEmail :exec
UPDATE principals SET email = sqlc.arg(email) WHERE tenant_id = sqlc.arg(tenant_id) AND id = sqlc.arg(id);

-- name: DeleteRuleBindings :exec
-- The bindings the rules gave at the last sign-in; those made through the API stay.
DELETE FROM role_bindings WHERE tenant_id = sqlc.arg(tenant_id) AND principal_id = sqlc.arg(principal_id) AND source = 'rule';

-- name: AddRuleBinding :exec
-- A role a rule grants; a manual binding of the same role stays as it is.
INSERT INTO role_bindings (id, tenant_id, principal_id, role, source)
VALUES (sqlc.arg(id), sqlc.arg(tenant_id), sqlc.arg(principal_id), sqlc.arg(role), 'rule')
ON CONFLICT (principal_id, role) DO NOTHING;

-- name: GetLoginAuthMethod :one
-- The sign-in's method (auth/startLogin, exchangeToken, GET /auth/login): by the tenant's id or
-- name and the method's name; none for a deleted or suspended tenant.
SELECT sqlc.embed(m), t.is_root AS tenant_is_root, t.name AS tenant_name
FROM auth_methods m JOIN tenants t ON t.id = m.tenant_id
WHERE (t.id = sqlc.narg(tenant_id)::uuid OR t.name = sqlc.arg(tenant_name)::text)
  AND m.name = sqlc.arg(name) AND t.deleted_at IS NULL AND t.suspended_at IS NULL;

-- name: GetAuthMethodByID :one
-- A flow's method (auth_flows.auth_method_id), at the callback; in the sign-in only, never for
-- an API handler (it takes no tenant).
SELECT * FROM auth_methods WHERE id = sqlc.arg(id);
