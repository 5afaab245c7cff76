-- Fan-outs (issue 37): one command to many nodes. The API's statements take the caller's tenant
-- id; the gateways' name the fan-out and the nodes they hold. The node selection is written
-- once per statement that needs it and must stay the same in CountFanOutTargets and
-- CreateFanOut, so the cap reserved for a fan-out counts the nodes it reaches. It is
-- nodes/list's filter (nodes_views.sql) on the tenant's live (not revoked) nodes, with node ids.

-- name: CountFanOutTargets :one
-- How many nodes a fan-out would reach, at most lim.
SELECT count(*)::bigint FROM (
    SELECT n.id FROM nodes n
    WHERE n.tenant_id = sqlc.arg(tenant_id) AND n.revoked_at IS NULL
      AND (sqlc.narg(selector)::jsonb IS NULL OR n.labels @> sqlc.narg(selector))
      AND (cardinality(sqlc.arg(node_ids)::uuid[]) = 0 OR n.id = ANY(sqlc.arg(node_ids)::uuid[]))
      AND (cardinality(sqlc.arg(states)::text[]) = 0 OR n.state::text = ANY(sqlc.arg(states)::text[]))
      AND (sqlc.narg(online)::boolean IS NULL OR n.online = sqlc.narg(online))
      AND (sqlc.arg(gpu_model)::text = ''
           OR jsonb_path_query_array(n.inventory, '$.gpus[*].model') @> jsonb_build_array(sqlc.arg(gpu_model)::text))
      AND (sqlc.arg(pool)::text = '' OR n.pool = sqlc.arg(pool))
    LIMIT sqlc.arg(lim)
) t;

-- name: CreateFanOut :one
-- The fan-out and its commands, one pending command per selected node (the first lim by id),
-- each with its command.created event, in one statement. A node that already has a command
-- with the idempotency key keeps it and gets none; total counts the commands created.
WITH targets AS (
    SELECT n.id FROM nodes n
    WHERE n.tenant_id = sqlc.arg(tenant_id) AND n.revoked_at IS NULL
      AND (sqlc.narg(selector)::jsonb IS NULL OR n.labels @> sqlc.narg(selector))
      AND (cardinality(sqlc.arg(node_ids)::uuid[]) = 0 OR n.id = ANY(sqlc.arg(node_ids)::uuid[]))
      AND (cardinality(sqlc.arg(states)::text[]) = 0 OR n.state::text = ANY(sqlc.arg(states)::text[]))
      AND (sqlc.narg(online)::boolean IS NULL OR n.online = sqlc.narg(online))
      AND (sqlc.arg(gpu_model)::text = ''
           OR jsonb_path_query_array(n.inventory, '$.gpus[*].model') @> jsonb_build_array(sqlc.arg(gpu_model)::text))
      AND (sqlc.arg(pool)::text = '' OR n.pool = sqlc.arg(pool))
    ORDER BY n.id
    LIMIT sqlc.arg(lim)
), created AS (
    INSERT INTO commands (id, tenant_id, node_id, type, payload, idempotency_key, deadline, fan_out_id)
    SELECT bc_uuidv7(), sqlc.arg(tenant_id), t.id, sqlc.arg(type), sqlc.arg(payload),
           sqlc.arg(idempotency_key), sqlc.arg(deadline), sqlc.arg(id)
    FROM targets t
    ON CONFLICT (tenant_id, node_id, idempotency_key) DO NOTHING
    RETURNING commands.id, commands.node_id, commands.type
), events AS (
    INSERT INTO outbox (tenant_id, type, subject, payload)
    SELECT sqlc.arg(tenant_id), 'command.created', 'command/' || c.id::text,
           jsonb_build_object('id', c.id, 'nodeId', c.node_id, 'type', c.type)
    FROM created c ORDER BY c.id
)
INSERT INTO fan_outs (id, tenant_id, type, selector, idempotency_key, max_in_flight, total, deadline)
SELECT sqlc.arg(id), sqlc.arg(tenant_id), sqlc.arg(type), sqlc.arg(selector_doc), sqlc.arg(idempotency_key),
       sqlc.arg(max_in_flight), (SELECT count(*) FROM created), sqlc.arg(deadline)
