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

-- name: RecordSinkError :one
-- Records a failed delivery, starting the sink's run of failures if none is running, and returns
-- how long (by the database's clock) the run has lasted: the retry schedule gives up on a
-- webhook's events once it exceeds webhooks.retry.giveUpAfter. No row: the cursor is gone.
UPDATE sink_cursors
SET last_error = sqlc.arg(last_error), last_error_at = now(), updated_at = now(),
    retry_since = COALESCE(retry_since, now())
WHERE sink = sqlc.arg(sink)
RETURNING (EXTRACT(EPOCH FROM now() - retry_since) * 1000)::bigint AS retrying_ms;

-- name: ClearSinkRetry :exec
-- Ends the sink's run of failures: a round delivered everything it tried, or a replay restarts
-- the retry schedule.
UPDATE sink_cursors SET retry_since = NULL WHERE sink = sqlc.arg(sink) AND retry_since IS NOT NULL;

-- name: SinkRetrying :one
-- Whether the sink is in a run of failures. Read after LockWebhookState, in the same
-- transaction, it sees a replay that committed while the lock was awaited.
SELECT (retry_since IS NOT NULL)::boolean AS retrying FROM sink_cursors WHERE sink = sqlc.arg(sink);

-- name: WebhookState :one
-- A webhook's state ('healthy' or 'failing') and, when failing, why. No row: it was deleted.
SELECT state, failure FROM webhooks WHERE id = sqlc.arg(id);

-- name: LockWebhookState :one
-- WebhookState, locked until the transaction ends, so parking a webhook's events and
-- webhooks/replayDeadLetters take turns.
SELECT state, failure FROM webhooks WHERE id = sqlc.arg(id) FOR UPDATE;

-- name: MarkWebhookFailing :exec
-- The retry schedule ran out: from now on the webhook's events are parked, not delivered.
UPDATE webhooks SET state = 'failing', failing_since = now(), failure = sqlc.arg(failure)
WHERE id = sqlc.arg(id);

-- name: ParkDeadLetters :execrows
-- Parks a webhook's events (parallel arrays, one element per event). Fenced like
-- AdvanceSinkCursor, in the same transaction as the cursor's move past them.
INSERT INTO webhook_dead_letters (webhook_id, tenant_id, outbox_id, type, subject, payload, created_at, error)
SELECT sqlc.arg(webhook_id), sqlc.arg(tenant_id), unnest(sqlc.arg(outbox_ids)::bigint[]), unnest(sqlc.arg(types)::text[]),
       unnest(sqlc.arg(subjects)::text[]), unnest(sqlc.arg(payloads)::jsonb[]), unnest(sqlc.arg(created_ats)::timestamptz[]),
       sqlc.arg(error)
ON CONFLICT (webhook_id, outbox_id) DO NOTHING;

-- name: TrimDeadLetters :execrows
-- Keeps a webhook's newest max_rows parked events and deletes the older ones.
DELETE FROM webhook_dead_letters d
WHERE d.webhook_id = sqlc.arg(webhook_id)
  AND d.outbox_id < (
    SELECT k.outbox_id FROM webhook_dead_letters k WHERE k.webhook_id = sqlc.arg(webhook_id)
    ORDER BY k.outbox_id DESC OFFSET sqlc.arg(max_rows)::bigint - 1 LIMIT 1
  );

-- name: CountDroppedDeadLetters :exec
UPDATE webhooks SET dead_letters_dropped = dead_letters_dropped + sqlc.arg(dropped)::bigint WHERE id = sqlc.arg(id);

-- name: UnqueueDeadLetters :exec
-- The retry schedule ran out while replaying: queued events are parked again.
UPDATE webhook_dead_letters SET replay = false, error = sqlc.arg(error)
WHERE webhook_id = sqlc.arg(webhook_id) AND replay;

-- name: ReadQueuedDeadLetters :many
-- A webhook's events queued by webhooks/replayDeadLetters, oldest first.
SELECT outbox_id, tenant_id, type, subject, payload, created_at FROM webhook_dead_letters
WHERE webhook_id = sqlc.arg(webhook_id) AND replay
ORDER BY outbox_id
LIMIT sqlc.arg(lim);

-- name: DeleteDeadLetters :exec
-- Queued events that were delivered.
DELETE FROM webhook_dead_letters WHERE webhook_id = sqlc.arg(webhook_id) AND outbox_id = ANY(sqlc.arg(outbox_ids)::bigint[]);

-- name: ListWebhookSinks :many
-- Every tenant's webhooks, for the sinks role's supervisor.
SELECT id, tenant_id, url, event_types, secret_sealed FROM webhooks ORDER BY id;
