-- Gateway dispatch (issue 18): a round's commands claimed in one statement.

-- name: ClaimPendingCommands :many
-- pending -> sent for the pending, not yet overdue commands of the nodes, oldest first and at
-- most rooms[i] of node_ids[i] (what its session's queue has room for) and lim in all;
-- returns those that moved. A fan-out's commands are left to ClaimFanOutCommands, which keeps
-- the fan-out within its max_in_flight. The outer state check skips commands cancelled, expired or sent by another gateway
-- since the subquery's snapshot. The ids are chosen once (ARRAY(...), an InitPlan) and the
-- rows then found by primary key: as a join, a plan cached while the table was small put the
-- pending commands outside and ran the per-node lookups again for each of them (3,000 nodes
-- with a fan-out pending: 9 million index probes, 9 to 37 s).
UPDATE commands c
SET state = 'sent', attempts = c.attempts + 1, sent_at = now(), updated_at = now()
WHERE c.id = ANY(ARRAY(
    SELECT p.id
    FROM unnest(sqlc.arg(node_ids)::uuid[]) WITH ORDINALITY AS r (node_id, i)
    CROSS JOIN LATERAL (
        SELECT id FROM commands
        WHERE node_id = r.node_id AND state = 'pending' AND deadline > now() AND fan_out_id IS NULL
        ORDER BY id
        LIMIT (sqlc.arg(rooms)::int[])[r.i]
    ) p
    LIMIT sqlc.arg(lim)
)) AND c.state = 'pending'
RETURNING c.*;

-- name: AckCommands :exec
-- sent -> acked for the acks a gateway received in the last few milliseconds, in one statement
-- (AckCommand's transition for many commands): node_ids[i] acked ids[i]. An ack that a result
-- overtook finds its command finished and changes nothing. The commands are locked in id order,
-- as FinishCommands locks them, so that an ack batch and a result batch of the same commands,
-- written at once, wait for each other rather than deadlock. Its commit is not waited for on
-- disk (synchronous_commit off for this statement's transaction, as commands_reserve_all's): an
-- ack only narrows what the sweeper re-queues, and one lost with a crash costs at most a
-- redelivery that the daemon answers from its record.
WITH locked AS MATERIALIZED (
    SELECT c.id
    FROM commands c
    JOIN (SELECT unnest(sqlc.arg(node_ids)::uuid[]) AS node_id, unnest(sqlc.arg(ids)::uuid[]) AS id) a
      ON c.node_id = a.node_id AND c.id = a.id
    WHERE c.state = 'sent'
    ORDER BY c.id
    FOR UPDATE OF c
)
UPDATE commands c
SET state = 'acked', acked_at = now(), updated_at = now()
FROM locked
WHERE c.id = locked.id AND c.state = 'sent'
  AND (SELECT set_config('synchronous_commit', 'off', true)) = 'off';

-- name: FinishCommands :many
-- FinishCommand for the results a gateway received in the last few milliseconds, in one
-- statement: node_ids[i] reported states[i] (succeeded or failed) for ids[i], with results[i]
-- (protojson, '' for none) and errors[i]. A repeated result finds its command finished and
-- changes nothing; the workflows waiting for any of the commands are woken. The commands are
-- locked in id order (see AckCommands), and the workflows' queue rows in key order, so that
-- batches written at once never deadlock.
WITH r AS (
    SELECT unnest(sqlc.arg(node_ids)::uuid[]) AS node_id, unnest(sqlc.arg(ids)::uuid[]) AS id,
           unnest(sqlc.arg(states)::text[])::command_state AS state, unnest(sqlc.arg(results)::text[]) AS result,
           unnest(sqlc.arg(errors)::text[]) AS error
), locked AS MATERIALIZED (
    SELECT c.id
    FROM commands c
    JOIN r ON c.node_id = r.node_id AND c.id = r.id
    WHERE c.state IN ('sent', 'acked') AND r.state IN ('succeeded', 'failed')
    ORDER BY c.id
    FOR UPDATE OF c
), finished AS (
    UPDATE commands c
    SET state = r.state, result = NULLIF(r.result, '')::jsonb, error = r.error, finished_at = now(), updated_at = now()
    FROM r, locked
    WHERE c.id = locked.id AND c.node_id = r.node_id AND c.id = r.id AND c.state IN ('sent', 'acked') AND r.state IN ('succeeded', 'failed')
    RETURNING c.*
), wake AS (
    INSERT INTO reconcile_queue (kind, key)
    SELECT DISTINCT 'workflow', w.workflow_id::text FROM workflow_nodes w JOIN finished f ON w.command_id = f.id
    WHERE w.open
    ORDER BY 2
    ON CONFLICT (kind, key) DO UPDATE
    SET due_at = LEAST(reconcile_queue.due_at, now()), generation = reconcile_queue.generation + 1, enqueued_at = now()
)
SELECT * FROM finished;
