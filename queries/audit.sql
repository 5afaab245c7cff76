-- The audit log: written by the admission layer, read by audit/list.

-- name: InsertAuditEvent :exec
INSERT INTO audit_events (tenant_id, principal_id, method, target, outcome, request_id)
VALUES (sqlc.narg(tenant_id), sqlc.narg(principal_id), sqlc.arg(method), sqlc.arg(target), sqlc.arg(outcome), sqlc.arg(request_id));

-- name: ListAuditEvents :many
-- Newest first; the cursor is the last id seen.
SELECT * FROM audit_events
WHERE tenant_id = sqlc.arg(tenant_id)
  AND id < sqlc.arg(before)
  AND (sqlc.narg(principal_id)::uuid IS NULL OR principal_id = sqlc.narg(principal_id))
  AND (sqlc.narg(method)::text IS NULL OR method = sqlc.narg(method))
  AND (sqlc.narg(outcome)::text IS NULL OR outcome = sqlc.narg(outcome))
  AND (sqlc.narg(start_time)::timestamptz IS NULL OR created_at >= sqlc.narg(start_time))
  AND (sqlc.narg(end_time)::timestamptz IS NULL OR created_at < sqlc.narg(end_time))
ORDER BY id DESC
LIMIT sqlc.arg(lim);
