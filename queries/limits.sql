-- Per-tenant caps (internal/quota). A create takes its cap's lock, then counts what the tenant
-- already holds, in the same transaction as its insert: the lock serialises the tenant's creates
-- of one kind until commit, and each count is a new statement, so in READ COMMITTED it sees
-- the rows of every create that held the lock before. Two concurrent creates cannot both pass.

-- name: LockTenantLimit :exec
-- One advisory lock per (cap, tenant), held until the transaction ends.
SELECT pg_advisory_xact_lock(hashtextextended(sqlc.arg(limit_name)::text || ':' || sqlc.arg(tenant_id)::uuid::text, 0));

-- name: CountTenantNodes :one
-- Nodes that count: neither revoked nor retired.
SELECT count(*) FROM nodes
WHERE tenant_id = sqlc.arg(tenant_id) AND revoked_at IS NULL AND state <> 'retired';

-- name: CountTenantJoinTokens :one
-- Join tokens that can still be used: not revoked, not expired, not used up.
SELECT count(*) FROM join_tokens
WHERE tenant_id = sqlc.arg(tenant_id) AND revoked_at IS NULL AND expires_at > now() AND uses < max_uses;

-- name: CountTenantPendingLeases :one
SELECT count(*) FROM pool_leases WHERE tenant_id = sqlc.arg(tenant_id) AND state = 'pending';

-- name: CountTenantPools :one
SELECT count(*) FROM pools WHERE tenant_id = sqlc.arg(tenant_id);

-- name: CountTenantPrincipals :one
SELECT count(*) FROM principals WHERE tenant_id = sqlc.arg(tenant_id);

-- name: CountTenantAPIKeys :one
-- API keys that still work: not expired (the IAM jobs delete expired keys later).
SELECT count(*) FROM api_keys
WHERE tenant_id = sqlc.arg(tenant_id) AND (expires_at IS NULL OR expires_at > now());

-- name: CountTenantRecentCommands :one
-- Commands the tenant created in the last minute, and in whole seconds (at least 1) when the
-- oldest of them leaves that minute. Command ids are UUIDv7, ordered by creation time: since_id
-- is the smallest id of a moment safely before the minute (the API's clock may differ from the
-- database's), so the scan reads a short range of the (tenant_id, id) index rather than every
-- command the tenant keeps.
SELECT count(*) AS n,
       greatest(1, ceil(extract(epoch FROM coalesce(min(created_at), now()) + interval '1 minute' - now())))::integer AS retry_after_seconds
FROM commands
WHERE tenant_id = sqlc.arg(tenant_id) AND id >= sqlc.arg(since_id)::uuid AND created_at > now() - interval '1 minute';
