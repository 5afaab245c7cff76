-- GPU health (issue 33) as the API shows it: the GPUs of the caller's tenant's nodes (devices of
-- kind 'gpu', one row per GPU UUID), their health history and fleet-wide counts. devices has no
-- tenant of its own: every statement joins nodes and binds the caller's tenant there.

-- name: ListGPUs :many
-- A page of the tenant's GPUs after the key (node_id, idx, id), with the lease that holds each
-- now (any tenant's: the node's owner sees what holds its hardware). The filters combine; an
-- empty one is no filter. pool selects the members of the tenant's pool of that name.
SELECT sqlc.embed(d), n.hostname, a.lease_id
FROM devices d
JOIN nodes n ON n.id = d.node_id
LEFT JOIN allocations a ON a.device_id = d.id AND a.ended_at IS NULL
WHERE n.tenant_id = sqlc.arg(tenant_id) AND d.kind = 'gpu'
  AND (d.node_id, d.idx, d.id) > (sqlc.arg(after_node)::uuid, sqlc.arg(after_idx)::integer, sqlc.arg(after_id)::bigint)
  AND (cardinality(sqlc.arg(health)::text[]) = 0 OR d.health = ANY(sqlc.arg(health)::text[]))
  AND (sqlc.arg(model)::text = '' OR d.model = sqlc.arg(model)::text)
  AND (sqlc.narg(node_id)::uuid IS NULL OR d.node_id = sqlc.narg(node_id)::uuid)
  AND (sqlc.narg(present)::boolean IS NULL OR d.present = sqlc.narg(present)::boolean)
  AND (sqlc.arg(pool)::text = '' OR EXISTS (
      SELECT 1 FROM pools p WHERE p.tenant_id = sqlc.arg(tenant_id) AND p.name = sqlc.arg(pool)::text AND pool_member(p, n)))
ORDER BY d.node_id, d.idx, d.id
LIMIT sqlc.arg(lim);

-- name: GetGPU :one
-- The tenant's GPU of this UUID. A GPU moved to another node of the tenant has a row on each;
-- the present one, else the one updated last, is the GPU.
SELECT sqlc.embed(d), n.hostname, a.lease_id
FROM devices d
JOIN nodes n ON n.id = d.node_id
LEFT JOIN allocations a ON a.device_id = d.id AND a.ended_at IS NULL
WHERE n.tenant_id = sqlc.arg(tenant_id) AND d.kind = 'gpu' AND d.uuid = sqlc.arg(uuid)
ORDER BY d.present DESC, d.updated_at DESC, d.id DESC
LIMIT 1;

-- name: ListGPUHealthChanges :many
-- A GPU's history, newest first.
SELECT * FROM gpu_health_changes
WHERE tenant_id = sqlc.arg(tenant_id) AND device_id = sqlc.arg(device_id)
ORDER BY id DESC
LIMIT sqlc.arg(lim);

-- name: CountGPUsByHealth :many
-- The tenant's GPUs (of the members of its pool named pool, when not empty) by model and health.
SELECT d.model, d.health, count(*)::bigint AS gpus
FROM devices d
JOIN nodes n ON n.id = d.node_id
WHERE n.tenant_id = sqlc.arg(tenant_id) AND d.kind = 'gpu'
  AND (sqlc.arg(pool)::text = '' OR EXISTS (
      SELECT 1 FROM pools p WHERE p.tenant_id = sqlc.arg(tenant_id) AND p.name = sqlc.arg(pool)::text AND pool_member(p, n)))
GROUP BY d.model, d.health
ORDER BY d.model, d.health;

-- name: CountGPUHealthReasons :many
-- The tenant's degraded and unhealthy GPUs by reason (check, code, effect); a GPU with two
-- reasons counts under both, and once under a reason it lists twice.
SELECT r.check_name, r.code, r.effect, count(DISTINCT d.id)::bigint AS gpus
FROM devices d
JOIN nodes n ON n.id = d.node_id
CROSS JOIN LATERAL (
    SELECT COALESCE(e ->> 'check', '')::text AS check_name, COALESCE((e ->> 'code')::bigint, 0)::bigint AS code,
           COALESCE(e ->> 'effect', '')::text AS effect
    FROM jsonb_array_elements(d.health_reasons) AS e
) r
WHERE n.tenant_id = sqlc.arg(tenant_id) AND d.kind = 'gpu' AND d.health <> 'healthy'
  AND (sqlc.arg(pool)::text = '' OR EXISTS (
      SELECT 1 FROM pools p WHERE p.tenant_id = sqlc.arg(tenant_id) AND p.name = sqlc.arg(pool)::text AND pool_member(p, n)))
GROUP BY r.check_name, r.code, r.effect
ORDER BY r.check_name, r.code, r.effect;

-- name: CountNodeGPUHealth :one
-- The tenant's nodes (the members of its pool named pool, when not empty) that a GPU health
-- signal quarantines as a whole, and those whose driver did not answer the last probe.
SELECT count(*) FILTER (WHERE h.quarantined)::bigint AS quarantined_nodes,
       count(*) FILTER (WHERE h.probe_error <> '')::bigint AS nodes_driver_not_answering
FROM node_gpu_health h
JOIN nodes n ON n.id = h.node_id
WHERE n.tenant_id = sqlc.arg(tenant_id)
  AND (sqlc.arg(pool)::text = '' OR EXISTS (
      SELECT 1 FROM pools p WHERE p.tenant_id = sqlc.arg(tenant_id) AND p.name = sqlc.arg(pool)::text AND pool_member(p, n)));

-- name: NodesGPUHealth :many
-- For nodes/get and nodes/list, per node of the tenant among ids: whether a signal quarantines
-- it, how many of its GPUs are unhealthy, and (when with_gpus) the health of each of its GPUs,
-- as a JSON array of {uuid, idx, health, reasons}, to match with the inventory's GPUs.
SELECT n.id AS node_id,
       COALESCE(h.quarantined, false)::boolean AS quarantined,
       (SELECT count(*) FROM devices d WHERE d.node_id = n.id AND d.kind = 'gpu' AND d.health = 'unhealthy')::integer AS unhealthy_gpus,
       CASE WHEN sqlc.arg(with_gpus)::boolean THEN
           (SELECT COALESCE(jsonb_agg(jsonb_build_object('uuid', d.uuid, 'idx', d.idx, 'present', d.present,
                                                         'health', d.health, 'reasons', d.health_reasons)
                                      ORDER BY d.present DESC, d.idx), '[]'::jsonb)
            FROM devices d WHERE d.node_id = n.id AND d.kind = 'gpu')
       ELSE '[]'::jsonb END::jsonb AS gpus
FROM nodes n
LEFT JOIN node_gpu_health h ON h.node_id = n.id
WHERE n.tenant_id = sqlc.arg(tenant_id) AND n.id = ANY(sqlc.arg(ids)::uuid[]);
