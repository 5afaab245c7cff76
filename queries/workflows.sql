-- Workflows (workflows/* in the API, the "workflow" reconciler in the controllers role).

-- name: CreateWorkflow :one
INSERT INTO workflows (id, tenant_id, name, action_type, action, target, version, max_parallel, max_failures,
                       min_healthy_ms, drain_deadline_ms, step_timeout_ms, state, origin, created_by)
VALUES (sqlc.arg(id), sqlc.arg(tenant_id), sqlc.arg(name), sqlc.arg(action_type), sqlc.arg(action), sqlc.arg(target),
        sqlc.arg(version), sqlc.arg(max_parallel), sqlc.arg(max_failures), sqlc.arg(min_healthy_ms),
        sqlc.arg(drain_deadline_ms), sqlc.arg(step_timeout_ms), sqlc.arg(state), sqlc.arg(origin), sqlc.arg(created_by))
RETURNING *;

-- name: AddWorkflowNodes :many
-- Appends nodes to a workflow after its last position, in the order given. A node already in an
-- open workflow violates workflow_nodes_open_node; the caller names it (OpenWorkflowOfNodes).
-- Two concurrent appends may give the same positions: order is by position, then node id.
INSERT INTO workflow_nodes (workflow_id, node_id, tenant_id, position)
SELECT sqlc.arg(workflow_id), n.id, sqlc.arg(tenant_id),
       (SELECT coalesce(max(position) + 1, 0) FROM workflow_nodes WHERE workflow_id = sqlc.arg(workflow_id)) + n.ord - 1
FROM unnest(sqlc.arg(node_ids)::uuid[]) WITH ORDINALITY AS n (id, ord)
RETURNING node_id;

-- name: OpenWorkflowOfNodes :many
-- Which of the nodes are in an open workflow, and which.
SELECT node_id, workflow_id FROM workflow_nodes
WHERE tenant_id = sqlc.arg(tenant_id) AND node_id = ANY(sqlc.arg(node_ids)::uuid[]) AND open
ORDER BY node_id;

-- name: WorkflowTargetIDs :many
-- The live nodes of the tenant among ids (neither retired nor revoked), in no order.
SELECT id FROM nodes
WHERE tenant_id = sqlc.arg(tenant_id) AND id = ANY(sqlc.arg(ids)::uuid[]) AND state <> 'retired' AND revoked_at IS NULL;

-- name: WorkflowTargetSelector :many
-- The live nodes of the tenant whose labels include selector, oldest first; at most lim.
SELECT id FROM nodes
WHERE tenant_id = sqlc.arg(tenant_id) AND labels @> sqlc.arg(selector)::jsonb AND state <> 'retired' AND revoked_at IS NULL
ORDER BY created_at, id
LIMIT sqlc.arg(lim);

-- name: WorkflowTargetPool :many
-- The members of a pool of the tenant, oldest first; at most lim.
SELECT n.id FROM nodes n JOIN pools p ON pool_member(p, n)
WHERE p.tenant_id = sqlc.arg(tenant_id) AND p.id = sqlc.arg(pool_id) AND n.tenant_id = sqlc.arg(tenant_id)
ORDER BY n.created_at, n.id
LIMIT sqlc.arg(lim);

-- name: CountUnfinishedWorkflows :one
-- The tenant's running or paused workflows made by workflows/create (its cap).
SELECT count(*) FROM workflows WHERE tenant_id = sqlc.arg(tenant_id) AND finished_at IS NULL AND origin = 'api';

-- name: GetWorkflow :one
SELECT * FROM workflows WHERE tenant_id = sqlc.arg(tenant_id) AND id = sqlc.arg(id);

-- name: LockWorkflowOfTenant :one
SELECT * FROM workflows WHERE tenant_id = sqlc.arg(tenant_id) AND id = sqlc.arg(id) FOR NO KEY UPDATE;

-- name: LockWorkflow :one
-- The controller's read of a workflow, locked until the transaction ends. NO KEY UPDATE leaves
-- the key share of inserts into workflow_nodes free, so adding nodes never waits for a run.
SELECT * FROM workflows WHERE id = sqlc.arg(id) FOR NO KEY UPDATE;

-- name: ListWorkflows :many
-- A page of the tenant's workflows, newest first (ids are UUIDv7), after the page token's id.
SELECT * FROM workflows
WHERE tenant_id = sqlc.arg(tenant_id)
  AND (sqlc.narg(before)::uuid IS NULL OR id < sqlc.narg(before))
  AND (cardinality(sqlc.arg(states)::text[]) = 0 OR state::text = ANY(sqlc.arg(states)::text[]))
ORDER BY id DESC
LIMIT sqlc.arg(lim);

-- name: WorkflowStepCounts :many
-- How many nodes of each workflow are at each step.
SELECT workflow_id, step, count(*)::integer AS nodes
FROM workflow_nodes WHERE tenant_id = sqlc.arg(tenant_id) AND workflow_id = ANY(sqlc.arg(ids)::uuid[])
GROUP BY workflow_id, step;

-- name: ListWorkflowNodes :many
-- A workflow's nodes in order, with their hostnames.
SELECT w.*, n.hostname
FROM workflow_nodes w JOIN nodes n ON n.id = w.node_id
WHERE w.tenant_id = sqlc.arg(tenant_id) AND w.workflow_id = sqlc.arg(workflow_id)
ORDER BY w.position, w.node_id
LIMIT sqlc.arg(lim);

-- name: SetWorkflowState :one
-- Moves a workflow to state with reason; a final state sets finished_at. The nodes stay the
-- workflow's until ReleaseWorkflowNodes (the controller lets go of them once it has cleaned up).
UPDATE workflows
SET state = sqlc.arg(state), reason = sqlc.arg(reason), updated_at = now(),
    finished_at = CASE WHEN sqlc.arg(state)::workflow_state IN ('succeeded', 'failed', 'cancelled') THEN coalesce(finished_at, now()) END
WHERE tenant_id = sqlc.arg(tenant_id) AND id = sqlc.arg(id)
RETURNING *;

-- name: SetWorkflowMaxFailures :exec
UPDATE workflows SET max_failures = sqlc.arg(max_failures), updated_at = now() WHERE tenant_id = sqlc.arg(tenant_id) AND id = sqlc.arg(id);

-- name: ReleaseWorkflowNodes :exec
-- A finished workflow lets go of its nodes.
UPDATE workflow_nodes SET open = false WHERE workflow_id = sqlc.arg(workflow_id) AND open;

-- name: RetryFailedWorkflowNodes :execrows
-- Failed nodes start over: pending again, with the next attempt.
UPDATE workflow_nodes
SET step = 'pending', attempt = attempt + 1, command_id = NULL, message = 'retrying: ' || left(message, 900),
    admitted_at = NULL, step_at = NULL, act_at = NULL, healthy_since = NULL, finished_at = NULL
WHERE tenant_id = sqlc.arg(tenant_id) AND workflow_id = sqlc.arg(workflow_id) AND step = 'failed';

-- name: WorkflowNodesInFlight :many
-- The controller's view of a workflow's admitted, unfinished nodes: each with its node and the
-- act step's command.
SELECT w.node_id, w.position, w.step, w.attempt, w.command_id, w.cordoned, w.message,
       w.step_at, w.act_at, w.healthy_since,
       n.state AS node_state, n.online, n.daemon_version, n.revoked_at, n.hostname, n.tenant_id AS node_tenant_id,
       n.state_generation,
       s.connected_at AS session_connected_at,
       c.state AS command_state, c.error AS command_error, c.finished_at AS command_finished_at, c.sent_at AS command_sent_at
FROM workflow_nodes w
JOIN nodes n ON n.id = w.node_id
LEFT JOIN node_sessions s ON s.node_id = w.node_id
LEFT JOIN commands c ON c.id = w.command_id AND c.node_id = w.node_id
WHERE w.workflow_id = sqlc.arg(workflow_id) AND w.step IN ('cordon', 'drain', 'act', 'verify', 'uncordon')
ORDER BY w.position, w.node_id;

-- name: PendingWorkflowNodes :many
-- The next nodes to admit, in order, with their nodes' state.
SELECT w.node_id, w.attempt, w.cordoned, n.state AS node_state, n.revoked_at, n.hostname
FROM workflow_nodes w JOIN nodes n ON n.id = w.node_id
WHERE w.workflow_id = sqlc.arg(workflow_id) AND w.step = 'pending'
ORDER BY w.position, w.node_id
LIMIT sqlc.arg(lim);

-- name: SetWorkflowNodeStep :exec
-- Records a node's step and what the controller knows of it. Entering a step stamps step_at (and
-- admitted_at, act_at, finished_at where they start); staying in it keeps them.
UPDATE workflow_nodes
SET message = sqlc.arg(message),
    command_id = sqlc.narg(command_id),
    cordoned = sqlc.arg(cordoned),
    healthy_since = sqlc.narg(healthy_since),
    admitted_at = CASE WHEN sqlc.arg(step)::workflow_step NOT IN ('pending', 'skipped') THEN coalesce(admitted_at, now()) ELSE admitted_at END,
    step_at = CASE WHEN step = sqlc.arg(step)::workflow_step THEN step_at ELSE now() END,
    act_at = CASE WHEN act_at IS NULL AND sqlc.arg(step)::workflow_step IN ('act', 'verify', 'uncordon') THEN now() ELSE act_at END,
    finished_at = CASE WHEN sqlc.arg(step)::workflow_step IN ('succeeded', 'failed', 'skipped') THEN coalesce(finished_at, now()) END,
    step = sqlc.arg(step)
WHERE workflow_id = sqlc.arg(workflow_id) AND node_id = sqlc.arg(node_id);

-- name: SkipPendingWorkflowNodes :execrows
UPDATE workflow_nodes SET step = 'skipped', message = sqlc.arg(message), finished_at = now()
WHERE workflow_id = sqlc.arg(workflow_id) AND step = 'pending';

-- name: NodeActiveLeaseIDs :many
-- The leases holding anything on a node.
SELECT DISTINCT lease_id FROM allocations WHERE node_id = sqlc.arg(node_id) AND ended_at IS NULL;

-- name: FindSpecWorkflow :one
-- The tenant's unfinished spec-made upgrade workflow to version, if any.
SELECT * FROM workflows
WHERE tenant_id = sqlc.arg(tenant_id) AND finished_at IS NULL AND origin = 'spec' AND version = sqlc.arg(version)
ORDER BY id DESC
LIMIT 1;

-- name: NodeWorkflowProgress :one
-- The newest workflow a node is or was in, with its step there: what the NodeSpec reconciler
-- reports.
SELECT w.id, w.state, w.origin, w.version, wn.step, wn.message, wn.open
FROM workflow_nodes wn JOIN workflows w ON w.id = wn.workflow_id
WHERE wn.node_id = sqlc.arg(node_id)
ORDER BY w.id DESC
LIMIT 1;

-- name: WorkflowsToResync :many
-- Unfinished workflows, and finished ones still holding nodes.
SELECT id::text FROM workflows WHERE finished_at IS NULL
UNION
SELECT DISTINCT workflow_id::text FROM workflow_nodes WHERE open AND workflow_id IN (SELECT id FROM workflows WHERE finished_at IS NOT NULL);
