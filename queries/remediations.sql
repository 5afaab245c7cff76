-- name: OpenRemediation :one
-- Starts a remediation of the node unless one is in progress (then no row).
INSERT INTO remediations (id, tenant_id, node_id, gpu_uuid, gpu_serial, reason_check, reason_code, reason_detail,
                          ladder, policy_version, steps, failure_domain, principal_id)
VALUES (sqlc.arg(id), sqlc.arg(tenant_id), sqlc.arg(node_id), sqlc.arg(gpu_uuid), sqlc.arg(gpu_serial),
        sqlc.arg(reason_check), sqlc.arg(reason_code), sqlc.arg(reason_detail), sqlc.arg(ladder), sqlc.arg(policy_version), sqlc.arg(steps),
        sqlc.arg(failure_domain), sqlc.narg(principal_id))
ON CONFLICT (node_id) WHERE state IN ('waiting', 'running') DO NOTHING
RETURNING *;

-- name: NodeRemediationSettings :one
-- Whether a health change on the node starts a remediation by itself: none of the pools it is a
-- member of turned it off (a node in no pool: yes). With the failure domain it counts in: the
-- node's value of the first of its pools' domain labels it has.
SELECT COALESCE(bool_and(p.remediation_auto), true)::boolean AS auto,
       COALESCE(min(CASE WHEN p.remediation_domain <> '' AND n.labels ? p.remediation_domain
                         THEN p.remediation_domain || '=' || (n.labels ->> p.remediation_domain) END), '')::text AS failure_domain
FROM nodes n
LEFT JOIN pools p ON pool_member(p, n)
WHERE n.id = sqlc.arg(node_id);

-- name: LockRemediation :one
SELECT * FROM remediations WHERE id = sqlc.arg(id) FOR UPDATE;

-- name: LockRemediationBudget :exec
-- Serialises the budget checks of one tenant's remediations.
SELECT pg_advisory_xact_lock(hashtextextended('remediation:' || sqlc.arg(tenant_id)::uuid::text, 0));

-- name: RemediationBlocked :one
-- Whether a remediation of the node must wait: some pool the node is a member of already has its
-- remediation_max_nodes members in remediation, or one of them shares the node's value of the
-- pool's remediation_domain label.
SELECT EXISTS (
    SELECT 1
    FROM nodes n
    JOIN pools p ON pool_member(p, n)
    WHERE n.id = sqlc.arg(node_id)
      AND ((SELECT count(*) FROM remediations r JOIN nodes m ON m.id = r.node_id
            WHERE r.state = 'running' AND r.id <> sqlc.arg(id) AND pool_member(p, m)) >= p.remediation_max_nodes
        OR (p.remediation_domain <> '' AND n.labels ? p.remediation_domain AND EXISTS (
            SELECT 1 FROM remediations r JOIN nodes m ON m.id = r.node_id
            WHERE r.state = 'running' AND r.id <> sqlc.arg(id) AND pool_member(p, m)
              AND m.labels ->> p.remediation_domain = n.labels ->> p.remediation_domain)))
)::boolean AS blocked;

-- name: RemediationRepeats :one
-- How many remediations the GPU of this serial had since since, this one not counted.
SELECT count(*)::bigint FROM remediations
WHERE gpu_serial = sqlc.arg(gpu_serial) AND gpu_serial <> '' AND created_at >= sqlc.arg(since)::timestamptz
  AND id <> sqlc.arg(id);

-- name: SaveRemediation :one
UPDATE remediations
SET state = sqlc.arg(state), step = sqlc.arg(step), step_started_at = sqlc.narg(step_started_at),
    step_command_id = sqlc.narg(step_command_id), history = sqlc.arg(history), updated_at = now(),
    ended_at = CASE WHEN sqlc.arg(state)::text IN ('waiting', 'running') THEN NULL ELSE COALESCE(ended_at, now()) END
WHERE id = sqlc.arg(id)
RETURNING *;

-- name: WaitingRemediations :many
-- The tenant's waiting remediations, oldest first: the ones to look at when one ends.
SELECT id FROM remediations WHERE tenant_id = sqlc.arg(tenant_id) AND state = 'waiting' ORDER BY created_at, id;

-- name: ActiveRemediationIDs :many
-- Every remediation in progress, for the controller's resync.
SELECT id FROM remediations WHERE state IN ('waiting', 'running') ORDER BY id;

