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
       p.kind, p.name AS principal_name, t.is_root,
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
INSERT INTO api_keys (id, tenant_id, principal_id, name, secret_hash, expires_at)
VALUES (sqlc.arg(id), sqlc.arg(tenant_id), sqlc.arg(principal_id), sqlc.arg(name), sqlc.arg(secret_hash), sqlc.narg(expires_at))
RETURNING *;

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
-- Serialises changes to a tenant's owners, so concurrent removals cannot leave it without one.
SELECT id FROM tenants WHERE id = sqlc.arg(id) FOR UPDATE;

-- name: PrincipalRoles :many
SELECT role FROM role_bindings WHERE tenant_id = sqlc.arg(tenant_id) AND principal_id = sqlc.arg(principal_id);

-- name: GetPrincipalByName :one
SELECT * FROM principals WHERE tenant_id = sqlc.arg(tenant_id) AND name = sqlc.arg(name);
