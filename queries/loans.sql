-- Idle leases lent (pools' idle policy action "lend", migration 0040): the idle job lends a
-- lease's GPUs, the placer gives them back when the lease wakes. Statements that depend on the
-- time take it as an argument (now).

-- name: LendLease :many
-- Lends a placed lease's GPUs at now: its held GPU allocations end at now and are metered up to
-- it (one usage record per resource, model and UTC hour), each is kept in lease_loans to be
-- given back, and the lease is marked lent. Returns the devices lent.
WITH held AS (
    SELECT a.id, a.metered_until AS from_ts
    FROM allocations a
    JOIN pool_leases l ON l.id = a.lease_id
    WHERE a.lease_id = sqlc.arg(lease_id) AND a.ended_at IS NULL AND a.device_id IS NOT NULL
      AND l.state = 'placed' AND l.lent_since IS NULL
    FOR UPDATE OF a
), ended AS (
    UPDATE allocations a
    SET ended_at = GREATEST(a.started_at, sqlc.arg(now)::timestamptz), metered_until = GREATEST(a.started_at, sqlc.arg(now)::timestamptz)
    FROM held
    WHERE a.id = held.id
    RETURNING a.id, a.lease_id, a.node_id, a.device_id, a.model, held.from_ts, a.ended_at AS to_ts, a.unhealthy_since, a.unhealthy_until
), loans AS (
    INSERT INTO lease_loans (lease_id, allocation_id, device_id, node_id, since)
    SELECT e.lease_id, e.id, e.device_id, e.node_id, sqlc.arg(now)::timestamptz FROM ended e
    RETURNING device_id
), marked AS (
    UPDATE pool_leases SET lent_since = sqlc.arg(now)::timestamptz, wake_requested_at = NULL, updated_at = now()
    WHERE id = sqlc.arg(lease_id) AND EXISTS (SELECT 1 FROM held)
), recorded AS (
    INSERT INTO usage_records (lease_id, tenant_id, pool_id, resource, model, quantity, period_start, period_end, unhealthy_amount)
    SELECT e.lease_id, l.tenant_id, l.pool_id, 'gpu', e.model, count(*)::bigint,
           GREATEST(e.from_ts, h.h), LEAST(e.to_ts, h.h + interval '1 hour'),
           sum(allocation_unhealthy_seconds(GREATEST(e.from_ts, h.h), LEAST(e.to_ts, h.h + interval '1 hour'), e.unhealthy_since, e.unhealthy_until))
    FROM ended e
    JOIN pool_leases l ON l.id = e.lease_id
    CROSS JOIN LATERAL generate_series(date_bin('1 hour', e.from_ts, '2000-01-01 00:00:00+00'),
                                       e.to_ts - interval '1 microsecond', interval '1 hour') AS h (h)
    WHERE e.to_ts > e.from_ts
    GROUP BY e.lease_id, l.tenant_id, l.pool_id, e.model, GREATEST(e.from_ts, h.h), LEAST(e.to_ts, h.h + interval '1 hour')
    RETURNING 1
)
SELECT device_id FROM loans;

-- name: RequestLeaseWake :one
-- The tenant's lease asks for its lent GPUs back (leases/wake); a lease not lent, or already
-- waking, is returned as it is.
UPDATE pool_leases
SET wake_requested_at = CASE WHEN lent_since IS NOT NULL THEN COALESCE(wake_requested_at, now()) END, updated_at = now()
WHERE tenant_id = sqlc.arg(tenant_id) AND id = sqlc.arg(id)
RETURNING *;

-- name: WakeTunnelledLoans :many
-- Lent leases, not waking yet, of pools whose idle policy counts tunnels as use, with a tunnel of
-- their tenant to a node of their lent GPUs open, or closed since they were lent: they wake.
UPDATE pool_leases l
SET wake_requested_at = sqlc.arg(now)::timestamptz, updated_at = now()
FROM pools p
WHERE p.id = l.pool_id AND l.lent_since IS NOT NULL AND l.wake_requested_at IS NULL
  AND l.state IN ('placed', 'at_risk')
  AND COALESCE((p.idle_policy ->> 'tunnelCountsAsUse')::boolean, false)
  AND EXISTS (
      SELECT 1 FROM tunnels t
      WHERE t.tenant_id = l.tenant_id AND t.opened_at IS NOT NULL
        AND (t.closed_at IS NULL OR t.closed_at >= l.lent_since)
        AND t.node_id IN (SELECT ll.node_id FROM lease_loans ll WHERE ll.lease_id = l.id))
RETURNING l.id, l.tenant_id, l.pool_id;

-- name: WakeBusyLoans :many
-- Lent leases, not waking yet, with a minute since they were lent whose mean utilisation, on
-- lent GPUs no one held (RecordGPUUsage stores those on the lender), is at or above their pool's
-- threshold: the holder uses them anyway, and they wake.
UPDATE pool_leases l
SET wake_requested_at = sqlc.arg(now)::timestamptz, updated_at = now()
FROM pools p
WHERE p.id = l.pool_id AND l.lent_since IS NOT NULL AND l.wake_requested_at IS NULL
  AND l.state IN ('placed', 'at_risk')
  AND EXISTS (
      SELECT 1 FROM lease_gpu_minutes g
      WHERE g.lease_id = l.id AND g.minute >= l.lent_since AND g.util_gpus > 0
        AND g.util_sum / g.util_gpus >= (p.idle_policy ->> 'minUtilization')::float8)
RETURNING l.id, l.tenant_id, l.pool_id;

-- name: WakingLoans :many
-- The pool's lent leases that asked for their GPUs back, with how many of their lent GPUs an
-- allocation (a borrower's) still holds.
SELECT l.id, l.tenant_id, l.wake_requested_at, l.lent_since,
       (SELECT count(*) FROM lease_loans ll JOIN allocations a ON a.device_id = ll.device_id AND a.ended_at IS NULL
        WHERE ll.lease_id = l.id)::bigint AS held
FROM pool_leases l
WHERE l.pool_id = sqlc.arg(pool_id) AND l.lent_since IS NOT NULL AND l.wake_requested_at IS NOT NULL
  AND l.state IN ('placed', 'at_risk')
ORDER BY l.id;

-- name: LoanBorrowers :many
-- The leases, not yet preempted, that hold a GPU lent by one of holders.
SELECT DISTINCT b.id, b.pool_id, a.lent_from::uuid AS holder_id
FROM allocations a
JOIN pool_leases b ON b.id = a.lease_id
WHERE a.lent_from = ANY(sqlc.arg(holders)::uuid[]) AND a.ended_at IS NULL AND b.state IN ('placed', 'at_risk')
ORDER BY b.id;

-- name: ReturnLoan :execrows
-- Gives a lent lease its GPUs back at now: its allocations start again on the same devices, with
-- the topology and rank they had. The devices must be free (the exclusion constraint says so).
INSERT INTO allocations (lease_id, node_id, device_id, model, topology, rank, started_at, metered_until)
SELECT a.lease_id, a.node_id, a.device_id, a.model, a.topology, a.rank, sqlc.arg(now)::timestamptz, sqlc.arg(now)::timestamptz
FROM lease_loans ll
JOIN allocations a ON a.id = ll.allocation_id
WHERE ll.lease_id = sqlc.arg(lease_id);

-- name: EndLoans :exec
-- Ends the loans of leases (given back, or the holder ended): borrowers keep running. A lease
-- given back is judged afresh (idle_since cleared).
WITH gone AS (
    DELETE FROM lease_loans WHERE lease_id = ANY(sqlc.arg(lease_ids)::uuid[])
)
UPDATE pool_leases SET lent_since = NULL, wake_requested_at = NULL, idle_since = NULL, updated_at = now()
WHERE id = ANY(sqlc.arg(lease_ids)::uuid[]) AND lent_since IS NOT NULL;

-- name: LeaseLoans :many
-- The tenant's lent leases among lease_ids: how many GPUs each lent and how many leases hold
-- them now.
SELECT l.id, l.lent_since::timestamptz AS lent_since, l.wake_requested_at,
       (SELECT count(*) FROM lease_loans ll WHERE ll.lease_id = l.id)::bigint AS gpus,
       (SELECT count(DISTINCT a.lease_id) FROM allocations a WHERE a.lent_from = l.id AND a.ended_at IS NULL)::bigint AS borrowers
FROM pool_leases l
WHERE l.tenant_id = sqlc.arg(tenant_id) AND l.id = ANY(sqlc.arg(lease_ids)::uuid[]) AND l.lent_since IS NOT NULL;

-- name: PoolIdlePolicyForTenant :one
-- The idle policy of a pool of the tenant or granted to it.
SELECT p.idle_policy FROM pools p
WHERE p.id = sqlc.arg(pool_id)
  AND (p.tenant_id = sqlc.arg(tenant_id)
       OR EXISTS (SELECT 1 FROM pool_grants g WHERE g.pool_id = p.id AND g.tenant_id = sqlc.arg(tenant_id) AND g.revoked_at IS NULL));
