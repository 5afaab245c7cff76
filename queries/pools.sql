-- Pools: a tenant's groups of nodes that leases draw capacity from, and their quotas. API
-- statements take the caller's tenant id.
--
-- A node is a member of a pool when it belongs to the pool's tenant, is neither revoked nor
-- retired, and is listed in node_ids, carries every label of a non-empty node_selector, or has
-- the pool's name as its pool (from its join token). That predicate is the SQL function
-- pool_member (migrations/0016_pool_membership.sql), which every statement that needs
-- membership calls.

-- name: CreatePool :one
-- A null preemption_grace_ms is the column's default, 30 seconds (capacity.DefaultPreemptionGrace);
-- null tunnel_ports are none; a null gpu_health_policy overrides nothing; null remediation
-- settings are the columns' defaults (automatic, one node at a time, one per rack, no override).
INSERT INTO pools (id, tenant_id, name, description, node_selector, node_ids, preemption_grace_ms, priority_preemption,
                   tunnel_ports, gpu_health_policy, topology_levels, gang_reservation_wait_ms,
                   remediation_auto, remediation_max_nodes, remediation_domain, remediation_override, idle_policy)
VALUES (sqlc.arg(id), sqlc.arg(tenant_id), sqlc.arg(name), sqlc.arg(description), sqlc.arg(node_selector),
        sqlc.arg(node_ids)::uuid[], COALESCE(sqlc.narg(preemption_grace_ms)::bigint, 30000),
        sqlc.arg(priority_preemption), COALESCE(sqlc.narg(tunnel_ports)::integer[], '{}'),
        COALESCE(sqlc.narg(gpu_health_policy)::jsonb, '{}'), COALESCE(sqlc.narg(topology_levels)::text[], '{}'),
        COALESCE(sqlc.narg(gang_reservation_wait_ms)::bigint, 300000),
        COALESCE(sqlc.narg(remediation_auto)::boolean, true), COALESCE(sqlc.narg(remediation_max_nodes)::integer, 1),
        COALESCE(sqlc.narg(remediation_domain)::text, 'rack'), COALESCE(sqlc.narg(remediation_override)::jsonb, '{}'),
        COALESCE(sqlc.narg(idle_policy)::jsonb, '{}'))
RETURNING *;

-- name: GetPool :one
SELECT * FROM pools WHERE tenant_id = sqlc.arg(tenant_id) AND id = sqlc.arg(id);

-- name: LockPool :one
-- A pool of the tenant, locked against concurrent updates, deletion and new leases.
SELECT * FROM pools WHERE tenant_id = sqlc.arg(tenant_id) AND id = sqlc.arg(id) FOR UPDATE;

-- name: ListPools :many
SELECT * FROM pools
WHERE tenant_id = sqlc.arg(tenant_id) AND id > sqlc.arg(after)
ORDER BY id
LIMIT sqlc.arg(lim);

-- name: UpdatePool :one
-- Replaces the fields given (a null leaves one as it is).
UPDATE pools
SET description = COALESCE(sqlc.narg(description), description),
    node_selector = COALESCE(sqlc.narg(node_selector), node_selector),
    node_ids = COALESCE(sqlc.narg(node_ids)::uuid[], node_ids),
    preemption_grace_ms = COALESCE(sqlc.narg(preemption_grace_ms)::bigint, preemption_grace_ms),
    priority_preemption = COALESCE(sqlc.narg(priority_preemption)::boolean, priority_preemption),
    tunnel_ports = COALESCE(sqlc.narg(tunnel_ports)::integer[], tunnel_ports),
    gpu_health_policy = COALESCE(sqlc.narg(gpu_health_policy)::jsonb, gpu_health_policy),
    topology_levels = COALESCE(sqlc.narg(topology_levels)::text[], topology_levels),
    gang_reservation_wait_ms = COALESCE(sqlc.narg(gang_reservation_wait_ms)::bigint, gang_reservation_wait_ms),
    remediation_auto = COALESCE(sqlc.narg(remediation_auto)::boolean, remediation_auto),
    remediation_max_nodes = COALESCE(sqlc.narg(remediation_max_nodes)::integer, remediation_max_nodes),
    remediation_domain = COALESCE(sqlc.narg(remediation_domain)::text, remediation_domain),
    remediation_override = COALESCE(sqlc.narg(remediation_override)::jsonb, remediation_override),
    idle_policy = COALESCE(sqlc.narg(idle_policy)::jsonb, idle_policy),
    updated_at = now()
WHERE tenant_id = sqlc.arg(tenant_id) AND id = sqlc.arg(id)
RETURNING *;

-- name: EnqueuePoolGPUHealth :exec
-- Queues the members of the tenant's pool whose GPU health a change of the pool's policy or
-- membership may change (those with signals, reasons, or a GPU that is not healthy or missing)
-- for the health reconciler (kind gpuhealth.ReconcileKind); a node with none of those is healthy
-- under any policy.
INSERT INTO reconcile_queue (kind, key)
SELECT sqlc.arg(kind)::text, n.id::text
FROM pools p
JOIN nodes n ON pool_member(p, n)
WHERE p.tenant_id = sqlc.arg(tenant_id) AND p.id = sqlc.arg(id)
  AND (EXISTS (SELECT 1 FROM node_gpu_health h WHERE h.node_id = n.id
               AND (jsonb_array_length(COALESCE(h.report -> 'signals', '[]'::jsonb)) > 0 OR h.reasons <> '[]'::jsonb OR h.quarantined))
       OR EXISTS (SELECT 1 FROM devices d WHERE d.node_id = n.id AND d.kind = 'gpu' AND (d.health <> 'healthy' OR NOT d.present)))
