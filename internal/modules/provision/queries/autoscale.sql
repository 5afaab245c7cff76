-- The provision module's autoscaling pools (provision_pool_scaling, provision_scaling_decisions
-- and the machines scaled pools own), for the poolScaling API and the autoscaler.

-- name: GetTenantPool :one
-- A pool of the tenant, for the API's checks.
SELECT id, name FROM pools WHERE tenant_id = sqlc.arg(tenant_id) AND id = sqlc.arg(id);

-- name: CountPoolScalings :one
-- The tenant's scaled pools, for its limit, under a lock of the tenant's scalings held until the
-- transaction ends, so concurrent sets cannot both pass the limit.
SELECT count(s.pool_id)::bigint
FROM (SELECT pg_advisory_xact_lock(hashtextextended('provision_pool_scaling:' || sqlc.arg(tenant_id)::uuid::text, 0))) l
LEFT JOIN provision_pool_scaling s ON s.tenant_id = sqlc.arg(tenant_id)::uuid;

-- name: UpsertPoolScaling :one
INSERT INTO provision_pool_scaling (pool_id, tenant_id, class, min_machines, max_machines, scale_up_delay_ms, scale_down_idle_ms)
VALUES (sqlc.arg(pool_id), sqlc.arg(tenant_id), sqlc.arg(class), sqlc.arg(min_machines), sqlc.arg(max_machines),
        sqlc.arg(scale_up_delay_ms), sqlc.arg(scale_down_idle_ms))
ON CONFLICT (pool_id) DO UPDATE
SET class = excluded.class, min_machines = excluded.min_machines, max_machines = excluded.max_machines,
    scale_up_delay_ms = excluded.scale_up_delay_ms, scale_down_idle_ms = excluded.scale_down_idle_ms,
    blocked = '', updated_at = now()
RETURNING *;

-- name: GetPoolScaling :one
SELECT * FROM provision_pool_scaling WHERE tenant_id = sqlc.arg(tenant_id) AND pool_id = sqlc.arg(pool_id);

-- name: ListPoolScalings :many
-- A page of the tenant's scaled pools by pool id, after after.
SELECT * FROM provision_pool_scaling
WHERE tenant_id = sqlc.arg(tenant_id) AND pool_id > sqlc.arg(after)
ORDER BY pool_id
LIMIT sqlc.arg(lim);

-- name: DeletePoolScaling :execrows
DELETE FROM provision_pool_scaling WHERE tenant_id = sqlc.arg(tenant_id) AND pool_id = sqlc.arg(pool_id);

-- name: ListScaledPoolIDs :many
-- Every scaled pool, for the autoscaler's resync.
SELECT pool_id FROM provision_pool_scaling ORDER BY pool_id;

-- name: LockScaledPool :one
-- The autoscaler's read of a scaled pool with the pool's name, locked until the transaction ends
-- so one decision is made at a time.
SELECT s.*, p.name AS pool_name
FROM provision_pool_scaling s JOIN pools p ON p.id = s.pool_id
WHERE s.pool_id = sqlc.arg(pool_id)
FOR UPDATE OF s;

-- name: SetScalingBlocked :exec
UPDATE provision_pool_scaling SET blocked = left(sqlc.arg(blocked)::text, 1024) WHERE pool_id = sqlc.arg(pool_id);

-- name: PoolMachines :many
-- The machines of a scaled pool that are not gone, with their node (the one linked, or else the
-- one their join token made, which the lifecycle controller links at its next look), the
-- node's state, whether an allocation holds anything on it, and since when it has been idle: the
-- later of the machine's last step and the end of the node's last allocation.
SELECT m.id, m.name, m.state, m.state_changed_at, n.id AS node_id,
       COALESCE(n.state::text, '')::text AS node_state, COALESCE(n.online, false)::boolean AS node_online,
       EXISTS (SELECT 1 FROM allocations a WHERE a.node_id = n.id AND a.ended_at IS NULL)::boolean AS held,
       GREATEST(m.state_changed_at, (SELECT max(a.ended_at) FROM allocations a WHERE a.node_id = n.id))::timestamptz AS idle_since
FROM provision_machines m
LEFT JOIN nodes n ON n.id = COALESCE(m.node_id, (
    SELECT x.id FROM nodes x
    WHERE m.join_token_id IS NOT NULL AND x.tenant_id = m.tenant_id AND x.join_token_id = m.join_token_id
    ORDER BY x.created_at
    LIMIT 1))
WHERE m.pool_id = sqlc.arg(pool_id) AND m.state <> 'gone'
ORDER BY m.id;

-- name: ListPoolMachines :many
-- The machines of a scaled pool that are not gone, for poolScaling/get.
SELECT * FROM provision_machines
WHERE pool_id = sqlc.arg(pool_id) AND state <> 'gone'
ORDER BY id
LIMIT sqlc.arg(lim);

-- name: CountPoolLiveMachines :many
-- How many machines each of the pools has that are neither gone nor failed.
SELECT pool_id::uuid AS pool_id, count(*)::integer AS machines
FROM provision_machines
WHERE pool_id = ANY(sqlc.arg(pool_ids)::uuid[]) AND state NOT IN ('gone', 'failed')
GROUP BY pool_id;

-- name: ScalePendingLeases :many
-- A scaled pool's pending leases in creation order, with when each was created.
SELECT id, tenant_id, seq, priority, gpus, gpu_model, cpus, memory_bytes, spread, tolerations, duration_ms,
       reservation_id, created_at
FROM pool_leases
WHERE pool_id = sqlc.arg(pool_id) AND state = 'pending'
ORDER BY seq
LIMIT sqlc.arg(lim);

-- name: CreatePoolMachine :one
-- Creates a requested machine of a scaled pool; no row when the tenant has a machine of that
-- name that is not gone.
INSERT INTO provision_machines (id, tenant_id, class, name, pool_id, pool)
VALUES (sqlc.arg(id), sqlc.arg(tenant_id), sqlc.arg(class), sqlc.arg(name), sqlc.arg(pool_id), sqlc.arg(pool))
ON CONFLICT (tenant_id, name) WHERE state <> 'gone' DO NOTHING
RETURNING *;

-- name: NodeHoldsAllocations :one
-- Whether an allocation holds anything on the node now; run it after locking the node.
SELECT EXISTS (SELECT 1 FROM allocations WHERE node_id = sqlc.arg(node_id) AND ended_at IS NULL)::boolean;

-- name: AddScalingDecision :exec
-- Records a decision and keeps the pool's latest 100.
WITH added AS (
    INSERT INTO provision_scaling_decisions (pool_id, action, count, machine_ids, reason)
    VALUES (sqlc.arg(pool_id), sqlc.arg(action), sqlc.arg(count), sqlc.arg(machine_ids)::uuid[], left(sqlc.arg(reason)::text, 1024))
    RETURNING id
)
DELETE FROM provision_scaling_decisions d
WHERE d.pool_id = sqlc.arg(pool_id)
  AND d.id < (SELECT min(k.id) FROM (SELECT id FROM provision_scaling_decisions
                                     WHERE pool_id = sqlc.arg(pool_id) ORDER BY id DESC LIMIT 99) k);

-- name: ListScalingDecisions :many
-- A pool's latest decisions, newest first.
SELECT * FROM provision_scaling_decisions
WHERE pool_id = sqlc.arg(pool_id)
ORDER BY id DESC
LIMIT sqlc.arg(lim);
