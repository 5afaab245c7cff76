-- Usage: hourly totals from the metering records (capacity.sql writes the records), and what the
-- API reads. Amounts are quantity-seconds (GPU-seconds, CPU-seconds, MiB-seconds), exact.

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
              u.quantity * EXTRACT(EPOCH FROM u.period_end - u.period_start) AS amount
), summed AS (
    INSERT INTO usage_hourly (tenant_id, hour, pool_id, resource, model, amount, records)
    SELECT m.tenant_id, m.hour, m.pool_id, m.resource, m.model, sum(m.amount), count(*)
    FROM marked m
    GROUP BY m.tenant_id, m.hour, m.pool_id, m.resource, m.model
    ON CONFLICT (tenant_id, hour, pool_id, resource, model) DO UPDATE
    SET amount = usage_hourly.amount + excluded.amount, records = usage_hourly.records + excluded.records,
        updated_at = now()
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
SELECT hour, pool_id, resource, model, amount::float8 AS amount
FROM usage_hourly
WHERE tenant_id = sqlc.arg(tenant_id) AND hour >= sqlc.arg(starts_at)::timestamptz AND hour < sqlc.arg(ends_at)::timestamptz
  AND (sqlc.narg(pool_id)::uuid IS NULL OR pool_id = sqlc.narg(pool_id))
ORDER BY hour, pool_id, resource, model
LIMIT sqlc.arg(lim);

-- name: QueryUsageTotals :many
SELECT pool_id, resource, model, sum(amount)::float8 AS amount
FROM usage_hourly
WHERE tenant_id = sqlc.arg(tenant_id) AND hour >= sqlc.arg(starts_at)::timestamptz AND hour < sqlc.arg(ends_at)::timestamptz
  AND (sqlc.narg(pool_id)::uuid IS NULL OR pool_id = sqlc.narg(pool_id))
GROUP BY pool_id, resource, model
ORDER BY pool_id, resource, model;
