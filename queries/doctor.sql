-- What `better-compute doctor` reads of the running system.

-- name: DatabaseNow :one
SELECT now()::timestamptz AS now;

-- name: SilentNodes :one
-- Nodes holding a session whose liveness stopped advancing.
SELECT count(*)::bigint FROM nodes n JOIN node_sessions s ON s.node_id = n.id
WHERE n.revoked_at IS NULL AND (n.last_seen_at IS NULL OR n.last_seen_at < now() - sqlc.arg(silent_ms)::bigint * interval '1 millisecond');

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
