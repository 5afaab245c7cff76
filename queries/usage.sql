-- Usage: hourly totals from the metering records (capacity.sql writes the records), and what the
-- API reads. Amounts are quantity-seconds (GPU-seconds, CPU-seconds, MiB-seconds), exact; an
-- unhealthy_amount is the part of an amount held on an unhealthy GPU (migration 0034).

-- name: AggregateUsage :one
-- Adds up to lim unaggregated records into usage_hourly and marks them; returns how many.
WITH batch AS (
    SELECT id FROM usage_records WHERE NOT aggregated ORDER BY id LIMIT sqlc.arg(lim) FOR UPDATE SKIP LOCKED
), marked AS (
    UPDATE usage_records u SET aggregated = true
    FROM batch
    WHERE u.id = batch.id
    RETURNING u.tenant_id, u.pool_id, u.resource, u.model,
              date_bin('1 hour', u.period_start, '2000-01-01 00:00:00+00') AS hour,
              u.quantity * EXTRACT(EPOCH FROM u.period_end - u.period_start) AS amount, u.unhealthy_amount
), summed AS (
    INSERT INTO usage_hourly (tenant_id, hour, pool_id, resource, model, amount, unhealthy_amount, records)
    SELECT m.tenant_id, m.hour, m.pool_id, m.resource, m.model, sum(m.amount), sum(m.unhealthy_amount), count(*)
    FROM marked m
    GROUP BY m.tenant_id, m.hour, m.pool_id, m.resource, m.model
    ON CONFLICT (tenant_id, hour, pool_id, resource, model) DO UPDATE
    SET amount = usage_hourly.amount + excluded.amount, unhealthy_amount = usage_hourly.unhealthy_amount + excluded.unhealthy_amount,
        records = usage_hourly.records + excluded.records, updated_at = now()
    RETURNING 1
)
SELECT count(*)::bigint AS records FROM marked;

-- name: UsageBacklog :one
-- The records not aggregated yet, and the age of the oldest (seconds; 0 when none).
SELECT count(*)::bigint AS records,
       COALESCE(EXTRACT(EPOCH FROM now() - min(created_at)), 0)::float8 AS oldest_age_seconds
FROM usage_records
WHERE NOT aggregated;

-- name: QueryUsageHourly :many
-- The caller's tenant's own leases' usage, in whichever pools (its own or granted ones), with
-- the GPU rows' active GPU-seconds and utilisation sums from lease_gpu_minutes of the same pool,
-- model and hour (util_sum / util_gpus is the mean; util_gpus 0: no sample).
WITH used AS (
    SELECT h.hour, h.pool_id, h.resource, h.model, h.amount, h.unhealthy_amount
    FROM usage_hourly h
    WHERE h.tenant_id = sqlc.arg(tenant_id) AND h.hour >= sqlc.arg(starts_at)::timestamptz AND h.hour < sqlc.arg(ends_at)::timestamptz
      AND (sqlc.narg(pool_id)::uuid IS NULL OR h.pool_id = sqlc.narg(pool_id))
    ORDER BY h.hour, h.pool_id, h.resource, h.model
    LIMIT sqlc.arg(lim)
), gpu AS (
    SELECT date_bin('1 hour', m.minute, '2000-01-01 00:00:00+00') AS hour, m.pool_id, m.model,
           sum(m.active_gpu_seconds) AS active, sum(m.util_sum) AS util_sum, sum(m.util_gpus) AS util_gpus
    FROM lease_gpu_minutes m
    WHERE m.tenant_id = sqlc.arg(tenant_id) AND m.minute >= sqlc.arg(starts_at)::timestamptz AND m.minute < sqlc.arg(ends_at)::timestamptz + interval '1 hour'
          AND date_bin('1 hour', m.minute, '2000-01-01 00:00:00+00') >= sqlc.arg(starts_at)::timestamptz
          AND date_bin('1 hour', m.minute, '2000-01-01 00:00:00+00') < sqlc.arg(ends_at)::timestamptz
          AND (sqlc.narg(pool_id)::uuid IS NULL OR m.pool_id = sqlc.narg(pool_id))
          -- Only the rows the used rows (a page of them) carry.
          AND EXISTS (SELECT 1 FROM used u WHERE u.resource = 'gpu' AND u.pool_id = m.pool_id AND u.model = m.model AND u.hour = date_bin('1 hour', m.minute, '2000-01-01 00:00:00+00'))
    GROUP BY 1, m.pool_id, m.model
)
SELECT u.hour, u.pool_id, u.resource, u.model, u.amount::float8 AS amount, u.unhealthy_amount::float8 AS unhealthy_amount,
       COALESCE(g.active, 0)::float8 AS active_amount, COALESCE(g.util_sum, 0)::float8 AS util_sum,
       COALESCE(g.util_gpus, 0)::bigint AS util_gpus
