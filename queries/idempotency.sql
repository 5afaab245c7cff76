-- Stored responses of idempotent calls, keyed by the caller and its Idempotency-Key.

-- name: ClaimIdempotencyKey :execrows
-- Takes the key for this transaction. A concurrent call with the same key waits here until the
-- first commits (then finds its row) or rolls back (then claims the key itself).
INSERT INTO idempotency_keys (principal_id, key, method, request_hash, response)
VALUES (sqlc.arg(principal_id), sqlc.arg(key), sqlc.arg(method), sqlc.arg(request_hash), '')
ON CONFLICT DO NOTHING;

-- name: GetIdempotencyKey :one
SELECT * FROM idempotency_keys WHERE principal_id = sqlc.arg(principal_id) AND key = sqlc.arg(key);
