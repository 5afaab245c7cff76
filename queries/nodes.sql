-- Nodes, join tokens, gateways and sessions. API statements take the caller's tenant id; the
-- gateway's take the node id from the node's certificate.

-- name: CreateJoinToken :one
INSERT INTO join_tokens (id, tenant_id, description, pool, labels, secret_hash, max_uses, expires_at)
VALUES (sqlc.arg(id), sqlc.arg(tenant_id), sqlc.arg(description), sqlc.arg(pool), sqlc.arg(labels),
        sqlc.arg(secret_hash), sqlc.arg(max_uses), sqlc.arg(expires_at))
RETURNING *;

-- name: ListJoinTokens :many
SELECT * FROM join_tokens
WHERE tenant_id = sqlc.arg(tenant_id) AND id > sqlc.arg(after)
ORDER BY id
LIMIT sqlc.arg(lim);

-- name: RevokeJoinToken :one
UPDATE join_tokens SET revoked_at = COALESCE(revoked_at, now())
WHERE tenant_id = sqlc.arg(tenant_id) AND id = sqlc.arg(id)
RETURNING *;

-- name: GetJoinToken :one
SELECT * FROM join_tokens WHERE id = sqlc.arg(id);

-- name: SpendJoinToken :one
-- Spends one use, if the token still has one, as joins did before join_admit (migration 0025)
-- took it into the join's one round trip; BenchmarkJoinTransaction runs it as its baseline.
UPDATE join_tokens SET uses = uses + 1
WHERE id = sqlc.arg(id) AND uses < max_uses AND revoked_at IS NULL AND expires_at > now()
RETURNING uses;

-- name: CreateNode :one
INSERT INTO nodes (id, tenant_id, hostname, pool, labels, join_token_id, cert_not_after)
VALUES (sqlc.arg(id), sqlc.arg(tenant_id), sqlc.arg(hostname), sqlc.arg(pool), sqlc.arg(labels),
        sqlc.arg(join_token_id), sqlc.arg(cert_not_after))
RETURNING *;

-- name: GetNode :one
SELECT * FROM nodes WHERE tenant_id = sqlc.arg(tenant_id) AND id = sqlc.arg(id);

-- name: GetNodeForGateway :one
SELECT * FROM nodes WHERE id = sqlc.arg(id);

-- name: ListNodes :many
SELECT n.*, s.gateway_id AS session_gateway, s.connected_at AS session_connected_at, s.transport AS session_transport,
       v.last_seen_at
FROM nodes n LEFT JOIN node_sessions s ON s.node_id = n.id LEFT JOIN node_seen v ON v.node_id = n.id
WHERE n.tenant_id = sqlc.arg(tenant_id) AND n.id > sqlc.arg(after)
  AND (sqlc.narg(selector)::jsonb IS NULL OR n.labels @> sqlc.narg(selector))
ORDER BY n.id
LIMIT sqlc.arg(lim);

-- name: SelectNodeIDs :many
-- The tenant's live nodes matching a label selector, for commands to many nodes.
SELECT id FROM nodes
WHERE tenant_id = sqlc.arg(tenant_id) AND revoked_at IS NULL AND labels @> sqlc.arg(selector)
ORDER BY id
LIMIT sqlc.arg(lim);

-- name: RevokeNode :one
UPDATE nodes SET revoked_at = COALESCE(revoked_at, now()), updated_at = now()
WHERE tenant_id = sqlc.arg(tenant_id) AND id = sqlc.arg(id)
RETURNING *;

-- name: NodeHello :exec
-- Also wakes the workflow controller for the node's open workflow, which may be waiting for the
-- daemon to come back (after a reboot) or to report a new version.
WITH wake AS (
    INSERT INTO reconcile_queue (kind, key)
    SELECT 'workflow', w.workflow_id::text FROM workflow_nodes w
    WHERE w.node_id = sqlc.arg(id) AND w.open AND w.step IN ('act', 'verify', 'uncordon')
    ON CONFLICT (kind, key) DO UPDATE
    SET due_at = LEAST(reconcile_queue.due_at, now()), generation = reconcile_queue.generation + 1, enqueued_at = now()
), seen AS (
    INSERT INTO node_liveness (node_id, last_seen_at) SELECT o.id, now() FROM nodes o WHERE o.id = sqlc.arg(id)
    ON CONFLICT (node_id) DO UPDATE SET last_seen_at = excluded.last_seen_at
)
UPDATE nodes n
SET daemon_version = sqlc.arg(daemon_version), inventory = sqlc.arg(inventory),
    state = CASE WHEN n.state = 'joining' THEN 'ready' ELSE n.state END, updated_at = now()
WHERE n.id = sqlc.arg(id);

-- name: RenewNodeCert :exec
UPDATE nodes SET cert_not_after = sqlc.arg(cert_not_after), updated_at = now() WHERE id = sqlc.arg(id);