FROM used u
LEFT JOIN gpu g ON u.resource = 'gpu' AND g.hour = u.hour AND g.pool_id = u.pool_id AND g.model = u.model
ORDER BY u.hour, u.pool_id, u.resource, u.model;

-- name: QueryUsageTotals :many
-- The caller's tenant's own leases' usage, in whichever pools (its own or granted ones); at most
-- lim rows; with the GPU rows' active GPU-seconds and utilisation sums from lease_gpu_minutes of
-- the same pool, model and hours, as QueryUsageHourly.
WITH used AS (
    SELECT h.pool_id, h.resource, h.model, sum(h.amount) AS amount, sum(h.unhealthy_amount) AS unhealthy_amount
    FROM usage_hourly h
    WHERE h.tenant_id = sqlc.arg(tenant_id) AND h.hour >= sqlc.arg(starts_at)::timestamptz AND h.hour < sqlc.arg(ends_at)::timestamptz
      AND (sqlc.narg(pool_id)::uuid IS NULL OR h.pool_id = sqlc.narg(pool_id))
    GROUP BY h.pool_id, h.resource, h.model
    ORDER BY h.pool_id, h.resource, h.model
    LIMIT sqlc.arg(lim)
), gpu AS (
    SELECT m.pool_id, m.model, sum(m.active_gpu_seconds) AS active, sum(m.util_sum) AS util_sum, sum(m.util_gpus) AS util_gpus
    FROM lease_gpu_minutes m
    WHERE m.tenant_id = sqlc.arg(tenant_id) AND m.minute >= sqlc.arg(starts_at)::timestamptz AND m.minute < sqlc.arg(ends_at)::timestamptz + interval '1 hour'
          AND date_bin('1 hour', m.minute, '2000-01-01 00:00:00+00') >= sqlc.arg(starts_at)::timestamptz
          AND date_bin('1 hour', m.minute, '2000-01-01 00:00:00+00') < sqlc.arg(ends_at)::timestamptz
          AND (sqlc.narg(pool_id)::uuid IS NULL OR m.pool_id = sqlc.narg(pool_id))
          -- Only the rows the used rows (a page of them) carry.
          AND EXISTS (SELECT 1 FROM used u WHERE u.resource = 'gpu' AND u.pool_id = m.pool_id AND u.model = m.model)
    GROUP BY m.pool_id, m.model
)
SELECT u.pool_id, u.resource, u.model, u.amount::float8 AS amount, u.unhealthy_amount::float8 AS unhealthy_amount,
       COALESCE(g.active, 0)::float8 AS active_amount, COALESCE(g.util_sum, 0)::float8 AS util_sum,
       COALESCE(g.util_gpus, 0)::bigint AS util_gpus
FROM used u
LEFT JOIN gpu g ON u.resource = 'gpu' AND g.pool_id = u.pool_id AND g.model = u.model
ORDER BY u.pool_id, u.resource, u.model;

