-- The outbox: events written in the same transaction as the change they announce.

-- name: InsertOutboxEvent :exec
INSERT INTO outbox (tenant_id, type, subject, payload)
VALUES (sqlc.arg(tenant_id), sqlc.arg(type), sqlc.arg(subject), sqlc.arg(payload));