ON CONFLICT (kind, key) DO UPDATE
SET due_at = LEAST(reconcile_queue.due_at, now()), generation = reconcile_queue.generation + 1, enqueued_at = now();

-- name: DeletePool :execrows
DELETE FROM pools WHERE tenant_id = sqlc.arg(tenant_id) AND id = sqlc.arg(id);

-- name: CountActivePoolLeases :one
SELECT count(*)::bigint FROM pool_leases WHERE pool_id = sqlc.arg(pool_id) AND state IN ('pending', 'placed', 'at_risk');

-- name: TenantNodesAmong :many
-- Which of ids are nodes of the tenant.
SELECT id FROM nodes WHERE tenant_id = sqlc.arg(tenant_id) AND id = ANY(sqlc.arg(ids)::uuid[]);

-- name: PoolGPUCapacity :many
-- GPUs of the pools' members by model: all of them, those on schedulable nodes (ready, online),
-- those held by leases, and those free on schedulable nodes.
SELECT p.id AS pool_id, d.model,
       count(*)::bigint AS total,
       count(*) FILTER (WHERE n.state = 'ready' AND n.online)::bigint AS schedulable,
       count(a.id)::bigint AS allocated,
       count(*) FILTER (WHERE n.state = 'ready' AND n.online AND a.id IS NULL)::bigint AS available
FROM pools p
JOIN nodes n ON pool_member(p, n)
JOIN devices d ON d.node_id = n.id AND d.present
LEFT JOIN allocations a ON a.device_id = d.id AND a.ended_at IS NULL
WHERE p.id = ANY(sqlc.arg(pool_ids)::uuid[])
GROUP BY p.id, d.model
ORDER BY p.id, d.model;

-- name: PoolNodeCapacity :many
-- Members of the pools, CPUs and memory: all, and held by leases.
SELECT p.id AS pool_id,
       count(n.id)::bigint AS nodes,
       count(n.id) FILTER (WHERE n.state = 'ready' AND n.online)::bigint AS schedulable_nodes,
       COALESCE(sum(r.cpus), 0)::bigint AS cpus,
       COALESCE(sum(r.cpus_used), 0)::bigint AS cpus_used,
       COALESCE(sum(r.memory_bytes), 0)::bigint AS memory_bytes,
       COALESCE(sum(r.memory_used), 0)::bigint AS memory_used,
       COALESCE(max(r.cpus), 0)::bigint AS max_node_cpus,
       COALESCE(max(r.memory_bytes), 0)::bigint AS max_node_memory_bytes
FROM pools p
LEFT JOIN nodes n ON pool_member(p, n)
LEFT JOIN node_resources r ON r.node_id = n.id
WHERE p.id = ANY(sqlc.arg(pool_ids)::uuid[])
GROUP BY p.id
ORDER BY p.id;

-- name: PoolGPUModels :many
-- GPUs of a pool's members by model, for admission: how many there are at all, and the most on
-- one node.
SELECT g.model::text AS model, sum(g.n::bigint)::bigint AS total, max(g.n::bigint)::bigint AS max_per_node
FROM pools p
JOIN nodes n ON pool_member(p, n)
JOIN node_resources r ON r.node_id = n.id
CROSS JOIN LATERAL jsonb_each_text(r.gpus) AS g (model, n)
WHERE p.id = sqlc.arg(pool_id)
GROUP BY g.model
ORDER BY g.model;

-- name: GetPoolQuota :one
SELECT * FROM pool_quotas WHERE tenant_id = sqlc.arg(tenant_id) AND pool_id = sqlc.arg(pool_id);

-- name: LockPoolQuota :one
-- The quota, locked: concurrent admissions against one quota run one after the other.
SELECT * FROM pool_quotas WHERE tenant_id = sqlc.arg(tenant_id) AND pool_id = sqlc.arg(pool_id) FOR UPDATE;

-- name: ListPoolQuotas :many
SELECT * FROM pool_quotas WHERE pool_id = ANY(sqlc.arg(pool_ids)::uuid[]) ORDER BY pool_id, tenant_id;

-- name: UpsertPoolQuota :one
INSERT INTO pool_quotas (tenant_id, pool_id, max_gpus, max_cpus, max_memory_bytes, max_leases)
VALUES (sqlc.arg(tenant_id), sqlc.arg(pool_id), sqlc.narg(max_gpus), sqlc.narg(max_cpus), sqlc.narg(max_memory_bytes), sqlc.narg(max_leases))
ON CONFLICT (tenant_id, pool_id) DO UPDATE
SET max_gpus = excluded.max_gpus, max_cpus = excluded.max_cpus, max_memory_bytes = excluded.max_memory_bytes,
    max_leases = excluded.max_leases, updated_at = now()
RETURNING *;

-- name: DeletePoolQuota :exec
DELETE FROM pool_quotas WHERE tenant_id = sqlc.arg(tenant_id) AND pool_id = sqlc.arg(pool_id);

-- name: ListAllPoolIDs :many
-- Every pool, for the placer's resync.
SELECT id FROM pools ORDER BY id;
