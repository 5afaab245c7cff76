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

-- name: RecordAdmission :exec
-- Everything a committed API mutation records besides its own change, in one round trip: its
-- audit row, its outbox events (in order), and, for a call with an Idempotency-Key, the sealed
-- response a retry will get.
WITH audit AS (
    INSERT INTO audit_events (tenant_id, principal_id, method, target, outcome, request_id)
    VALUES (sqlc.arg(tenant_id), sqlc.arg(principal_id), sqlc.arg(method), sqlc.arg(target), 'ok', sqlc.arg(request_id))
), events AS (
    -- Set-returning functions in a select list advance together, row by row in array order.
    INSERT INTO outbox (tenant_id, type, subject, payload)
    SELECT unnest(sqlc.arg(event_tenants)::uuid[]), unnest(sqlc.arg(event_types)::text[]),
           unnest(sqlc.arg(event_subjects)::text[]), unnest(sqlc.arg(event_payloads)::jsonb[])
), idempotent AS (
    UPDATE idempotency_keys SET response = sqlc.arg(response)
    WHERE sqlc.arg(idempotency_key)::text <> '' AND principal_id = sqlc.arg(principal_id) AND key = sqlc.arg(idempotency_key)::text
)
SELECT 1;