-- name: QueryOwnedPoolsUsageHourly :many
-- Every tenant's usage in the pools the caller's tenant owns: joined with pools by the caller's
-- tenant, so the usage of a pool deleted since is no longer read this way; with the GPU rows'
-- active GPU-seconds and utilisation sums, as QueryUsageHourly.
WITH used AS (
    SELECT u.hour, u.tenant_id, u.pool_id, u.resource, u.model, u.amount, u.unhealthy_amount
    FROM usage_hourly u
    JOIN pools p ON p.id = u.pool_id AND p.tenant_id = sqlc.arg(tenant_id)
    WHERE u.hour >= sqlc.arg(starts_at)::timestamptz AND u.hour < sqlc.arg(ends_at)::timestamptz
      AND (sqlc.narg(pool_id)::uuid IS NULL OR u.pool_id = sqlc.narg(pool_id))
    ORDER BY u.hour, u.tenant_id, u.pool_id, u.resource, u.model
    LIMIT sqlc.arg(lim)
), gpu AS (
    SELECT date_bin('1 hour', m.minute, '2000-01-01 00:00:00+00') AS hour, m.tenant_id, m.pool_id, m.model,
           sum(m.active_gpu_seconds) AS active, sum(m.util_sum) AS util_sum, sum(m.util_gpus) AS util_gpus
    FROM lease_gpu_minutes m
    JOIN pools p ON p.id = m.pool_id AND p.tenant_id = sqlc.arg(tenant_id)
    WHERE m.minute >= sqlc.arg(starts_at)::timestamptz AND m.minute < sqlc.arg(ends_at)::timestamptz + interval '1 hour'
          AND date_bin('1 hour', m.minute, '2000-01-01 00:00:00+00') >= sqlc.arg(starts_at)::timestamptz
          AND date_bin('1 hour', m.minute, '2000-01-01 00:00:00+00') < sqlc.arg(ends_at)::timestamptz
          AND (sqlc.narg(pool_id)::uuid IS NULL OR m.pool_id = sqlc.narg(pool_id))
          -- Only the rows the used rows (a page of them) carry.
          AND EXISTS (SELECT 1 FROM used u WHERE u.resource = 'gpu' AND u.pool_id = m.pool_id AND u.model = m.model AND u.tenant_id = m.tenant_id AND u.hour = date_bin('1 hour', m.minute, '2000-01-01 00:00:00+00'))
    GROUP BY 1, m.tenant_id, m.pool_id, m.model
)
SELECT u.hour, u.tenant_id, u.pool_id, u.resource, u.model, u.amount::float8 AS amount,
       u.unhealthy_amount::float8 AS unhealthy_amount,
       COALESCE(g.active, 0)::float8 AS active_amount, COALESCE(g.util_sum, 0)::float8 AS util_sum,
       COALESCE(g.util_gpus, 0)::bigint AS util_gpus
FROM used u
LEFT JOIN gpu g ON u.resource = 'gpu' AND g.hour = u.hour AND g.tenant_id = u.tenant_id AND g.pool_id = u.pool_id AND g.model = u.model
ORDER BY u.hour, u.tenant_id, u.pool_id, u.resource, u.model;

-- name: QueryOwnedPoolsUsageTotals :many
-- Every tenant's usage in the pools the caller's tenant owns, as QueryOwnedPoolsUsageHourly:
-- the tenant efficiency table of a pool's owner.
WITH used AS (
    SELECT u.tenant_id, u.pool_id, u.resource, u.model, sum(u.amount) AS amount, sum(u.unhealthy_amount) AS unhealthy_amount
    FROM usage_hourly u
    JOIN pools p ON p.id = u.pool_id AND p.tenant_id = sqlc.arg(tenant_id)
    WHERE u.hour >= sqlc.arg(starts_at)::timestamptz AND u.hour < sqlc.arg(ends_at)::timestamptz
      AND (sqlc.narg(pool_id)::uuid IS NULL OR u.pool_id = sqlc.narg(pool_id))
    GROUP BY u.tenant_id, u.pool_id, u.resource, u.model
    ORDER BY u.tenant_id, u.pool_id, u.resource, u.model
    LIMIT sqlc.arg(lim)
), gpu AS (
    SELECT m.tenant_id, m.pool_id, m.model, sum(m.active_gpu_seconds) AS active, sum(m.util_sum) AS util_sum,
           sum(m.util_gpus) AS util_gpus
    FROM lease_gpu_minutes m
    JOIN pools p ON p.id = m.pool_id AND p.tenant_id = sqlc.arg(tenant_id)
    WHERE m.minute >= sqlc.arg(starts_at)::timestamptz AND m.minute < sqlc.arg(ends_at)::timestamptz + interval '1 hour'
          AND date_bin('1 hour', m.minute, '2000-01-01 00:00:00+00') >= sqlc.arg(starts_at)::timestamptz
          AND date_bin('1 hour', m.minute, '2000-01-01 00:00:00+00') < sqlc.arg(ends_at)::timestamptz
          AND (sqlc.narg(pool_id)::uuid IS NULL OR m.pool_id = sqlc.narg(pool_id))
          -- Only the rows the used rows (a page of them) carry.
          AND EXISTS (SELECT 1 FROM used u WHERE u.resource = 'gpu' AND u.pool_id = m.pool_id AND u.model = m.model AND u.tenant_id = m.tenant_id)
    GROUP BY m.tenant_id, m.pool_id, m.model
)
SELECT u.tenant_id, u.pool_id, u.resource, u.model, u.amount::float8 AS amount, u.unhealthy_amount::float8 AS unhealthy_amount,
       COALESCE(g.active, 0)::float8 AS active_amount, COALESCE(g.util_sum, 0)::float8 AS util_sum,
       COALESCE(g.util_gpus, 0)::bigint AS util_gpus
