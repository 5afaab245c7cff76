-- Leases: single-writer work. A lease is taken when free or expired, renewed by its holder
-- before it expires, and released by expiring it (the row stays, so fencing tokens only grow).

-- name: AcquireLeases :many
-- Takes every free or expired lease of the names, in one statement.
INSERT INTO leases (name, holder, fencing_token, expires_at)
SELECT n, sqlc.arg(holder), 1, now() + sqlc.arg(ttl_ms)::bigint * interval '1 millisecond' FROM unnest(sqlc.arg(names)::text[]) AS n
ON CONFLICT (name) DO UPDATE
SET holder = excluded.holder,
    fencing_token = leases.fencing_token + 1,
    expires_at = excluded.expires_at,
    acquired_at = now(),
    renewed_at = now()
WHERE leases.expires_at <= now()
RETURNING *;

-- name: RenewLeases :many
-- Extends the holder's unexpired leases among the names; those not returned are lost.
UPDATE leases
SET expires_at = now() + sqlc.arg(ttl_ms)::bigint * interval '1 millisecond', renewed_at = now()
WHERE holder = sqlc.arg(holder) AND name = ANY(sqlc.arg(names)::text[]) AND expires_at > now()
RETURNING *;

-- name: ReleaseLeases :exec
UPDATE leases SET expires_at = now()
WHERE holder = sqlc.arg(holder) AND name = ANY(sqlc.arg(names)::text[]) AND expires_at > now();

-- name: FenceLease :one
-- Inside a transaction: holds the lease row share-locked, so it cannot change hands before the
-- transaction ends, and reports whether the token is still the current, unexpired one.
SELECT (fencing_token = sqlc.arg(fencing_token) AND holder = sqlc.arg(holder) AND expires_at > now())::boolean AS valid
FROM leases WHERE name = sqlc.arg(name)
FOR SHARE;

-- name: ListLeases :many
SELECT * FROM leases WHERE name LIKE sqlc.arg(prefix)::text || '%' ORDER BY name;
