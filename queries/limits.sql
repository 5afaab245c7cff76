-- Per-tenant caps (internal/quota). A create takes its cap's lock, then counts what the tenant
-- already holds, in the same transaction as its insert: the lock serialises the tenant's creates
-- of one kind until commit, and each count is a new statement, so in READ COMMITTED it sees
-- the rows of every create that held the lock before. Two concurrent creates cannot both pass.

-- name: LockTenantLimit :exec
-- One advisory lock per (cap, tenant), held until the transaction ends.
SELECT pg_advisory_xact_lock(hashtextextended(sqlc.arg(limit_name)::text || ':' || sqlc.arg(tenant_id)::uuid::text, 0));

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
