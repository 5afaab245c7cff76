-- Tenants' webhooks. Every statement takes the caller's tenant id.

-- name: CountWebhooks :one
SELECT count(*) FROM webhooks WHERE tenant_id = sqlc.arg(tenant_id);

-- name: CreateWebhook :one
INSERT INTO webhooks (id, tenant_id, url, description, event_types, secret_sealed)
VALUES (sqlc.arg(id), sqlc.arg(tenant_id), sqlc.arg(url), sqlc.arg(description), sqlc.arg(event_types)::text[], sqlc.arg(secret_sealed))
RETURNING *;

-- name: GetWebhook :one
SELECT w.id, w.tenant_id, w.url, w.description, w.event_types, w.secret_sealed, w.created_at,
       COALESCE(c.last_error, '')::text AS last_error, c.last_error_at,
       w.state, w.failing_since, w.failure, w.dead_letters_dropped,
       (SELECT count(*) FROM webhook_dead_letters d WHERE d.webhook_id = w.id)::bigint AS dead_letters
FROM webhooks w LEFT JOIN sink_cursors c ON c.webhook_id = w.id
WHERE w.tenant_id = sqlc.arg(tenant_id) AND w.id = sqlc.arg(id);

-- name: ListWebhooks :many
SELECT w.id, w.tenant_id, w.url, w.description, w.event_types, w.secret_sealed, w.created_at,
       COALESCE(c.last_error, '')::text AS last_error, c.last_error_at,
       w.state, w.failing_since, w.failure, w.dead_letters_dropped,
       (SELECT count(*) FROM webhook_dead_letters d WHERE d.webhook_id = w.id)::bigint AS dead_letters
FROM webhooks w LEFT JOIN sink_cursors c ON c.webhook_id = w.id
WHERE w.tenant_id = sqlc.arg(tenant_id) AND w.id > sqlc.arg(after)
ORDER BY w.id
LIMIT sqlc.arg(lim);

-- name: DeleteWebhook :execrows
-- Its cursor goes with it (ON DELETE CASCADE); its dispatcher stops at the supervisor's next look.
DELETE FROM webhooks WHERE tenant_id = sqlc.arg(tenant_id) AND id = sqlc.arg(id);

-- name: ListDeadLetters :many
-- A page of a webhook's parked events, oldest first.
SELECT outbox_id, type, subject, payload, created_at, parked_at, error, replay FROM webhook_dead_letters
WHERE tenant_id = sqlc.arg(tenant_id) AND webhook_id = sqlc.arg(webhook_id) AND outbox_id > sqlc.arg(after)::bigint
ORDER BY outbox_id
LIMIT sqlc.arg(lim);

-- name: MarkWebhookHealthy :execrows
-- webhooks/replayDeadLetters: the webhook is delivered to again. Its row lock orders the call
-- against the sinks role parking its events (LockWebhookState).
UPDATE webhooks SET state = 'healthy', failing_since = NULL, failure = ''
WHERE tenant_id = sqlc.arg(tenant_id) AND id = sqlc.arg(id);

-- name: QueueDeadLetters :execrows
-- Queues every parked event of a webhook for delivery again, after MarkWebhookHealthy.
UPDATE webhook_dead_letters SET replay = true
WHERE tenant_id = sqlc.arg(tenant_id) AND webhook_id = sqlc.arg(webhook_id) AND NOT replay;
