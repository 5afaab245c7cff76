-- Reservations: a pool held for a time window. The exclusion constraint reservations_no_overlap
-- makes double booking fail in the database (SQLSTATE 23P01). API statements take the caller's
-- tenant id.

-- name: CreateReservation :one
INSERT INTO reservations (id, tenant_id, pool_id, during, description)
VALUES (sqlc.arg(id), sqlc.arg(tenant_id), sqlc.arg(pool_id),
        tstzrange(sqlc.arg(starts_at)::timestamptz, sqlc.arg(ends_at)::timestamptz), sqlc.arg(description))
RETURNING id, tenant_id, pool_id, lower(during)::timestamptz AS starts_at, upper(during)::timestamptz AS ends_at,
          description, state, created_at, cancelled_at;

-- name: GetReservation :one
SELECT id, tenant_id, pool_id, lower(during)::timestamptz AS starts_at, upper(during)::timestamptz AS ends_at,
       description, state, created_at, cancelled_at
FROM reservations
WHERE tenant_id = sqlc.arg(tenant_id) AND id = sqlc.arg(id);

-- name: ListReservations :many
SELECT id, tenant_id, pool_id, lower(during)::timestamptz AS starts_at, upper(during)::timestamptz AS ends_at,
       description, state, created_at, cancelled_at
FROM reservations
WHERE tenant_id = sqlc.arg(tenant_id) AND id > sqlc.arg(after)
  AND (sqlc.narg(pool_id)::uuid IS NULL OR pool_id = sqlc.narg(pool_id))
  AND (sqlc.arg(include_cancelled)::boolean OR state = 'active')
ORDER BY id
LIMIT sqlc.arg(lim);

-- name: CancelReservation :one
UPDATE reservations SET state = 'cancelled', cancelled_at = now()
WHERE tenant_id = sqlc.arg(tenant_id) AND id = sqlc.arg(id) AND state = 'active'
RETURNING id, tenant_id, pool_id, lower(during)::timestamptz AS starts_at, upper(during)::timestamptz AS ends_at,
          description, state, created_at, cancelled_at;

-- name: PendingReservationLeases :many
SELECT id FROM pool_leases WHERE reservation_id = sqlc.arg(reservation_id) AND state = 'pending' ORDER BY seq;
