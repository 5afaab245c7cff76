-- Gateway dispatch (issue 18): a round's commands claimed in one statement.

-- name: ClaimPendingCommands :many
-- pending -> sent for the pending, not yet overdue commands of the nodes, oldest first and at
-- most rooms[i] of node_ids[i] (what its session's queue has room for) and lim in all;
-- returns those that moved. The outer state check skips commands cancelled, expired or sent by another gateway
-- since the subquery's snapshot.
UPDATE commands c
SET state = 'sent', attempts = c.attempts + 1, sent_at = now(), updated_at = now()
FROM (
    SELECT p.id
    FROM unnest(sqlc.arg(node_ids)::uuid[]) WITH ORDINALITY AS r (node_id, i)
    CROSS JOIN LATERAL (
        SELECT id FROM commands
        WHERE node_id = r.node_id AND state = 'pending' AND deadline > now()
        ORDER BY id
        LIMIT (sqlc.arg(rooms)::int[])[r.i]
    ) p
    LIMIT sqlc.arg(lim)
) due
WHERE c.id = due.id AND c.state = 'pending'
RETURNING c.*;

-- name: AckCommands :exec
-- sent -> acked for the acks a gateway received in the last few milliseconds, in one statement
-- (AckCommand's transition for many commands): node_ids[i] acked ids[i]. An ack that a result
-- overtook finds its command finished and changes nothing.
UPDATE commands c
SET state = 'acked', acked_at = now(), updated_at = now()
FROM (SELECT unnest(sqlc.arg(node_ids)::uuid[]) AS node_id, unnest(sqlc.arg(ids)::uuid[]) AS id) a
WHERE c.node_id = a.node_id AND c.id = a.id AND c.state = 'sent';
