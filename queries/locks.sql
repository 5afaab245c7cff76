-- Locks: the workers' single-writer work (internal/locks). A lock is taken when free or
-- expired, renewed by its holder before it expires, and released by expiring it (the row stays,
-- so fencing tokens only grow). Not to be confused with a tenant's leases (capacity.sql).

-- name: AcquireLocks :many
-- Takes every free or expired lock of the names, in one statement.
INSERT INTO locks (name, holder, fencing_token, expires_at)
SELECT n, sqlc.arg(holder), 1, now() + sqlc.arg(ttl_ms)::bigint * interval '1 millisecond' FROM unnest(sqlc.arg(names)::text[]) AS n
ON CONFLICT (name) DO UPDATE
SET holder = excluded.holder,
    fencing_token = locks.fencing_token + 1,
    expires_at = excluded.expires_at,
    acquired_at = now(),
    renewed_at = now()
WHERE locks.expires_at <= now()
RETURNING *;

-- name: RenewLocks :many
-- Extends the holder's unexpired locks among the names; those not returned are lost.
UPDATE locks
SET expires_at = now() + sqlc.arg(ttl_ms)::bigint * interval '1 millisecond', renewed_at = now()
WHERE holder = sqlc.arg(holder) AND name = ANY(sqlc.arg(names)::text[]) AND expires_at > now()
RETURNING *;

-- name: ReleaseLocks :exec
UPDATE locks SET expires_at = now()
WHERE holder = sqlc.arg(holder) AND name = ANY(sqlc.arg(names)::text[]) AND expires_at > now();

-- name: FenceLock :one
-- Inside a transaction: holds the lock row share-locked, so it cannot change hands before the
-- transaction ends, and reports whether the token is still the current, unexpired one.
SELECT (fencing_token = sqlc.arg(fencing_token) AND holder = sqlc.arg(holder) AND expires_at > now())::boolean AS valid
FROM locks WHERE name = sqlc.arg(name)
FOR SHARE;

-- name: ListLocks :many
SELECT * FROM locks WHERE name LIKE sqlc.arg(prefix)::text || '%' ORDER BY name;