-- name: RemediationNodeLeases :many
-- The leases holding something on the node now, with their pool's grace period.
SELECT DISTINCT l.id, l.tenant_id, l.pool_id, p.preemption_grace_ms, l.state
FROM allocations a
JOIN pool_leases l ON l.id = a.lease_id
JOIN pools p ON p.id = l.pool_id
WHERE a.node_id = sqlc.arg(node_id) AND a.ended_at IS NULL AND l.ended_at IS NULL;

-- name: RemediationCommand :one
SELECT state, result, error, finished_at FROM commands WHERE id = sqlc.arg(id);

-- name: ListRemediations :many
-- The tenant's remediations with their node's hostname, by id (oldest first), filtered.
SELECT sqlc.embed(r), n.hostname
FROM remediations r
JOIN nodes n ON n.id = r.node_id
WHERE r.tenant_id = sqlc.arg(tenant_id) AND r.id > sqlc.arg(after)
  AND (sqlc.arg(state)::text = '' OR r.state = sqlc.arg(state)::text)
  AND (sqlc.narg(node_id)::uuid IS NULL OR r.node_id = sqlc.narg(node_id)::uuid)
  AND (sqlc.arg(gpu_uuid)::text = '' OR r.gpu_uuid = sqlc.arg(gpu_uuid)::text)
ORDER BY r.id
LIMIT sqlc.arg(lim);

-- name: GetRemediation :one
-- A remediation of the tenant with its node's hostname.
SELECT sqlc.embed(r), n.hostname
FROM remediations r
JOIN nodes n ON n.id = r.node_id
WHERE r.tenant_id = sqlc.arg(tenant_id) AND r.id = sqlc.arg(id);

-- name: LockRemediationOfTenant :one
SELECT * FROM remediations WHERE tenant_id = sqlc.arg(tenant_id) AND id = sqlc.arg(id) FOR UPDATE;

-- name: EndRemediationOfTenant :one
-- Ends a remediation of the tenant by hand (cancelled, returned) with its history; the caller
-- locked it and checked its state.
UPDATE remediations
SET state = sqlc.arg(state), history = sqlc.arg(history), step_command_id = NULL, updated_at = now(),
    ended_at = COALESCE(ended_at, now())
WHERE tenant_id = sqlc.arg(tenant_id) AND id = sqlc.arg(id)
RETURNING *;

-- name: RemediationNodeHealth :one
-- What a verify step looks at: whether the node answers (its daemon holds a session now: a node
-- that went dark is seen at once, not after the liveness threshold), whether a GPU health signal
-- quarantines it, and how many of its present GPUs are unhealthy.
SELECT (s.node_id IS NOT NULL)::boolean AS connected, s.connected_at,
       n.hostname, n.state, COALESCE(h.quarantined, false)::boolean AS quarantined,
       (SELECT count(*) FROM devices d WHERE d.node_id = n.id AND d.kind = 'gpu' AND d.present AND d.health = 'unhealthy')::bigint AS unhealthy
FROM nodes n
LEFT JOIN node_gpu_health h ON h.node_id = n.id
LEFT JOIN node_sessions s ON s.node_id = n.id
WHERE n.id = sqlc.arg(node_id);

-- name: NodeRemediationOverrides :many
-- The remediation policy overrides of the pools the node is a member of, in pool id order.
SELECT p.remediation_override
FROM nodes n
JOIN pools p ON pool_member(p, n)
WHERE n.id = sqlc.arg(node_id) AND p.remediation_override <> '{}'::jsonb
ORDER BY p.id;

-- name: ReplacedInService :many
-- The node's remediations in service whose GPU is gone and another GPU, of another serial, is at
-- its index now: the hardware was replaced. Locked.
SELECT r.id, r.tenant_id, r.history, r.gpu_serial, nd.serial AS new_serial
FROM remediations r
JOIN devices od ON od.node_id = r.node_id AND od.kind = 'gpu' AND od.serial = r.gpu_serial AND NOT od.present
JOIN devices nd ON nd.node_id = r.node_id AND nd.kind = 'gpu' AND nd.idx = od.idx AND nd.present
                AND nd.serial <> '' AND nd.serial <> r.gpu_serial
WHERE r.node_id = sqlc.arg(node_id) AND r.state = 'service' AND r.gpu_serial <> ''
ORDER BY r.id
FOR UPDATE OF r;
