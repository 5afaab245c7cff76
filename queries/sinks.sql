-- Outbox delivery: the sinks role reads the outbox in a commit-safe order and keeps one cursor per
-- sink. xid8 values cross the wire as bigint (a full transaction id fits in 63 bits).

-- name: OutboxHorizon :one
-- The oldest transaction that may still be running: every transaction below it has committed or
-- aborted, so no outbox row with a smaller tx_id can appear later (see 0005_sinks.sql). It only
-- grows, so a horizon read earlier is still safe to read below.
SELECT pg_snapshot_xmin(pg_current_snapshot())::text::bigint AS horizon;

-- name: ReadOutbox :many
-- Every tenant's events after the cursor and below a horizon from OutboxHorizon, in the sinks'
-- read order.
SELECT id, tx_id::text::bigint AS tx_id, tenant_id, type, subject, payload, created_at
FROM outbox
WHERE (tx_id, id) > ((sqlc.arg(after_tx)::bigint)::text::xid8, sqlc.arg(after_id)::bigint)
  AND tx_id < (sqlc.arg(before_tx)::bigint)::text::xid8
ORDER BY tx_id, id
LIMIT sqlc.arg(lim);

-- name: ReadTenantOutbox :many
-- One tenant's events after the cursor, as ReadOutbox, optionally only of some types.
SELECT id, tx_id::text::bigint AS tx_id, tenant_id, type, subject, payload, created_at
FROM outbox
WHERE tenant_id = sqlc.arg(tenant_id)
  AND (tx_id, id) > ((sqlc.arg(after_tx)::bigint)::text::xid8, sqlc.arg(after_id)::bigint)
  AND tx_id < (sqlc.arg(before_tx)::bigint)::text::xid8
  AND (coalesce(cardinality(sqlc.arg(types)::text[]), 0) = 0 OR type = ANY(sqlc.arg(types)::text[]))
ORDER BY tx_id, id
LIMIT sqlc.arg(lim);

-- name: EnsureSinkCursor :exec
-- Creates a sink's cursor, if it has none, at the oldest unfinished transaction: the sink gets
-- every event committed from now on, and none of the history.
INSERT INTO sink_cursors (sink, webhook_id, tx_id, outbox_id)
VALUES (sqlc.arg(sink), sqlc.narg(webhook_id), pg_snapshot_xmin(pg_current_snapshot()), 0)
ON CONFLICT (sink) DO NOTHING;

-- name: GetSinkCursor :one
SELECT sink, tx_id::text::bigint AS tx_id, outbox_id FROM sink_cursors WHERE sink = sqlc.arg(sink);

-- name: AdvanceSinkCursor :execrows
-- Moves a cursor forward, never back, and clears its error. Run after lease.Fence in the same
-- transaction. No row: the sink's cursor was deleted (its webhook was).
UPDATE sink_cursors
SET tx_id = (sqlc.arg(tx_id)::bigint)::text::xid8, outbox_id = sqlc.arg(outbox_id)::bigint,
    last_error = '', updated_at = now()
WHERE sink = sqlc.arg(sink)
  AND (tx_id, outbox_id) < ((sqlc.arg(tx_id)::bigint)::text::xid8, sqlc.arg(outbox_id)::bigint);

-- name: RecordSinkError :exec
UPDATE sink_cursors SET last_error = sqlc.arg(last_error), last_error_at = now(), updated_at = now()
WHERE sink = sqlc.arg(sink);

-- name: ListWebhookSinks :many
-- Every tenant's webhooks, for the sinks role's supervisor.
SELECT id, tenant_id, url, event_types, secret_sealed FROM webhooks ORDER BY id;
