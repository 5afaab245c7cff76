-- name: IdleCandidates :many
-- Placed leases of pools with an idle policy, placed at least a window ago, with their mean
-- utilisation over the window and how many of its minutes were sampled, and whether a tunnel of
-- its tenant to a node it holds was open within the window (where the policy counts tunnels as
-- use); after id, in id order. Leases opted out and leases lent are not judged.
SELECT l.id, l.tenant_id, l.pool_id, l.idle_since, p.idle_policy,
       m.minutes, m.util_mean,
       (COALESCE((p.idle_policy ->> 'tunnelCountsAsUse')::boolean, false) AND EXISTS (
           SELECT 1 FROM tunnels t
           WHERE t.tenant_id = l.tenant_id AND t.opened_at IS NOT NULL
             AND (t.closed_at IS NULL OR t.closed_at >= sqlc.arg(now)::timestamptz - (p.idle_policy ->> 'windowMs')::bigint * interval '1 millisecond')
             AND t.node_id IN (SELECT a.node_id FROM allocations a WHERE a.lease_id = l.id AND a.ended_at IS NULL)
       ))::boolean AS tunnel_active
FROM pool_leases l
JOIN pools p ON p.id = l.pool_id AND p.idle_policy <> '{}'::jsonb
CROSS JOIN LATERAL (
    SELECT count(DISTINCT g.minute)::bigint AS minutes,
           COALESCE(sum(g.util_sum) / NULLIF(sum(g.util_gpus), 0), 0)::float8 AS util_mean
    FROM lease_gpu_minutes g
    WHERE g.lease_id = l.id
      AND g.minute >= sqlc.arg(now)::timestamptz - (p.idle_policy ->> 'windowMs')::bigint * interval '1 millisecond'
) m
WHERE l.state = 'placed' AND l.id > sqlc.arg(after) AND NOT l.idle_opt_out AND l.lent_since IS NULL
  AND l.placed_at <= sqlc.arg(now)::timestamptz - (p.idle_policy ->> 'windowMs')::bigint * interval '1 millisecond'
ORDER BY l.id
LIMIT sqlc.arg(lim);

-- name: SetLeaseIdleSince :exec
UPDATE pool_leases SET idle_since = sqlc.narg(idle_since) WHERE id = sqlc.arg(id) AND state = 'placed';
