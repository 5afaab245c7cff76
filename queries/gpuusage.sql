-- GPU utilisation per lease (migration 0039): the gateway's write of a daemon's per-minute
-- GpuUsage, and the roll-ups leases/get and leases/list show.

-- name: RecordGPUUsage :execrows
-- Stores one minute of a node's GPU usage on the leases that hold its GPUs now, in one
-- statement: the summaries (parallel arrays, one element per GPU; -1 for a value the daemon did
-- not give) are joined to the node's devices by UUID and to the allocations held now (that
-- started before the minute ended), and grouped by lease: one row per lease for the node and
-- the minute. A GPU no lease holds writes nothing, unless an idle lease lent it (then it is the
-- lender's); a GPU listed twice counts once. A minute stored before is replaced. Returns the rows
-- written. model is the GPUs' model (a lease's GPUs are of one model; the least, should a node
-- report two).
INSERT INTO lease_gpu_minutes AS m (lease_id, node_id, minute, tenant_id, pool_id, gpus, gpu_seconds,
                                    active_gpu_seconds, util_sum, util_gpus, util_max, memory_peak_bytes, model)
SELECT a.lease_id, d.node_id, sqlc.arg(minute)::timestamptz, l.tenant_id, l.pool_id,
       count(*)::integer, (count(*) * 60)::bigint,
       COALESCE(sum(NULLIF(u.active_seconds, -1)), 0)::bigint,
       COALESCE(sum(NULLIF(u.util_mean, -1)), 0)::float8,
       count(NULLIF(u.util_mean, -1))::integer,
       max(NULLIF(u.util_max, -1))::real,
       COALESCE(max(NULLIF(u.memory_used, -1)), 0)::bigint,
       min(d.model)::text
FROM (
    SELECT DISTINCT ON (s.uuid) s.uuid, s.util_mean, s.util_max, s.active_seconds, s.memory_used
    FROM (
        SELECT (sqlc.arg(uuids)::text[])[i] AS uuid, (sqlc.arg(util_means)::float8[])[i] AS util_mean,
               (sqlc.arg(util_maxes)::float8[])[i] AS util_max, (sqlc.arg(active_seconds)::integer[])[i] AS active_seconds,
               (sqlc.arg(memory_used)::bigint[])[i] AS memory_used
        FROM generate_subscripts(sqlc.arg(uuids)::text[], 1) AS i
    ) s
    WHERE s.uuid <> ''
    ORDER BY s.uuid
) u
-- uuid <> '' lets the partial index devices_node_uuid find the node's GPUs (else a scan of every device).
JOIN devices d ON d.node_id = sqlc.arg(node_id) AND d.kind = 'gpu' AND d.uuid <> '' AND d.uuid = u.uuid
CROSS JOIN LATERAL (
    SELECT a.lease_id FROM allocations a
    WHERE a.device_id = d.id AND a.ended_at IS NULL
      AND a.started_at < sqlc.arg(minute)::timestamptz + interval '1 minute'
    UNION ALL
    -- A GPU lent by an idle lease (migration 0040) that no allocation held in the minute: on
    -- the lease that lent it, so that the idle job sees the holder use it anyway.
    SELECT ll.lease_id FROM lease_loans ll
    WHERE ll.device_id = d.id AND ll.since <= sqlc.arg(minute)::timestamptz
      AND NOT EXISTS (SELECT 1 FROM allocations b
                      WHERE b.device_id = d.id AND b.started_at < sqlc.arg(minute)::timestamptz + interval '1 minute'
                        AND (b.ended_at IS NULL OR b.ended_at > sqlc.arg(minute)::timestamptz))
) a
JOIN pool_leases l ON l.id = a.lease_id
GROUP BY a.lease_id, d.node_id, l.tenant_id, l.pool_id
ON CONFLICT (lease_id, node_id, minute) DO UPDATE
SET gpus = excluded.gpus, gpu_seconds = excluded.gpu_seconds, active_gpu_seconds = excluded.active_gpu_seconds,
    util_sum = excluded.util_sum, util_gpus = excluded.util_gpus, util_max = excluded.util_max,
    memory_peak_bytes = excluded.memory_peak_bytes, model = excluded.model;

-- name: LeaseUtilization :many
-- The utilisation of the tenant's leases among lease_ids, summed over every node and minute
-- stored; a lease without a sample has no row.
SELECT m.lease_id,
       sum(m.gpu_seconds)::bigint AS gpu_seconds_held,
       sum(m.active_gpu_seconds)::bigint AS gpu_seconds_active,
       COALESCE(sum(m.util_sum) / NULLIF(sum(m.util_gpus), 0), 0)::float8 AS mean_utilization,
       max(m.memory_peak_bytes)::bigint AS peak_memory_bytes,
       count(DISTINCT m.minute)::bigint AS sampled_minutes,
       max(m.minute)::timestamptz AS last_minute
FROM lease_gpu_minutes m
WHERE m.tenant_id = sqlc.arg(tenant_id) AND m.lease_id = ANY(sqlc.arg(lease_ids)::uuid[])
GROUP BY m.lease_id;
