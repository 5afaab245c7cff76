-- What `better-compute doctor` reads of the running system.

-- name: DatabaseNow :one
SELECT now()::timestamptz AS now;

-- name: SilentNodes :one
-- Nodes holding a session whose liveness stopped advancing.
SELECT count(*)::bigint FROM nodes n JOIN node_sessions s ON s.node_id = n.id
LEFT JOIN node_seen v ON v.node_id = n.id
WHERE n.revoked_at IS NULL AND (v.last_seen_at IS NULL OR v.last_seen_at < now() - sqlc.arg(silent_ms)::bigint * interval '1 millisecond');

-- name: ExpiringNodeCertificates :one
SELECT count(*)::bigint FROM nodes
WHERE revoked_at IS NULL AND cert_not_after IS NOT NULL
  AND cert_not_after < now() + sqlc.arg(within_ms)::bigint * interval '1 millisecond';

-- name: DaemonVersions :many
SELECT daemon_version, count(*)::bigint AS nodes FROM nodes
WHERE revoked_at IS NULL AND daemon_version <> ''
GROUP BY daemon_version ORDER BY daemon_version;

-- name: GatewaySessions :many
SELECT g.id, g.region, g.control_url, g.heartbeat_at, count(s.node_id)::bigint AS sessions
FROM gateways g LEFT JOIN node_sessions s ON s.gateway_id = g.id
WHERE g.heartbeat_at > now() - interval '30 seconds'
GROUP BY g.id ORDER BY g.id;

-- name: UndispatchedWebhooks :many
-- Webhooks whose dispatcher lock nobody holds: no process of the sinks role delivers them.
SELECT w.id FROM webhooks w
WHERE NOT EXISTS (
    SELECT 1 FROM locks l
    WHERE l.name = 'singleton:outbox-dispatch:webhook:' || w.id::text AND l.expires_at > now()
)
ORDER BY w.id
LIMIT 10;

-- name: FailingWebhooks :many
-- Webhooks whose retry schedule ran out (their events are parked), longest failing first, with
-- how many there are in all and how many events each has parked.
SELECT w.id, w.tenant_id, w.failing_since, w.failure,
       (SELECT count(*) FROM webhook_dead_letters d WHERE d.webhook_id = w.id)::bigint AS parked,
       count(*) OVER ()::bigint AS total
FROM webhooks w
WHERE w.state = 'failing'
ORDER BY w.failing_since, w.id
LIMIT 10;

-- name: OvercommittedGrants :many
-- Pools whose active grants' nominal quotas, added up by resource (GPUs by model, CPUs, memory
-- in bytes), are more than the pool's members hold: their present GPUs by model, and their CPUs
-- and memory from node_resources. In pool, resource and model order, at most 10, each with how
-- many there are in all.
WITH grants AS (
    SELECT g.pool_id, g.nominal FROM pool_grants g WHERE g.revoked_at IS NULL
), nominal AS (
    SELECT g.pool_id, 'gpu'::text AS resource, m.model::text AS model, sum(m.n::bigint)::bigint AS amount
    FROM grants g
    CROSS JOIN LATERAL jsonb_each_text(CASE WHEN jsonb_typeof(g.nominal -> 'gpus') = 'object' THEN g.nominal -> 'gpus' ELSE '{}'::jsonb END) AS m (model, n)
    GROUP BY g.pool_id, m.model
    UNION ALL
    SELECT t.pool_id, v.resource, '', v.amount
    FROM (SELECT g.pool_id, sum(COALESCE((g.nominal ->> 'cpus')::bigint, 0))::bigint AS cpus,
                 sum(COALESCE((g.nominal ->> 'memoryBytes')::bigint, 0))::bigint AS memory_bytes
          FROM grants g GROUP BY g.pool_id) t
    CROSS JOIN LATERAL (VALUES ('cpu', t.cpus), ('memory', t.memory_bytes)) AS v (resource, amount)
), held AS (
    SELECT p.id AS pool_id, 'gpu'::text AS resource, d.model::text AS model, count(*)::bigint AS amount
    FROM pools p
    JOIN nodes n ON pool_member(p, n)
    JOIN devices d ON d.node_id = n.id AND d.present
    WHERE p.id IN (SELECT pool_id FROM grants)
    GROUP BY p.id, d.model
    UNION ALL
    SELECT t.pool_id, v.resource, '', v.amount
    FROM (SELECT p.id AS pool_id, COALESCE(sum(r.cpus), 0)::bigint AS cpus, COALESCE(sum(r.memory_bytes), 0)::bigint AS memory_bytes
          FROM pools p
          JOIN nodes n ON pool_member(p, n)
          JOIN node_resources r ON r.node_id = n.id
          WHERE p.id IN (SELECT pool_id FROM grants)
          GROUP BY p.id) t
    CROSS JOIN LATERAL (VALUES ('cpu', t.cpus), ('memory', t.memory_bytes)) AS v (resource, amount)
)
SELECT p.id AS pool_id, p.name AS pool_name, p.tenant_id, s.resource::text AS resource, s.model::text AS model,
       s.amount::bigint AS nominal, COALESCE(h.amount, 0)::bigint AS held, count(*) OVER ()::bigint AS total
FROM nominal s
JOIN pools p ON p.id = s.pool_id
LEFT JOIN held h ON h.pool_id = s.pool_id AND h.resource = s.resource AND h.model = s.model
WHERE s.amount > COALESCE(h.amount, 0)
ORDER BY p.id, s.resource, s.model
LIMIT 10;

-- name: GPUHealthProblems :one
-- Over the nodes that are not revoked: unhealthy (quarantined) GPUs, nodes a GPU health signal
-- quarantines as a whole, and nodes whose driver did not answer the daemon's last probe, with
-- the hostname of the one that reported so last.
SELECT
    (SELECT count(*) FROM devices d JOIN nodes n ON n.id = d.node_id
     WHERE d.kind = 'gpu' AND d.health = 'unhealthy' AND n.revoked_at IS NULL)::bigint AS unhealthy_gpus,
    (SELECT count(*) FROM node_gpu_health h JOIN nodes n ON n.id = h.node_id
     WHERE h.quarantined AND n.revoked_at IS NULL)::bigint AS quarantined_nodes,
    (SELECT count(*) FROM node_gpu_health h JOIN nodes n ON n.id = h.node_id
     WHERE h.probe_error <> '' AND n.revoked_at IS NULL)::bigint AS driver_not_answering,
    COALESCE((SELECT n.hostname FROM node_gpu_health h JOIN nodes n ON n.id = h.node_id
              WHERE h.probe_error <> '' AND n.revoked_at IS NULL
              ORDER BY h.reported_at DESC, n.id LIMIT 1), '')::text AS driver_example;

-- name: RemediationProblems :one
-- Remediations that need a person: running ones whose step started over stuck_after ago (a
-- command that never ends, a node that never drains), waiting ones older than waiting_after (the
-- pools' budgets are used up), and how many ended in service (hardware to replace, not yet
-- returned).
SELECT count(*) FILTER (WHERE state = 'running' AND step_started_at < now() - sqlc.arg(stuck_after_s)::bigint * interval '1 second')::bigint AS stuck,
       count(*) FILTER (WHERE state = 'waiting' AND created_at < now() - sqlc.arg(waiting_after_s)::bigint * interval '1 second')::bigint AS waiting,
       count(*) FILTER (WHERE state = 'service')::bigint AS in_service
FROM remediations;
