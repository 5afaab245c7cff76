-- events/list: a tenant's outbox events.

-- name: ListEvents :many
-- Newest first; the cursor is the last id seen.
SELECT id, tenant_id, type, subject, payload, created_at
FROM outbox
WHERE tenant_id = sqlc.arg(tenant_id)
  AND id < sqlc.arg(before)
  AND (sqlc.narg(type)::text IS NULL OR type = sqlc.narg(type))
  AND (sqlc.narg(subject)::text IS NULL OR subject = sqlc.narg(subject))
ORDER BY id DESC
LIMIT sqlc.arg(lim);
