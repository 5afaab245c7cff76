-- Tenants' node secrets. API statements take the caller's tenant id; values leave the database
-- only sealed, and only to the gateway (GetSecretForNode).

-- name: LockTenantSecrets :exec
-- Serialises secret creation in a tenant, so the per-tenant limit holds.
SELECT pg_advisory_xact_lock(hashtextextended('secrets:' || sqlc.arg(tenant_id)::uuid::text, 0));

-- name: CountSecrets :one
SELECT count(*) FROM secrets WHERE tenant_id = sqlc.arg(tenant_id);

-- name: CreateSecret :one
-- No row when the tenant already has a secret of that name.
INSERT INTO secrets (id, tenant_id, name, value_sealed)
VALUES (sqlc.arg(id), sqlc.arg(tenant_id), sqlc.arg(name), sqlc.arg(value_sealed))
ON CONFLICT (tenant_id, name) DO NOTHING
RETURNING id, tenant_id, name, created_at, updated_at;

-- name: LockSecret :one
-- The secret of that name, locked for an update of its value.
SELECT id, tenant_id, name, created_at, updated_at FROM secrets
WHERE tenant_id = sqlc.arg(tenant_id) AND name = sqlc.arg(name)
FOR UPDATE;

-- name: UpdateSecretValue :one
UPDATE secrets SET value_sealed = sqlc.arg(value_sealed), updated_at = now()
WHERE tenant_id = sqlc.arg(tenant_id) AND id = sqlc.arg(id)
RETURNING id, tenant_id, name, created_at, updated_at;

-- name: ListSecrets :many
-- Names and times only, by name.
SELECT id, tenant_id, name, created_at, updated_at FROM secrets
WHERE tenant_id = sqlc.arg(tenant_id) AND name > sqlc.arg(after)::text
ORDER BY name
LIMIT sqlc.arg(lim);

-- name: DeleteSecret :one
DELETE FROM secrets WHERE tenant_id = sqlc.arg(tenant_id) AND name = sqlc.arg(name)
RETURNING id;

-- name: GetSecretForNode :one
-- What the gateway needs to answer a node's request for a secret: whether the node is revoked,
-- and the sealed value only when the node's spec names the secret and the node's tenant has it
-- (secret_id and value_sealed are null otherwise). No row when the node does not exist.
SELECT n.revoked_at, s.id AS secret_id, s.value_sealed
FROM nodes n
LEFT JOIN secrets s ON s.tenant_id = n.tenant_id AND s.name = sqlc.arg(name)::text
    AND n.spec -> 'secrets' @> to_jsonb(sqlc.arg(name)::text)
WHERE n.id = sqlc.arg(node_id);
