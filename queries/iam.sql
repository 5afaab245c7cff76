-- Embedded IAM. Every statement but the bootstrap and authentication ones takes the caller's
-- tenant id, so a principal cannot see or change another tenant's rows.

-- name: EnsureRootTenant :exec
-- Creates the root tenant on first start; later starts (and concurrent ones) change nothing.
INSERT INTO tenants (id, name, display_name, is_root)
VALUES (sqlc.arg(id), sqlc.arg(name), sqlc.arg(display_name), true)
ON CONFLICT DO NOTHING;

-- name: GetRootTenant :one
SELECT * FROM tenants WHERE is_root;

-- name: AuthenticateAPIKey :one
-- Resolves a key id to its principal, tenant and roles in one round trip.
SELECT k.id, k.secret_hash, k.expires_at, k.last_used_at, k.tenant_id, k.principal_id,
       p.kind, p.name AS principal_name, t.is_root, t.name AS tenant_name, t.suspended_at, t.deleted_at,
       COALESCE(array_agg(rb.role ORDER BY rb.role) FILTER (WHERE rb.role IS NOT NULL), '{}')::text[] AS roles
FROM api_keys k
JOIN principals p ON p.id = k.principal_id
JOIN tenants t ON t.id = k.tenant_id
LEFT JOIN role_bindings rb ON rb.principal_id = k.principal_id
WHERE k.id = sqlc.arg(id)
GROUP BY k.id, p.id, t.id;

-- name: TouchAPIKey :exec
-- Records use at most once a minute per key, so authentication is not a write per request.
UPDATE api_keys SET last_used_at = now()
WHERE id = sqlc.arg(id) AND (last_used_at IS NULL OR last_used_at < now() - interval '1 minute');

-- name: CreateTenant :one
INSERT INTO tenants (id, parent_id, name, display_name)
VALUES (sqlc.arg(id), sqlc.arg(parent_id), sqlc.arg(name), sqlc.arg(display_name))
RETURNING *;

-- name: GetTenant :one
-- A tenant is visible to its own principals and to those of its parent.
SELECT * FROM tenants
WHERE id = sqlc.arg(id) AND (id = sqlc.arg(tenant_id) OR parent_id = sqlc.arg(tenant_id));

-- name: ListTenants :many
SELECT * FROM tenants
WHERE (id = sqlc.arg(tenant_id) OR parent_id = sqlc.arg(tenant_id))
  AND id > sqlc.arg(after)
ORDER BY id
LIMIT sqlc.arg(lim);

-- name: CreatePrincipal :one
INSERT INTO principals (id, tenant_id, kind, name, email)
VALUES (sqlc.arg(id), sqlc.arg(tenant_id), sqlc.arg(kind), sqlc.arg(name), sqlc.arg(email))
RETURNING *;

-- name: GetPrincipal :one
SELECT * FROM principals WHERE tenant_id = sqlc.arg(tenant_id) AND id = sqlc.arg(id);

-- name: ListPrincipals :many
SELECT * FROM principals
WHERE tenant_id = sqlc.arg(tenant_id) AND id > sqlc.arg(after)
ORDER BY id
LIMIT sqlc.arg(lim);

-- name: DeletePrincipal :execrows
DELETE FROM principals WHERE tenant_id = sqlc.arg(tenant_id) AND id = sqlc.arg(id);

-- name: CreateAPIKey :one
-- created_by is the calling principal (null for the CLI and tenant creation); created_by_owner
-- says whether it was an owner, which decides whether the key survives a promotion to owner.
INSERT INTO api_keys (id, tenant_id, principal_id, name, secret_hash, expires_at, created_by, created_by_owner)
VALUES (sqlc.arg(id), sqlc.arg(tenant_id), sqlc.arg(principal_id), sqlc.arg(name), sqlc.arg(secret_hash),
        sqlc.narg(expires_at), sqlc.narg(created_by), sqlc.arg(created_by_owner))
RETURNING *;

-- name: GetAPIKey :one
SELECT * FROM api_keys WHERE tenant_id = sqlc.arg(tenant_id) AND id = sqlc.arg(id);

-- name: ListAPIKeys :many
SELECT * FROM api_keys
WHERE tenant_id = sqlc.arg(tenant_id)
  AND (sqlc.narg(principal_id)::uuid IS NULL OR principal_id = sqlc.narg(principal_id))
  AND id > sqlc.arg(after)
ORDER BY id
LIMIT sqlc.arg(lim);

-- name: DeleteAPIKey :execrows
DELETE FROM api_keys WHERE tenant_id = sqlc.arg(tenant_id) AND id = sqlc.arg(id);

-- name: CreateRoleBinding :one
INSERT INTO role_bindings (id, tenant_id, principal_id, role)
VALUES (sqlc.arg(id), sqlc.arg(tenant_id), sqlc.arg(principal_id), sqlc.arg(role))
RETURNING *;

-- name: GetRoleBinding :one
SELECT * FROM role_bindings WHERE tenant_id = sqlc.arg(tenant_id) AND id = sqlc.arg(id);

-- name: ListRoleBindings :many
SELECT * FROM role_bindings
WHERE tenant_id = sqlc.arg(tenant_id)
  AND (sqlc.narg(principal_id)::uuid IS NULL OR principal_id = sqlc.narg(principal_id))
  AND id > sqlc.arg(after)
ORDER BY id
LIMIT sqlc.arg(lim);

-- name: DeleteRoleBinding :execrows
DELETE FROM role_bindings WHERE tenant_id = sqlc.arg(tenant_id) AND id = sqlc.arg(id);

-- name: CountOwners :one
SELECT count(*) FROM role_bindings WHERE tenant_id = sqlc.arg(tenant_id) AND role = 'owner';

