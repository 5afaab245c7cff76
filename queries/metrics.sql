-- What /metrics reads from the database at scrape time (behind a short cache in the metrics
-- package). The reconcile queues come from ReconcileQueueStats in reconcile.sql.

-- name: LockHolders :many
-- Live locks per holder: shards and singleton jobs each process holds.
SELECT holder, count(*)::bigint AS locks
FROM locks
WHERE expires_at > now()
GROUP BY holder
ORDER BY holder;

-- name: OutboxLag :many
-- Per sink, the events after its cursor that it will receive (a webhook's sink only its tenant's
-- events of its types), counted up to lim so a large backlog cannot make a scrape slow, and the
-- age of the oldest of them.
SELECT c.sink, lag.events, lag.oldest_seconds
FROM sink_cursors c
LEFT JOIN webhooks w ON w.id = c.webhook_id
CROSS JOIN LATERAL (
    SELECT count(*)::bigint AS events,
           COALESCE(EXTRACT(EPOCH FROM now() - min(p.created_at)), 0)::float8 AS oldest_seconds
    FROM (
        (SELECT o.created_at FROM outbox o
         WHERE c.webhook_id IS NULL AND (o.tx_id, o.id) > (c.tx_id, c.outbox_id)
         ORDER BY o.tx_id, o.id
         LIMIT sqlc.arg(lim))
        UNION ALL
        (SELECT o.created_at FROM outbox o
         WHERE o.tenant_id = w.tenant_id AND (o.tx_id, o.id) > (c.tx_id, c.outbox_id)
           AND (cardinality(w.event_types) = 0 OR o.type = ANY(w.event_types))
         ORDER BY o.tenant_id, o.tx_id, o.id
         LIMIT sqlc.arg(lim))
    ) p
) lag
ORDER BY c.sink;

-- name: GPUsByHealth :many
-- GPUs by model and health over every tenant's nodes, missing ones included: fleet-wide numbers
-- that name no tenant.
SELECT d.model, d.health, count(*)::bigint AS gpus
FROM devices d
WHERE d.kind = 'gpu'
GROUP BY d.model, d.health
ORDER BY d.model, d.health;

-- name: GPUSignalsByCheck :many
-- The signals the daemons report now (their last GPU health snapshots), by check, over every
-- tenant's nodes: fleet-wide numbers that name no tenant.
SELECT COALESCE(s ->> 'check', '')::text AS "check", count(*)::bigint AS signals
FROM node_gpu_health h
CROSS JOIN LATERAL jsonb_array_elements(CASE WHEN jsonb_typeof(h.report -> 'signals') = 'array' THEN h.report -> 'signals' ELSE '[]'::jsonb END) AS s
GROUP BY 1
ORDER BY 1;

-- name: RemediationsByState :many
-- Remediations in progress by state and ladder, and those that ended in service: fleet-wide
-- numbers that name no tenant.
SELECT state, ladder, count(*)::bigint AS remediations
FROM remediations
WHERE state IN ('waiting', 'running', 'service')
GROUP BY state, ladder
ORDER BY state, ladder;

-- name: LeasedGPUUtilization :many
-- What the leased GPUs did over the last five minutes the daemons reported, by tenant, pool and
-- model, as sums (the metrics add them up by model too): utilisation summed over the GPU-minutes
-- that gave one, GPU-seconds held and active.
SELECT m.tenant_id, m.pool_id, l.gpu_model::text AS model,
       sum(m.util_sum)::float8 AS util_sum, sum(m.util_gpus)::bigint AS util_gpus,
       sum(m.gpu_seconds)::bigint AS gpu_seconds, sum(m.active_gpu_seconds)::bigint AS active_gpu_seconds
FROM lease_gpu_minutes m
JOIN pool_leases l ON l.id = m.lease_id
WHERE m.minute >= now() - interval '5 minutes'
GROUP BY m.tenant_id, m.pool_id, l.gpu_model
ORDER BY 1, 2, 3;

-- name: IdleLeaseCount :one
-- Placed leases their pools' idle policies found idle (told, not yet released or busy again).
SELECT count(*)::bigint FROM pool_leases WHERE state = 'placed' AND idle_since IS NOT NULL;
