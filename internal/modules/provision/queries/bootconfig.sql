-- A machine's single-use boot ticket (machines/bootConfig).

-- name: CreateBootTicket :exec
-- Records the machine's ticket; a machine keeps the first it was given.
INSERT INTO provision_boot_tickets (machine_id, secret_hash, ticket_sealed, expires_at)
VALUES (sqlc.arg(machine_id), sqlc.arg(secret_hash), sqlc.arg(ticket_sealed), sqlc.arg(expires_at))
ON CONFLICT (machine_id) DO NOTHING;

-- name: GetBootTicket :one
SELECT * FROM provision_boot_tickets WHERE machine_id = sqlc.arg(machine_id);

-- name: SetBootConfig :exec
-- Records the sealed boot configuration of a ticket not yet used.
UPDATE provision_boot_tickets SET config_sealed = sqlc.arg(config_sealed)
WHERE machine_id = sqlc.arg(machine_id) AND used_at IS NULL;

-- name: LockBootTicket :one
-- The ticket of a machine with the machine's state, locked until the transaction ends.
SELECT t.secret_hash, t.config_sealed, t.expires_at, t.used_at, m.tenant_id, m.name, m.state
FROM provision_boot_tickets t
JOIN provision_machines m ON m.id = t.machine_id
WHERE t.machine_id = sqlc.arg(machine_id)
FOR UPDATE OF t;

-- name: SpendBootTicket :exec
-- Marks the ticket used and forgets the configuration it served.
UPDATE provision_boot_tickets SET used_at = now(), config_sealed = NULL
WHERE machine_id = sqlc.arg(machine_id);