RETURNING *;

-- name: GetFanOut :one
SELECT * FROM fan_outs WHERE tenant_id = sqlc.arg(tenant_id) AND id = sqlc.arg(id);

-- name: GetFanOutByKey :one
SELECT * FROM fan_outs WHERE tenant_id = sqlc.arg(tenant_id) AND idempotency_key = sqlc.arg(idempotency_key);

-- name: CountFanOutStates :many
-- A fan-out's commands by state.
SELECT state, count(*)::bigint AS commands FROM commands
WHERE tenant_id = sqlc.arg(tenant_id) AND fan_out_id = sqlc.arg(fan_out_id)::uuid
GROUP BY state;

-- name: FanOutFailures :many
-- The first lim commands of a fan-out that failed or expired, oldest first.
SELECT * FROM commands
WHERE tenant_id = sqlc.arg(tenant_id) AND fan_out_id = sqlc.arg(fan_out_id)::uuid AND state IN ('failed', 'expired')
ORDER BY id
LIMIT sqlc.arg(lim);

-- name: FanOutGateways :many
-- Where to poke for a new fan-out: the control API of every gateway holding a session of one
-- of its nodes, once each.
SELECT DISTINCT g.control_url
FROM commands c JOIN node_sessions s ON s.node_id = c.node_id JOIN gateways g ON g.id = s.gateway_id
WHERE c.fan_out_id = sqlc.arg(fan_out_id)::uuid AND c.state = 'pending' AND g.control_url <> '';

-- name: OpenFanOuts :many
-- The gateways' loop: fan-outs, oldest first, with pending commands that are not yet overdue.
SELECT f.id FROM fan_outs f
WHERE f.deadline > now()
  AND EXISTS (SELECT 1 FROM commands c WHERE c.fan_out_id = f.id AND c.state = 'pending')
ORDER BY f.id
LIMIT sqlc.arg(lim);

-- name: LockFanOut :one
-- Holds the fan-out's row for a claim (ClaimFanOutCommands in the same transaction): claims of
-- one fan-out by several gateways take turns, and each counts the commands in flight after the
-- one before it committed.
-- It also gives the size of the fan-out's payload, which all its commands share, so the claim
-- can bound the bytes it returns.
SELECT f.max_in_flight,
       COALESCE((SELECT octet_length(c.payload::text) FROM commands c WHERE c.fan_out_id = f.id ORDER BY c.id LIMIT 1), 0)::bigint AS payload_bytes
FROM fan_outs f WHERE f.id = sqlc.arg(id) FOR UPDATE OF f;

-- name: ClaimFanOutCommands :many
-- pending -> sent for up to lim pending, not yet overdue commands of the fan-out on the nodes
-- (those a gateway holds with room on their sessions), oldest first, and no more than leaves
-- max_in_flight of the fan-out's commands sent or acked. Run after LockFanOut in its
-- transaction. The outer state check skips commands cancelled or expired since the subquery's
-- snapshot. The ids are chosen once (ARRAY(...)), as in ClaimPendingCommands, so that no cached
-- plan runs the choice again for each pending command.
UPDATE commands c
SET state = 'sent', attempts = c.attempts + 1, sent_at = now(), updated_at = now()
WHERE c.id = ANY(ARRAY(
    SELECT p.id FROM commands p
    WHERE p.fan_out_id = sqlc.arg(fan_out_id)::uuid AND p.state = 'pending' AND p.deadline > now()
      AND p.node_id = ANY(sqlc.arg(node_ids)::uuid[])
    ORDER BY p.id
    LIMIT LEAST(sqlc.arg(lim)::bigint, GREATEST(0, sqlc.arg(max_in_flight)::bigint - (
        SELECT count(*) FROM commands f WHERE f.fan_out_id = sqlc.arg(fan_out_id)::uuid AND f.state IN ('sent', 'acked'))))
)) AND c.state = 'pending'
RETURNING c.*;