FROM used u
LEFT JOIN gpu g ON u.resource = 'gpu' AND g.tenant_id = u.tenant_id AND g.pool_id = u.pool_id AND g.model = u.model
ORDER BY u.tenant_id, u.pool_id, u.resource, u.model;

-- name: CountExportUsage :one
-- How many rows ExportUsage would return after the key (all of them without one), counted up to
-- lim only: the export checks its row cap with it before reading any row.
SELECT count(*)::bigint AS n FROM (
    SELECT 1
    FROM usage_hourly u
    WHERE u.tenant_id = sqlc.arg(tenant_id) AND u.hour >= sqlc.arg(starts_at)::timestamptz AND u.hour < sqlc.arg(ends_at)::timestamptz
      AND (sqlc.narg(pool_id)::uuid IS NULL OR u.pool_id = sqlc.narg(pool_id))
      AND (sqlc.narg(after_tenant_id)::uuid IS NULL
           OR (u.tenant_id, u.pool_id, u.resource, u.model) > (sqlc.narg(after_tenant_id)::uuid, sqlc.arg(after_pool_id)::uuid, sqlc.arg(after_resource)::text, sqlc.arg(after_model)::text))
    GROUP BY u.tenant_id, u.pool_id, u.resource, u.model
    LIMIT sqlc.arg(lim)
) s;

