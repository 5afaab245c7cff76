-- Where the events module's sink is in the outbox, read from its cursor (the core's sink_cursors),
-- for doctor's lag check and the status API.

-- name: SinkLag :one
-- The events after a sink's cursor, every tenant's, counted up to lim so a large backlog cannot
-- make doctor slow, and the age of the oldest of them by the database's clock (0 when none). No
-- row: the sink has no cursor, so it has never run.
SELECT count(p.created_at)::bigint AS events,
       COALESCE(EXTRACT(EPOCH FROM now() - min(p.created_at)), 0)::float8 AS oldest_seconds
FROM sink_cursors c
LEFT JOIN LATERAL (
    SELECT o.created_at FROM outbox o
    WHERE (o.tx_id, o.id) > (c.tx_id, c.outbox_id)
    ORDER BY o.tx_id, o.id
    LIMIT sqlc.arg(lim)
) p ON true
WHERE c.sink = sqlc.arg(sink)
GROUP BY c.sink;

-- name: TenantPassed :one
-- The id of the newest of a tenant's events at or before a sink's cursor, in the sinks' read
-- order: the last of them the sink has gone past. 0 when there is none, or no cursor.
SELECT COALESCE((
    SELECT o.id FROM sink_cursors c
    JOIN outbox o ON o.tenant_id = sqlc.arg(tenant_id) AND (o.tx_id, o.id) <= (c.tx_id, c.outbox_id)
    WHERE c.sink = sqlc.arg(sink)
    ORDER BY o.tx_id DESC, o.id DESC
    LIMIT 1
), 0)::bigint AS id;
