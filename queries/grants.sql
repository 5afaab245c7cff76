-- Grants: a pool's owner shares the pool with other tenants (pools/grant), each grant with a
-- nominal quota, a borrowing limit and a weight (migrations/0019_shared_capacity.sql); and the
-- preemptions in an owner's pools. API statements take the caller's tenant id, as the owner
-- (owner_tenant_id), the grantee (tenant_id), or either.

-- name: GranteeTenant :one
-- The tenant a grant names, read only to check that it exists and is neither suspended nor
-- deleted; share-locked, so a suspension or deletion (which lock the row for update) waits for
-- the grant to commit, or commits first and the grant sees it.
SELECT id, suspended_at, deleted_at FROM tenants WHERE id = sqlc.arg(id) FOR SHARE;

-- name: UpsertPoolGrant :one
-- Grants the owner's pool to a tenant, or changes the grant it has (one active grant per pool and
-- grantee); after a revoke a new grant is made and the revoked one stays for the record.
INSERT INTO pool_grants (id, pool_id, owner_tenant_id, tenant_id, nominal, borrowing_limit, weight)
VALUES (sqlc.arg(id), sqlc.arg(pool_id), sqlc.arg(owner_tenant_id), sqlc.arg(tenant_id), sqlc.arg(nominal),
        sqlc.arg(borrowing_limit), sqlc.arg(weight))
ON CONFLICT (pool_id, tenant_id) WHERE revoked_at IS NULL DO UPDATE
SET nominal = excluded.nominal, borrowing_limit = excluded.borrowing_limit, weight = excluded.weight,
    updated_at = now()
RETURNING *;

-- name: RevokePoolGrant :one
-- Revokes the owner's active grant of a pool to a tenant.
UPDATE pool_grants
SET revoked_at = now(), updated_at = now()
WHERE owner_tenant_id = sqlc.arg(owner_tenant_id) AND pool_id = sqlc.arg(pool_id) AND tenant_id = sqlc.arg(tenant_id)
  AND revoked_at IS NULL
RETURNING *;

-- name: LatestPoolGrant :one
-- The owner's latest grant of a pool to a tenant, revoked or not.
SELECT * FROM pool_grants
WHERE owner_tenant_id = sqlc.arg(owner_tenant_id) AND pool_id = sqlc.arg(pool_id) AND tenant_id = sqlc.arg(tenant_id)
ORDER BY created_at DESC, id DESC
LIMIT 1;

-- name: LockPendingGranteeLeases :many
-- A grantee's pending leases in a pool of the owner, locked: a lease the placer places meanwhile
-- is no longer pending when the lock is granted, and is left to run.
SELECT l.id
FROM pool_leases l
JOIN pools p ON p.id = l.pool_id AND p.tenant_id = sqlc.arg(owner_tenant_id)
WHERE l.pool_id = sqlc.arg(pool_id) AND l.tenant_id = sqlc.arg(grantee_tenant_id) AND l.state = 'pending'
ORDER BY l.seq
FOR UPDATE OF l;

-- name: ListPoolGrants :many
-- Grants the tenant sees, by id: those of its pools (it owns them) and its own (it is the
-- grantee), never another grantee's grant of another owner's pool.
SELECT * FROM pool_grants
WHERE (owner_tenant_id = sqlc.arg(tenant_id) OR tenant_id = sqlc.arg(tenant_id))
  AND (sqlc.narg(pool_id)::uuid IS NULL OR pool_id = sqlc.narg(pool_id)::uuid)
  AND (sqlc.arg(include_revoked)::boolean OR revoked_at IS NULL)
  AND id > sqlc.arg(after)
ORDER BY id
LIMIT sqlc.arg(lim);

-- name: PoolVisibleToTenant :one
-- Whether the pool is the tenant's or has been granted to it (even if revoked since).
SELECT EXISTS (
    SELECT 1 FROM pools p WHERE p.id = sqlc.arg(pool_id) AND p.tenant_id = sqlc.arg(tenant_id)
    UNION ALL
    SELECT 1 FROM pool_grants g WHERE g.pool_id = sqlc.arg(pool_id) AND g.tenant_id = sqlc.arg(tenant_id)
);

-- name: PoolGrantUsage :many
-- What each grantee's placed and at-risk leases in the granted pool hold, by grant and GPU model
-- (CPU and memory leases under an empty model), for grants the tenant sees.
SELECT g.id AS grant_id, l.gpu_model,
       sum(l.gpus)::bigint AS gpus, sum(l.cpus)::bigint AS cpus, sum(l.memory_bytes)::bigint AS memory_bytes
FROM pool_grants g
JOIN pool_leases l ON l.pool_id = g.pool_id AND l.tenant_id = g.tenant_id AND l.state IN ('placed', 'at_risk')
WHERE g.id = ANY(sqlc.arg(ids)::uuid[])
  AND (g.owner_tenant_id = sqlc.arg(tenant_id) OR g.tenant_id = sqlc.arg(tenant_id))
GROUP BY g.id, l.gpu_model
ORDER BY g.id, l.gpu_model;

-- name: ListGrantedPools :many
-- Pools of other tenants granted to the tenant (active grants), with the grant, by pool id.
SELECT sqlc.embed(p), sqlc.embed(g)
FROM pool_grants g
JOIN pools p ON p.id = g.pool_id
WHERE g.tenant_id = sqlc.arg(tenant_id) AND g.revoked_at IS NULL AND p.id > sqlc.arg(after)
ORDER BY p.id
LIMIT sqlc.arg(lim);

-- name: GetGrantedPool :one
-- A pool granted to the tenant (an active grant), with the grant.
SELECT sqlc.embed(p), sqlc.embed(g)
FROM pool_grants g
JOIN pools p ON p.id = g.pool_id
WHERE g.tenant_id = sqlc.arg(tenant_id) AND g.revoked_at IS NULL AND p.id = sqlc.arg(id);

-- name: ListPoolPreemptions :many
-- Leases preempted in the tenant's pools (whoever held them) at or after since, newest first,
-- before the key (preempted_at, id) of the previous page's last row when one is given.
SELECT l.id, l.pool_id, l.tenant_id, l.gpus, l.gpu_model, l.cpus, l.memory_bytes, l.priority, l.reason,
       l.preempted_at::timestamptz AS preempted_at
FROM pools p
JOIN pool_leases l ON l.pool_id = p.id
WHERE p.tenant_id = sqlc.arg(tenant_id)
  AND (sqlc.narg(pool_id)::uuid IS NULL OR p.id = sqlc.narg(pool_id)::uuid)
  AND l.state = 'preempted' AND l.preempted_at IS NOT NULL AND l.preempted_at >= sqlc.arg(since)::timestamptz
  AND (sqlc.narg(before_at)::timestamptz IS NULL
       OR (l.preempted_at, l.id) < (sqlc.narg(before_at)::timestamptz, sqlc.arg(before_id)::uuid))
ORDER BY l.preempted_at DESC, l.id DESC
LIMIT sqlc.arg(lim);