-- name: ExportUsage :many
-- The caller's tenant's own usage for an export: one row per tenant, pool, resource and model
-- over the period, with the exact sums of the amounts and of their unhealthy parts as numeric
-- text (the handler converts them to hours without a float), at most lim rows in export order
-- after the key (a page; from the first row without one). The pool's name is read by the pool
-- id of the tenant's own usage (the pool may be another tenant's, granted to it); empty when the
-- pool was deleted since. GPU rows carry the active GPU-seconds (exact, text) and utilisation
-- sums of lease_gpu_minutes of the same tenant, pool, model and hours.
WITH used AS (
    SELECT u.tenant_id, u.pool_id, COALESCE(p.name, '')::text AS pool_name, u.resource, u.model,
           sum(u.amount) AS amount, sum(u.unhealthy_amount) AS unhealthy_amount
    FROM usage_hourly u
    LEFT JOIN pools p ON p.id = u.pool_id
    WHERE u.tenant_id = sqlc.arg(tenant_id) AND u.hour >= sqlc.arg(starts_at)::timestamptz AND u.hour < sqlc.arg(ends_at)::timestamptz
      AND (sqlc.narg(pool_id)::uuid IS NULL OR u.pool_id = sqlc.narg(pool_id))
      AND (sqlc.narg(after_tenant_id)::uuid IS NULL
           OR (u.tenant_id, u.pool_id, u.resource, u.model) > (sqlc.narg(after_tenant_id)::uuid, sqlc.arg(after_pool_id)::uuid, sqlc.arg(after_resource)::text, sqlc.arg(after_model)::text))
    GROUP BY u.tenant_id, u.pool_id, p.name, u.resource, u.model
    ORDER BY u.tenant_id, u.pool_id, u.resource, u.model
    LIMIT sqlc.arg(lim)
), gpu AS (
    SELECT m.tenant_id, m.pool_id, m.model, sum(m.active_gpu_seconds) AS active, sum(m.util_sum) AS util_sum,
           sum(m.util_gpus) AS util_gpus
    FROM lease_gpu_minutes m
    WHERE m.tenant_id = sqlc.arg(tenant_id) AND m.minute >= sqlc.arg(starts_at)::timestamptz AND m.minute < sqlc.arg(ends_at)::timestamptz + interval '1 hour'
          AND date_bin('1 hour', m.minute, '2000-01-01 00:00:00+00') >= sqlc.arg(starts_at)::timestamptz
          AND date_bin('1 hour', m.minute, '2000-01-01 00:00:00+00') < sqlc.arg(ends_at)::timestamptz
          AND (sqlc.narg(pool_id)::uuid IS NULL OR m.pool_id = sqlc.narg(pool_id))
          -- Only the rows the used rows (a page of them) carry.
          AND EXISTS (SELECT 1 FROM used u WHERE u.resource = 'gpu' AND u.pool_id = m.pool_id AND u.model = m.model AND u.tenant_id = m.tenant_id)
    GROUP BY m.tenant_id, m.pool_id, m.model
)
SELECT u.tenant_id, u.pool_id, u.pool_name, u.resource, u.model, u.amount::text AS amount,
       u.unhealthy_amount::text AS unhealthy_amount, COALESCE(g.active, 0)::text AS active_amount,
       COALESCE(g.util_sum, 0)::float8 AS util_sum, COALESCE(g.util_gpus, 0)::bigint AS util_gpus
FROM used u
LEFT JOIN gpu g ON u.resource = 'gpu' AND g.tenant_id = u.tenant_id AND g.pool_id = u.pool_id AND g.model = u.model
ORDER BY u.tenant_id, u.pool_id, u.resource, u.model;

-- name: CountExportOwnedPoolsUsage :one
-- How many rows ExportOwnedPoolsUsage would return after the key, counted up to lim only, as
-- CountExportUsage.
SELECT count(*)::bigint AS n FROM (
    SELECT 1
    FROM usage_hourly u
    JOIN pools p ON p.id = u.pool_id AND p.tenant_id = sqlc.arg(tenant_id)
    WHERE u.hour >= sqlc.arg(starts_at)::timestamptz AND u.hour < sqlc.arg(ends_at)::timestamptz
      AND (sqlc.narg(pool_id)::uuid IS NULL OR u.pool_id = sqlc.narg(pool_id))
      AND (sqlc.narg(after_tenant_id)::uuid IS NULL
           OR (u.tenant_id, u.pool_id, u.resource, u.model) > (sqlc.narg(after_tenant_id)::uuid, sqlc.arg(after_pool_id)::uuid, sqlc.arg(after_resource)::text, sqlc.arg(after_model)::text))
    GROUP BY u.tenant_id, u.pool_id, u.resource, u.model
    LIMIT sqlc.arg(lim)
) s;

