-- The fleet's view of nodes: lifecycle transitions (API and the node.lifecycle reconciler), the
-- NodeSpec (API and the node.spec reconciler), liveness (the node-liveness job) and inventory
-- history (the gateway's hello). API statements take the caller's tenant id; the workers' take
-- the node id alone.

-- name: LockNodeOfTenant :one
-- A node of the tenant, locked until the transaction ends, so its state and spec change in order.
SELECT * FROM nodes WHERE tenant_id = sqlc.arg(tenant_id) AND id = sqlc.arg(id) FOR UPDATE;

-- name: SetNodeState :one
-- Moves a node from one of from_states to state; no row when it is in another state. from_states
-- travels as text[]: pgx cannot encode an array of an enum it has not loaded.
UPDATE nodes
SET state = sqlc.arg(state)::node_state, state_generation = state_generation + 1, state_changed_at = now(), updated_at = now()
WHERE tenant_id = sqlc.arg(tenant_id) AND id = sqlc.arg(id) AND state = ANY(sqlc.arg(from_states)::text[]::node_state[])
RETURNING *;

-- name: SetNodeLabels :exec
UPDATE nodes SET labels = sqlc.arg(labels), updated_at = now()
WHERE tenant_id = sqlc.arg(tenant_id) AND id = sqlc.arg(id);

-- name: UpdateNodeSpec :one
-- Replaces the spec and bumps its generation, only when it changes (jsonb equality ignores key
-- order and formatting); no row when the spec is the same.
UPDATE nodes
SET spec = sqlc.arg(spec), spec_generation = spec_generation + 1, updated_at = now()
WHERE tenant_id = sqlc.arg(tenant_id) AND id = sqlc.arg(id) AND spec <> sqlc.arg(spec)::jsonb
RETURNING *;

-- name: LockNode :one
-- The reconcilers' read of a node, locked until the transaction ends.
SELECT * FROM nodes WHERE id = sqlc.arg(id) FOR UPDATE;

-- name: MarkNodeDrained :one
-- draining -> drained, only if the node is still in the drain the reconciler looked at.
UPDATE nodes
SET state = 'drained', state_generation = state_generation + 1, state_changed_at = now(), updated_at = now()
WHERE id = sqlc.arg(id) AND state = 'draining' AND state_generation = sqlc.arg(state_generation)
RETURNING *;

-- name: SetNodeConditions :exec
UPDATE nodes SET conditions = sqlc.arg(conditions), updated_at = now() WHERE id = sqlc.arg(id);

-- name: RecordNodeSpecStatus :exec
-- The NodeSpec reconciler's outcome: labels and taints applied (null leaves them), the config
-- the node applied (null leaves it), the generation observed and the conditions.
UPDATE nodes
SET labels = COALESCE(sqlc.narg(labels), labels),
    taints = COALESCE(sqlc.narg(taints), taints),
    applied_config = COALESCE(sqlc.narg(applied_config), applied_config),
    observed_generation = GREATEST(observed_generation, sqlc.arg(observed_generation)),
    conditions = sqlc.arg(conditions),
    updated_at = now()
WHERE id = sqlc.arg(id);

-- name: LatestNodeCommand :one
-- The newest command of a type for a node (ids are UUIDv7, so newest is greatest), whether its
-- payload is the one given, and how long ago it finished (by the database's clock; 0 when not).
SELECT id, state, error, idempotency_key,
       (payload = sqlc.arg(payload)::jsonb)::boolean AS same_payload,
       COALESCE((EXTRACT(EPOCH FROM now() - finished_at) * 1000)::bigint, 0)::bigint AS finished_ms_ago
FROM commands
WHERE tenant_id = sqlc.arg(tenant_id) AND node_id = sqlc.arg(node_id) AND type = sqlc.arg(type)
ORDER BY id DESC
LIMIT 1;

-- name: DeferReconcile :exec
-- Makes a key due again after a delay, also while it is being reconciled: the bumped generation
-- keeps CompleteReconcile from removing it. A key enqueued anew meanwhile (due now) stays due
-- now. For reconcilers that wait on something that does not enqueue them (a command finishing,
-- a lease ending).
INSERT INTO reconcile_queue (kind, key, due_at)
VALUES (sqlc.arg(kind), sqlc.arg(key), now() + sqlc.arg(delay_ms)::bigint * interval '1 millisecond')
ON CONFLICT (kind, key) DO UPDATE
SET due_at = CASE WHEN reconcile_queue.due_at <= now() THEN reconcile_queue.due_at ELSE excluded.due_at END,
    generation = reconcile_queue.generation + 1,
    attempts = 0,
    last_error = NULL,
    enqueued_at = now();

-- name: LifecycleResyncNodeKeys :many
-- The lifecycle reconciler's resync: nodes waiting to become drained, and nodes without a
-- Schedulable condition yet (for example nodes that joined before the reconciler ran).
SELECT id::text AS key FROM nodes
WHERE state = 'draining' OR NOT conditions @> '[{"type": "Schedulable"}]'::jsonb
ORDER BY id;

-- name: SpecDriftNodeKeys :many
-- The NodeSpec reconciler's resync: live nodes whose spec is not observed, or whose state
-- differs from it.
SELECT id::text AS key FROM nodes
WHERE revoked_at IS NULL AND state <> 'retired' AND (
    observed_generation < spec_generation
    OR (spec->'labels' IS NOT NULL AND spec->'labels' <> labels)
    OR (spec->'taints' IS NOT NULL AND spec->'taints' <> taints)
    OR (COALESCE(spec->>'daemonVersion', '') <> '' AND spec->>'daemonVersion' <> daemon_version)
    OR (spec->'config' IS NOT NULL AND spec->'config' IS DISTINCT FROM applied_config))
ORDER BY id;

-- name: MarkNodesOffline :many
-- Liveness: up to lim online nodes not heard from within the threshold, directly or through a
-- vouching gateway whose own heartbeat is that recent (node_seen), go offline, each with a
-- node.offline event, in one statement. It reads the narrow node_liveness table, then the stale
-- nodes by their key. A node never heard from has no liveness row and was never online. Node
-- rows another transaction holds are skipped, for the next round.
WITH stale AS (
    SELECT v.node_id, v.last_seen_at FROM node_seen v
    WHERE v.last_seen_at < now() - sqlc.arg(threshold_ms)::bigint * interval '1 millisecond'
), gone AS (
    UPDATE nodes n
    SET online = false, online_changed_at = now()
    WHERE n.id = ANY(ARRAY(
        -- The stale nodes by key, not a join: a join's estimate of them reads every node.
        SELECT c.id FROM nodes c
        WHERE c.id = ANY(ARRAY(SELECT stale.node_id FROM stale)) AND c.online
        ORDER BY c.id
        LIMIT sqlc.arg(lim)
        FOR UPDATE SKIP LOCKED
    )) AND n.online
    RETURNING n.id, n.tenant_id
), events AS (
    INSERT INTO outbox (tenant_id, type, subject, payload)
    SELECT g.tenant_id, 'node.offline', 'node/' || g.id::text,
           jsonb_build_object('id', g.id, 'lastSeenTime', st.last_seen_at)
    FROM gone g JOIN stale st ON st.node_id = g.id ORDER BY g.id
)
SELECT gone.id FROM gone ORDER BY gone.id;

-- name: MarkNodesOnline :many
-- Liveness: up to lim offline, unrevoked nodes heard from within the threshold (node_seen) come
-- online, each with a node.online event, in one statement.
WITH back AS (
    UPDATE nodes n
    SET online = true, online_changed_at = now()
    WHERE n.id = ANY(ARRAY(
        SELECT c.id FROM nodes c JOIN node_seen v ON v.node_id = c.id
        WHERE NOT c.online AND c.revoked_at IS NULL
          AND v.last_seen_at >= now() - sqlc.arg(threshold_ms)::bigint * interval '1 millisecond'
        ORDER BY c.id
        LIMIT sqlc.arg(lim)
        FOR UPDATE OF c SKIP LOCKED
    )) AND NOT n.online
    RETURNING n.id, n.tenant_id
), events AS (
    INSERT INTO outbox (tenant_id, type, subject, payload)
    SELECT b.tenant_id, 'node.online', 'node/' || b.id::text,
           jsonb_build_object('id', b.id, 'lastSeenTime', (SELECT v.last_seen_at FROM node_seen v WHERE v.node_id = b.id))
    FROM back b ORDER BY b.id
)
SELECT back.id FROM back ORDER BY back.id;

-- name: RecordNodeHello :one
-- The gateway's record of a hello, in one statement: the daemon version and inventory, liveness
-- (vouched for by gateway_id, the gateway holding the session, when set),
-- joining -> ready (with a node.ready event), and, only when the inventory differs from the
-- stored one, a history row and a node.inventory.changed event. Returns whether the inventory
-- changed; no row when the node does not exist.
-- merged is the inventory to store: the reported one, except that a report whose GPU probe failed
-- (gpuProbeError set: the driver did not answer) keeps the GPUs and driver stored before, which
-- are missing from this report, not gone from the node.
WITH old AS (
    SELECT o.id, o.tenant_id, o.hostname, o.state, o.inventory FROM nodes o WHERE o.id = sqlc.arg(id) FOR UPDATE
), merged AS (
    SELECT CASE WHEN coalesce(sqlc.arg(inventory)::jsonb ->> 'gpuProbeError', '') = '' THEN sqlc.arg(inventory)::jsonb
                ELSE sqlc.arg(inventory)::jsonb || jsonb_strip_nulls(jsonb_build_object(
                    'gpus', old.inventory -> 'gpus', 'gpuDriver', old.inventory -> 'gpuDriver'))
           END AS inventory
    FROM old
), hello AS (
    UPDATE nodes n
    SET daemon_version = sqlc.arg(daemon_version), inventory = merged.inventory,
        state = CASE WHEN old.state = 'joining' THEN 'ready' ELSE n.state END,
        state_generation = n.state_generation + CASE WHEN old.state = 'joining' THEN 1 ELSE 0 END,
        state_changed_at = CASE WHEN old.state = 'joining' THEN now() ELSE n.state_changed_at END,
        updated_at = now()
    FROM old, merged WHERE n.id = old.id
    RETURNING n.id
), seen AS (
    -- Heard from now, and vouched for by the gateway holding its session from here on.
    INSERT INTO node_liveness (node_id, last_seen_at, gateway_id)
    SELECT old.id, now(), NULLIF(sqlc.arg(gateway_id)::text, '') FROM old
    ON CONFLICT (node_id) DO UPDATE SET last_seen_at = excluded.last_seen_at, gateway_id = excluded.gateway_id
), changed AS (
    SELECT old.id, old.tenant_id, merged.inventory FROM old, merged WHERE old.inventory IS DISTINCT FROM merged.inventory
), history AS (
    INSERT INTO node_inventory_history (node_id, inventory)
    SELECT changed.id, changed.inventory FROM changed
), events AS (
    INSERT INTO outbox (tenant_id, type, subject, payload)
    -- The payloads are internal/event's NodeReady and NodeInventoryChanged (a test checks the keys).
    SELECT old.tenant_id, 'node.ready', 'node/' || old.id::text,
           jsonb_build_object('id', old.id, 'hostname', old.hostname, 'from', 'joining', 'to', 'ready')
    FROM old WHERE old.state = 'joining'
    UNION ALL
    SELECT changed.tenant_id, 'node.inventory.changed', 'node/' || changed.id::text,
           jsonb_build_object('id', changed.id, 'inventory', changed.inventory)
    FROM changed
)
SELECT old.id, EXISTS (SELECT 1 FROM changed)::boolean AS inventory_changed FROM old;

-- name: ListNodeInventoryHistory :many
-- A node's inventory history, newest first, before the id of the previous page's last record.
SELECT h.id, h.inventory, h.recorded_at
FROM node_inventory_history h JOIN nodes n ON n.id = h.node_id
WHERE n.tenant_id = sqlc.arg(tenant_id) AND h.node_id = sqlc.arg(node_id) AND h.id < sqlc.arg(before)
ORDER BY h.id DESC
LIMIT sqlc.arg(lim);

-- name: RecordNodeInventory :one
-- A collectInventory command's result, recorded with it: the node's inventory and, only when it
-- differs from the stored one, a history row and a node.inventory.changed event, as a hello
-- records them (but neither the daemon version nor the state changes). Returns whether the
-- inventory changed; no row when the node does not exist. A failed GPU probe keeps the stored
-- GPUs, as RecordNodeHello does.
WITH old AS (
    SELECT o.id, o.tenant_id, o.inventory FROM nodes o WHERE o.id = sqlc.arg(id) FOR UPDATE
), merged AS (
    SELECT CASE WHEN coalesce(sqlc.arg(inventory)::jsonb ->> 'gpuProbeError', '') = '' THEN sqlc.arg(inventory)::jsonb
                ELSE sqlc.arg(inventory)::jsonb || jsonb_strip_nulls(jsonb_build_object(
                    'gpus', old.inventory -> 'gpus', 'gpuDriver', old.inventory -> 'gpuDriver'))
           END AS inventory
    FROM old
), changed AS (
    SELECT old.id, old.tenant_id, merged.inventory FROM old, merged WHERE old.inventory IS DISTINCT FROM merged.inventory
), updated AS (
    UPDATE nodes n SET inventory = changed.inventory, updated_at = now()
    FROM changed WHERE n.id = changed.id
    RETURNING n.id
), history AS (
    INSERT INTO node_inventory_history (node_id, inventory)
    SELECT changed.id, changed.inventory FROM changed
), events AS (
    INSERT INTO outbox (tenant_id, type, subject, payload)
    SELECT changed.tenant_id, 'node.inventory.changed', 'node/' || changed.id::text,
           jsonb_build_object('id', changed.id, 'inventory', changed.inventory)
    FROM changed
)
SELECT old.id, EXISTS (SELECT 1 FROM changed)::boolean AS inventory_changed FROM old;
