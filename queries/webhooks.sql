-- Tenants' webhooks. Every statement takes the caller's tenant id.

-- name: LockTenantWebhooks :exec
-- Serialises webhook creation in a tenant, so the per-tenant limit holds.
SELECT pg_advisory_xact_lock(hashtextextended('webhooks:' || sqlc.arg(tenant_id)::uuid::text, 0));

-- name: CountWebhooks :one
SELECT count(*) FROM webhooks WHERE tenant_id = sqlc.arg(tenant_id);

-- name: CreateWebhook :one
INSERT INTO webhooks (id, tenant_id, url, description, event_types, secret_sealed)
VALUES (sqlc.arg(id), sqlc.arg(tenant_id), sqlc.arg(url), sqlc.arg(description), sqlc.arg(event_types)::text[], sqlc.arg(secret_sealed))
RETURNING *;

-- name: GetWebhook :one
SELECT w.id, w.tenant_id, w.url, w.description, w.event_types, w.secret_sealed, w.created_at,
       COALESCE(c.last_error, '')::text AS last_error, c.last_error_at
FROM webhooks w LEFT JOIN sink_cursors c ON c.webhook_id = w.id
WHERE w.tenant_id = sqlc.arg(tenant_id) AND w.id = sqlc.arg(id);

-- name: ListWebhooks :many
SELECT w.id, w.tenant_id, w.url, w.description, w.event_types, w.secret_sealed, w.created_at,
       COALESCE(c.last_error, '')::text AS last_error, c.last_error_at
FROM webhooks w LEFT JOIN sink_cursors c ON c.webhook_id = w.id
WHERE w.tenant_id = sqlc.arg(tenant_id) AND w.id > sqlc.arg(after)
ORDER BY w.id
LIMIT sqlc.arg(lim);

-- name: DeleteWebhook :execrows
-- Its cursor goes with it (ON DELETE CASCADE); its dispatcher stops at the supervisor's next look.
DELETE FROM webhooks WHERE tenant_id = sqlc.arg(tenant_id) AND id = sqlc.arg(id);