-- name: ExportOwnedPoolsUsage :many
-- Every tenant's usage in the pools the caller's tenant owns for an export, as ExportUsage and
-- QueryOwnedPoolsUsageHourly.
WITH used AS (
    SELECT u.tenant_id, u.pool_id, p.name AS pool_name, u.resource, u.model, sum(u.amount) AS amount,
           sum(u.unhealthy_amount) AS unhealthy_amount
    FROM usage_hourly u
    JOIN pools p ON p.id = u.pool_id AND p.tenant_id = sqlc.arg(tenant_id)
    WHERE u.hour >= sqlc.arg(starts_at)::timestamptz AND u.hour < sqlc.arg(ends_at)::timestamptz
      AND (sqlc.narg(pool_id)::uuid IS NULL OR u.pool_id = sqlc.narg(pool_id))
      AND (sqlc.narg(after_tenant_id)::uuid IS NULL
           OR (u.tenant_id, u.pool_id, u.resource, u.model) > (sqlc.narg(after_tenant_id)::uuid, sqlc.arg(after_pool_id)::uuid, sqlc.arg(after_resource)::text, sqlc.arg(after_model)::text))
    GROUP BY u.tenant_id, u.pool_id, p.name, u.resource, u.model
    ORDER BY u.tenant_id, u.pool_id, u.resource, u.model
    LIMIT sqlc.arg(lim)
), gpu AS (
    SELECT m.tenant_id, m.pool_id, m.model, sum(m.active_gpu_seconds) AS active, sum(m.util_sum) AS util_sum,
           sum(m.util_gpus) AS util_gpus
    FROM lease_gpu_minutes m
    JOIN pools p ON p.id = m.pool_id AND p.tenant_id = sqlc.arg(tenant_id)
    WHERE m.minute >= sqlc.arg(starts_at)::timestamptz AND m.minute < sqlc.arg(ends_at)::timestamptz + interval '1 hour'
          AND date_bin('1 hour', m.minute, '2000-01-01 00:00:00+00') >= sqlc.arg(starts_at)::timestamptz
          AND date_bin('1 hour', m.minute, '2000-01-01 00:00:00+00') < sqlc.arg(ends_at)::timestamptz
          AND (sqlc.narg(pool_id)::uuid IS NULL OR m.pool_id = sqlc.narg(pool_id))
          -- Only the rows the used rows (a page of them) carry.
          AND EXISTS (SELECT 1 FROM used u WHERE u.resource = 'gpu' AND u.pool_id = m.pool_id AND u.model = m.model AND u.tenant_id = m.tenant_id)
    GROUP BY m.tenant_id, m.pool_id, m.model
)
SELECT u.tenant_id, u.pool_id, u.pool_name::text AS pool_name, u.resource, u.model, u.amount::text AS amount,
       u.unhealthy_amount::text AS unhealthy_amount, COALESCE(g.active, 0)::text AS active_amount,
       COALESCE(g.util_sum, 0)::float8 AS util_sum, COALESCE(g.util_gpus, 0)::bigint AS util_gpus
FROM used u
LEFT JOIN gpu g ON u.resource = 'gpu' AND g.tenant_id = u.tenant_id AND g.pool_id = u.pool_id AND g.model = u.model
ORDER BY u.tenant_id, u.pool_id, u.resource, u.model;

-- name: UtilizationSeries :many
-- The minutes of lease_gpu_minutes in [starts_at, ends_at), in steps of step_seconds from
-- starts_at, summed per step: by default the caller's tenant's own leases' (owned false), with
-- owned every tenant's leases in the pools the caller's tenant owns; narrowed to a lease or a
-- pool when given. At most lim steps, in time order.
SELECT date_bin(sqlc.arg(step_seconds)::bigint * interval '1 second', m.minute, sqlc.arg(starts_at)::timestamptz)::timestamptz AS step_start,
       sum(m.gpu_seconds)::bigint AS gpu_seconds, sum(m.active_gpu_seconds)::bigint AS active_gpu_seconds,
       sum(m.util_sum)::float8 AS util_sum, sum(m.util_gpus)::bigint AS util_gpus,
       max(m.memory_peak_bytes)::bigint AS memory_peak_bytes
FROM lease_gpu_minutes m
WHERE m.minute >= sqlc.arg(starts_at)::timestamptz AND m.minute < sqlc.arg(ends_at)::timestamptz
  AND (sqlc.narg(lease_id)::uuid IS NULL OR m.lease_id = sqlc.narg(lease_id))
  AND (sqlc.narg(pool_id)::uuid IS NULL OR m.pool_id = sqlc.narg(pool_id))
  AND CASE WHEN sqlc.arg(owned)::boolean
           THEN EXISTS (SELECT 1 FROM pools p WHERE p.id = m.pool_id AND p.tenant_id = sqlc.arg(tenant_id))
           ELSE m.tenant_id = sqlc.arg(tenant_id) END
GROUP BY 1
ORDER BY 1
LIMIT sqlc.arg(lim);