-- name: LockTenant :exec
-- Serialises a tenant's IAM changes (owners, their keys and bindings, promotions) and changes of
-- its status: a check made after it holds until the commit.
SELECT id FROM tenants WHERE id = sqlc.arg(id) FOR UPDATE;

-- name: PrincipalRoles :many
SELECT role FROM role_bindings WHERE tenant_id = sqlc.arg(tenant_id) AND principal_id = sqlc.arg(principal_id);

-- name: GetPrincipalByName :one
SELECT * FROM principals WHERE tenant_id = sqlc.arg(tenant_id) AND name = sqlc.arg(name);

-- name: CountUsableOwnerKeys :one
-- Keys that still let an owner in: of a principal with the owner role, not expired, other than
-- the key and the principal being removed (either may be null). Removing the last one would
-- lock the tenant's owners out.
SELECT count(*) FROM api_keys k
WHERE k.tenant_id = sqlc.arg(tenant_id)
  AND (k.expires_at IS NULL OR k.expires_at > now())
  AND k.id IS DISTINCT FROM sqlc.narg(except_key)::text
  AND k.principal_id IS DISTINCT FROM sqlc.narg(except_principal)::uuid
  AND EXISTS (SELECT 1 FROM role_bindings rb WHERE rb.principal_id = k.principal_id AND rb.role = 'owner');

-- name: RevokeKeysNotMintedByOwner :many
-- On promotion to owner: the principal's keys that a non-owner minted (or that predate the
-- record) stop working, so no key held by a non-owner becomes an owner's.
DELETE FROM api_keys
WHERE tenant_id = sqlc.arg(tenant_id) AND principal_id = sqlc.arg(principal_id) AND NOT created_by_owner
RETURNING id;

-- name: LockChildTenant :one
-- A tenant directly below parent, locked for a change of its status: it serialises with the
-- tenant's own IAM changes, which lock the same row (LockTenant).
SELECT * FROM tenants WHERE id = sqlc.arg(id) AND parent_id = sqlc.arg(parent_id) FOR UPDATE;

-- name: SetTenantSuspended :one
-- Suspends (suspended true) or resumes a tenant; suspending a suspended tenant keeps the time.
UPDATE tenants
SET suspended_at = CASE WHEN sqlc.arg(suspended)::boolean THEN COALESCE(suspended_at, now()) END
WHERE id = sqlc.arg(id) AND NOT is_root
RETURNING *;

-- name: TombstoneTenant :one
UPDATE tenants SET deleted_at = COALESCE(deleted_at, now()) WHERE id = sqlc.arg(id) AND NOT is_root
RETURNING *;

-- name: CountTenantLiveNodes :one
SELECT count(*) FROM nodes WHERE tenant_id = sqlc.arg(tenant_id) AND revoked_at IS NULL;

-- name: RevokeTenantNodes :many
-- Revokes every node of a tenant being deleted: renewal, secrets and sessions stop.
UPDATE nodes SET revoked_at = now(), updated_at = now()
WHERE tenant_id = sqlc.arg(tenant_id) AND revoked_at IS NULL
RETURNING id, hostname;

-- name: TenantActiveLeaseIDs :many
-- The leases that have not ended of a tenant, and of other tenants in the tenant's pools.
SELECT l.id FROM pool_leases l
WHERE (l.tenant_id = sqlc.arg(tenant_id) OR l.pool_id IN (SELECT p.id FROM pools p WHERE p.tenant_id = sqlc.arg(tenant_id)))
  AND l.state IN ('pending', 'placed', 'at_risk')
ORDER BY l.id;

-- name: RevokeTenantGrants :exec
-- A deleted tenant's grants end: those of its pools and those it was given.
UPDATE pool_grants SET revoked_at = now(), updated_at = now()
WHERE (tenant_id = sqlc.arg(tenant_id) OR owner_tenant_id = sqlc.arg(tenant_id)) AND revoked_at IS NULL;

-- name: RevokeTenantJoinTokens :exec
-- A deleted tenant's join tokens let no node join.
UPDATE join_tokens SET revoked_at = now() WHERE tenant_id = sqlc.arg(tenant_id) AND revoked_at IS NULL;

-- name: DeleteTenantAPIKeys :execrows
DELETE FROM api_keys WHERE tenant_id = sqlc.arg(tenant_id);

-- name: DeleteTenantPrincipals :execrows
-- With their role bindings (ON DELETE CASCADE); audit rows keep the principals' ids.
DELETE FROM principals WHERE tenant_id = sqlc.arg(tenant_id);

-- name: CreateTenantWithOwner :one
-- A tenant, its owner service account, the account's owner role binding and its API key, in one
-- statement: tenants/create's writes in one round trip instead of four. The tenant's name is
-- the only unique value a caller chooses.
WITH t AS (
    INSERT INTO tenants (id, parent_id, name, display_name)
    VALUES (sqlc.arg(id), sqlc.arg(parent_id), sqlc.arg(name), sqlc.arg(display_name))
    RETURNING *
), p AS (
    INSERT INTO principals (id, tenant_id, kind, name)
    SELECT sqlc.arg(owner_id), t.id, 'service_account', sqlc.arg(owner_name) FROM t
    RETURNING *
), b AS (
    INSERT INTO role_bindings (id, tenant_id, principal_id, role)
    SELECT sqlc.arg(binding_id), p.tenant_id, p.id, 'owner' FROM p
), k AS (
    INSERT INTO api_keys (id, tenant_id, principal_id, name, secret_hash, created_by_owner)
    SELECT sqlc.arg(key_id), p.tenant_id, p.id, p.name, sqlc.arg(secret_hash), true FROM p
)
SELECT sqlc.embed(tenants), sqlc.embed(principals)
FROM t AS tenants, p AS principals;
