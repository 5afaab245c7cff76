-- The provision module's machines and their steps (provision_machines, provision_machine_steps),
-- for the API and the lifecycle controller.

-- name: CountLiveMachines :one
-- The tenant's machines that are not gone, for its cap, under a lock of the tenant's machines
-- held until the transaction ends, so concurrent creates cannot both pass the cap.
SELECT count(m.id)::bigint
FROM (SELECT pg_advisory_xact_lock(hashtextextended('provision_machines:' || sqlc.arg(tenant_id)::uuid::text, 0))) l
LEFT JOIN provision_machines m ON m.tenant_id = sqlc.arg(tenant_id)::uuid AND m.state <> 'gone';

-- name: CreateMachine :one
-- Creates a requested machine; no row when the tenant has a machine of that name that is not
-- gone.
INSERT INTO provision_machines (id, tenant_id, class, name)
VALUES (sqlc.arg(id), sqlc.arg(tenant_id), sqlc.arg(class), sqlc.arg(name))
ON CONFLICT (tenant_id, name) WHERE state <> 'gone' DO NOTHING
RETURNING *;

-- name: GetMachine :one
SELECT * FROM provision_machines WHERE tenant_id = sqlc.arg(tenant_id) AND id = sqlc.arg(id);

-- name: GetMachineByID :one
-- The controller's read of a machine, any tenant's.
SELECT * FROM provision_machines WHERE id = sqlc.arg(id);

-- name: LockMachine :one
-- The controller's read of a machine, locked until the transaction ends.
SELECT * FROM provision_machines WHERE id = sqlc.arg(id) FOR UPDATE;

-- name: LockMachineOfTenant :one
SELECT * FROM provision_machines WHERE tenant_id = sqlc.arg(tenant_id) AND id = sqlc.arg(id) FOR UPDATE;

-- name: ListMachines :many
-- A page of the tenant's machines by id, of one class when class is not empty.
SELECT * FROM provision_machines
WHERE tenant_id = sqlc.arg(tenant_id) AND id > sqlc.arg(after)
  AND (sqlc.arg(class)::text = '' OR class = sqlc.arg(class)::text)
ORDER BY id
LIMIT sqlc.arg(lim);

-- name: ListLiveMachineIDs :many
-- The machines the controller may still have to move, for its resync.
SELECT id FROM provision_machines WHERE state NOT IN ('gone', 'failed') ORDER BY id;

-- name: ListMachineSteps :many
SELECT state, detail, at FROM provision_machine_steps
WHERE machine_id = sqlc.arg(machine_id)
ORDER BY seq;

-- name: AddMachineStep :exec
INSERT INTO provision_machine_steps (machine_id, state, detail)
VALUES (sqlc.arg(machine_id), sqlc.arg(state), left(sqlc.arg(detail)::text, 1024));

-- name: SetMachineState :one
-- Moves a machine from the state from to state, with the reason (cut to 1024 characters); no
-- row when it is in another state.
UPDATE provision_machines
SET state = sqlc.arg(state), reason = left(sqlc.arg(reason)::text, 1024),
    updated_at = now(), state_changed_at = now()
WHERE id = sqlc.arg(id) AND state = sqlc.arg(from_state)
RETURNING *;

-- name: SetMachineJoinToken :exec
UPDATE provision_machines
SET join_token_id = sqlc.arg(join_token_id), join_token_sealed = sqlc.arg(join_token_sealed), updated_at = now()
WHERE id = sqlc.arg(id);

-- name: SetMachineProviderID :exec
UPDATE provision_machines SET provider_id = sqlc.arg(provider_id), updated_at = now()
WHERE id = sqlc.arg(id);

-- name: SetMachineNode :exec
-- Links the node the machine joined as, and forgets its join token's secret, spent.
UPDATE provision_machines SET node_id = sqlc.arg(node_id), join_token_sealed = NULL, updated_at = now()
WHERE id = sqlc.arg(id);

-- name: SetMachineReason :exec
-- Records the error the controller retries after (cut to 1024 characters); empty clears it.
UPDATE provision_machines SET reason = left(sqlc.arg(reason)::text, 1024), updated_at = now()
WHERE id = sqlc.arg(id) AND reason <> left(sqlc.arg(reason)::text, 1024);

-- name: NodeOfJoinToken :one
-- The node that joined with a join token (a machine's token is single use: one at most).
SELECT id, state, revoked_at FROM nodes
WHERE tenant_id = sqlc.arg(tenant_id) AND join_token_id = sqlc.arg(join_token_id)
ORDER BY created_at
LIMIT 1;

-- name: GetNodeState :one
SELECT id, state, revoked_at, hostname FROM nodes WHERE id = sqlc.arg(id);

-- name: MachineOfNode :one
-- The machine whose daemon joined as node_id, for a remediation's power cycle.
SELECT * FROM provision_machines WHERE node_id = sqlc.arg(node_id) AND state <> 'gone' ORDER BY created_at DESC LIMIT 1;
