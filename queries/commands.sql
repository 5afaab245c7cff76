-- Commands to nodes. The API's statements take the caller's tenant id; the gateway's take the
-- node id its session authenticated. Every state transition names the state it leaves in its
-- WHERE clause, so a transition from a wrong state (a late ack, a result after a cancel, two
-- gateways racing) changes nothing and returns no row. internal/command (the transitions) holds the
-- same rules in Go.
--
-- Batch statements pick their rows with "id = ANY(ARRAY(SELECT ... LIMIT n))": the array is
-- computed once. With "id IN (SELECT ... LIMIT n FOR UPDATE SKIP LOCKED)" the planner may rescan
-- the subquery, which then skips the rows the statement already changed and returns new ones,
-- so the batch is no longer bounded by n.

-- name: CreateCommand :one
-- Creates a pending command, or returns the existing command with the same idempotency key for
-- the same node (its id then differs from the id passed in). The no-op update takes the
-- existing row's lock, so a concurrent create with the same key waits and returns the winner's
-- row rather than nothing.
INSERT INTO commands (id, tenant_id, node_id, type, payload, idempotency_key, deadline)
VALUES (sqlc.arg(id), sqlc.arg(tenant_id), sqlc.arg(node_id), sqlc.arg(type), sqlc.arg(payload),
        sqlc.arg(idempotency_key), sqlc.arg(deadline))
ON CONFLICT (tenant_id, node_id, idempotency_key) DO UPDATE SET idempotency_key = excluded.idempotency_key
RETURNING *;

-- name: GetCommand :one
SELECT * FROM commands WHERE tenant_id = sqlc.arg(tenant_id) AND id = sqlc.arg(id);

-- name: LockCommand :one
-- GetCommand inside a transaction, holding the row until it ends.
SELECT * FROM commands WHERE tenant_id = sqlc.arg(tenant_id) AND id = sqlc.arg(id) FOR UPDATE;

-- name: ListCommands :many
SELECT * FROM commands
WHERE tenant_id = sqlc.arg(tenant_id)
  AND (sqlc.narg(node_id)::uuid IS NULL OR node_id = sqlc.narg(node_id))
  AND (sqlc.narg(state)::command_state IS NULL OR state = sqlc.narg(state))
  AND (sqlc.narg(fan_out_id)::uuid IS NULL OR fan_out_id = sqlc.narg(fan_out_id))
  AND id > sqlc.arg(after)
ORDER BY id
LIMIT sqlc.arg(lim);

-- name: CancelCommand :one
-- pending | sent | acked -> cancelled.
UPDATE commands
SET state = 'cancelled', finished_at = now(), updated_at = now()
WHERE tenant_id = sqlc.arg(tenant_id) AND id = sqlc.arg(id) AND state IN ('pending', 'sent', 'acked')
RETURNING *;

-- name: PendingCommands :many
-- Dispatch: the pending commands of the nodes, oldest first, that are not yet overdue.
SELECT * FROM commands
WHERE node_id = ANY(sqlc.arg(node_ids)::uuid[]) AND state = 'pending' AND deadline > now()
ORDER BY node_id, id
LIMIT sqlc.arg(lim);

-- name: MarkCommandsSent :many
-- pending -> sent, for the commands of one node about to go out on its session; returns those
-- that moved (the others were cancelled, expired or sent by someone else meanwhile).
UPDATE commands
SET state = 'sent', attempts = attempts + 1, sent_at = now(), updated_at = now()
WHERE node_id = sqlc.arg(node_id) AND id = ANY(sqlc.arg(ids)::uuid[]) AND state = 'pending'
RETURNING *;

-- name: AckCommand :one
-- sent -> acked: the node has the command and has started it.
UPDATE commands
SET state = 'acked', acked_at = now(), updated_at = now()
WHERE node_id = sqlc.arg(node_id) AND id = sqlc.arg(id) AND state = 'sent'
RETURNING *;

-- name: FinishCommand :one
-- sent | acked -> succeeded | failed, with what the node reported (a result can overtake an ack
-- that was lost with a gateway). A repeated result finds the command finished and changes
-- nothing, so a result is recorded once. A workflow waiting for the command is woken.
WITH finished AS (
    UPDATE commands
    SET state = sqlc.arg(state)::command_state, result = sqlc.narg(result), error = sqlc.arg(error),
        finished_at = now(), updated_at = now()
    WHERE commands.node_id = sqlc.arg(node_id) AND commands.id = sqlc.arg(id) AND commands.state IN ('sent', 'acked')
      AND sqlc.arg(state)::command_state IN ('succeeded', 'failed')
    RETURNING *
), wake AS (
    INSERT INTO reconcile_queue (kind, key)
    SELECT 'workflow', w.workflow_id::text FROM workflow_nodes w JOIN finished f ON w.command_id = f.id
    WHERE w.open
    ON CONFLICT (kind, key) DO UPDATE
    SET due_at = LEAST(reconcile_queue.due_at, now()), generation = reconcile_queue.generation + 1, enqueued_at = now()
)
SELECT * FROM finished;

-- name: ExpireOverdueCommands :execrows
-- The sweeper: pending | sent | acked -> expired, for up to lim commands whose deadline passed.
-- SKIP LOCKED leaves rows a gateway or an API call is changing right now to the next sweep.
UPDATE commands
SET state = 'expired', finished_at = now(), updated_at = now(),
    error = 'deadline passed while the command was ' || state
WHERE id = ANY(ARRAY(
    SELECT c.id FROM commands c
    WHERE c.finished_at IS NULL AND c.deadline <= now()
    ORDER BY c.deadline
    LIMIT sqlc.arg(lim)
    FOR UPDATE SKIP LOCKED
)) AND state IN ('pending', 'sent', 'acked');

-- name: RequeueUnackedCommands :execrows
-- The sweeper: sent -> pending, for up to lim commands sent longer than ack_timeout ago and not
-- acked, so the gateway sends them again. Overdue ones are left to ExpireOverdueCommands.
UPDATE commands
SET state = 'pending', updated_at = now()
WHERE id = ANY(ARRAY(
    SELECT c.id FROM commands c
    WHERE c.state = 'sent' AND c.sent_at < now() - sqlc.arg(ack_timeout_ms)::bigint * interval '1 millisecond'
      AND c.deadline > now()
    ORDER BY c.sent_at
    LIMIT sqlc.arg(lim)
    FOR UPDATE SKIP LOCKED
)) AND state = 'sent';
