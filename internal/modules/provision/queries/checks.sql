-- The provision module's doctor checks: they read every tenant's rows, as an operator would.

-- name: ListAllClasses :many
-- Every class of every tenant, for the providers and orphans checks.
SELECT * FROM provision_classes ORDER BY tenant_id, name LIMIT sqlc.arg(lim);

-- name: StuckMachines :many
-- Machines in a step that should pass (neither ready, gone nor failed) for longer than the
-- threshold, oldest first.
SELECT id, tenant_id, name, state, state_changed_at FROM provision_machines
WHERE state NOT IN ('ready', 'gone', 'failed')
  AND state_changed_at < now() - sqlc.arg(threshold_ms)::bigint * interval '1 millisecond'
ORDER BY state_changed_at
LIMIT sqlc.arg(lim);