-- name: RecordLiveness :exec
-- A gateway's changes of vouching, for many nodes in one statement: each node was last heard
-- from at seen; vouch says whether the gateway now vouches for it (a session it holds whose
-- daemon heartbeats) or stops (the session ended or its heartbeats stopped). Stopping changes
-- only the gateway's own vouch, never another gateway's that took the node since. Nodes that
-- no longer exist are skipped.
INSERT INTO node_liveness AS l (node_id, last_seen_at, gateway_id)
SELECT v.id, v.seen, CASE WHEN v.vouch THEN sqlc.arg(gateway_id)::text END
FROM (SELECT unnest(sqlc.arg(ids)::uuid[]) AS id, unnest(sqlc.arg(seen)::timestamptz[]) AS seen,
             unnest(sqlc.arg(vouch)::boolean[]) AS vouch) v
WHERE EXISTS (SELECT 1 FROM nodes n WHERE n.id = v.id)
ON CONFLICT (node_id) DO UPDATE
SET last_seen_at = GREATEST(l.last_seen_at, excluded.last_seen_at),
    gateway_id = CASE WHEN excluded.gateway_id IS NOT NULL THEN excluded.gateway_id
                      WHEN l.gateway_id = sqlc.arg(gateway_id)::text THEN NULL
                      ELSE l.gateway_id END;

-- name: ReleaseGatewayVouches :execrows
-- A gateway stopping or starting again ends every vouch it held: the nodes were last heard
-- from, as far as anyone can tell, at the gateway's last heartbeat.
UPDATE node_liveness l
SET gateway_id = NULL,
    last_seen_at = GREATEST(l.last_seen_at, (SELECT g.heartbeat_at FROM gateways g WHERE g.id = sqlc.arg(gateway_id)::text))
WHERE l.gateway_id = sqlc.arg(gateway_id)::text;

-- name: RevokedAmong :many
SELECT id FROM nodes WHERE id = ANY(sqlc.arg(ids)::uuid[]) AND revoked_at IS NOT NULL;

-- name: UpsertGateway :exec
INSERT INTO gateways (id, region, control_url) VALUES (sqlc.arg(id), sqlc.arg(region), sqlc.arg(control_url))
ON CONFLICT (id) DO UPDATE SET region = excluded.region, control_url = excluded.control_url, heartbeat_at = now();

-- name: DeleteGateway :exec
DELETE FROM gateways WHERE id = sqlc.arg(id);

-- name: ClaimSession :exec
INSERT INTO node_sessions (node_id, gateway_id, session_id, transport)
VALUES (sqlc.arg(node_id), sqlc.arg(gateway_id), sqlc.arg(session_id), sqlc.arg(transport))
ON CONFLICT (node_id) DO UPDATE SET gateway_id = excluded.gateway_id, session_id = excluded.session_id,
    transport = excluded.transport, connected_at = now();

-- name: EndSession :exec
DELETE FROM node_sessions WHERE node_id = sqlc.arg(node_id) AND session_id = sqlc.arg(session_id);

-- name: CurrentSessions :many
-- Which of a gateway's sessions are still the newest of their node.
SELECT node_id, session_id FROM node_sessions WHERE node_id = ANY(sqlc.arg(node_ids)::uuid[]);

-- name: EndGatewaySessions :exec
DELETE FROM node_sessions WHERE gateway_id = sqlc.arg(gateway_id);

-- name: SessionGateways :many
-- Where to poke: the control API of the gateway holding each node's session.
SELECT s.node_id, g.id AS gateway_id, g.control_url
FROM node_sessions s JOIN gateways g ON g.id = s.gateway_id
WHERE s.node_id = ANY(sqlc.arg(node_ids)::uuid[]) AND g.control_url <> '';

-- name: LiveGateways :many
SELECT * FROM gateways WHERE heartbeat_at > now() - interval '30 seconds' ORDER BY id;

-- name: GetNodeWithSession :one
-- A node of the tenant with its live session, if any, for the API.
SELECT n.*, s.gateway_id AS session_gateway, s.connected_at AS session_connected_at, s.transport AS session_transport,
       v.last_seen_at
FROM nodes n LEFT JOIN node_sessions s ON s.node_id = n.id LEFT JOIN node_seen v ON v.node_id = n.id
WHERE n.tenant_id = sqlc.arg(tenant_id) AND n.id = sqlc.arg(id);

-- name: GetLeasedNode :one
-- A node of another tenant that the tenant sees only because one of its placed or at-risk leases
-- (in a pool granted to it) holds an allocation on the node that has not ended: only what the
-- reduced view of nodes/get shows.
SELECT n.id, n.hostname, n.state, n.online, n.inventory, s.gateway_id AS session_gateway
FROM nodes n
LEFT JOIN node_sessions s ON s.node_id = n.id
WHERE n.id = sqlc.arg(id)
  AND EXISTS (SELECT 1 FROM allocations a JOIN pool_leases l ON l.id = a.lease_id
              WHERE a.node_id = n.id AND a.ended_at IS NULL
                AND l.tenant_id = sqlc.arg(tenant_id) AND l.state IN ('placed', 'at_risk'));
