-- The provision module's orphan sweep (provision_orphans): the resources of this deployment that
-- a class's provider lists and no machine names, as every tenant's, for the sweep and doctor.

-- name: LiveMachineIDsAmong :many
-- Which of ids are machines, of any tenant and class, that are not gone: a resource tagged with
-- one is its machine's, never an orphan (classes may share a provider's account).
SELECT id FROM provision_machines
WHERE id = ANY(sqlc.arg(ids)::uuid[]) AND state <> 'gone';

-- name: ListOrphanClassKeys :many
-- Every class, for the sweep's resync.
SELECT tenant_id, name FROM provision_classes ORDER BY tenant_id, name;

-- name: SeeOrphan :one
-- Records that the sweep saw an orphan now; inserted is true the first time.
INSERT INTO provision_orphans (tenant_id, class, provider_id, machine_tag, first_seen, last_seen)
VALUES (sqlc.arg(tenant_id), sqlc.arg(class), sqlc.arg(provider_id), left(sqlc.arg(machine_tag)::text, 256),
        sqlc.arg(now), sqlc.arg(now))
ON CONFLICT (tenant_id, class, provider_id) DO UPDATE SET last_seen = excluded.last_seen
RETURNING first_seen, removing_since, removed_at, (xmax = 0)::boolean AS inserted;

-- name: ForgetOrphans :many
-- Forgets the class's orphans its provider no longer lists, returning them, so that a Delete
-- asked for whose outcome was not recorded is recorded now.
DELETE FROM provision_orphans
WHERE tenant_id = sqlc.arg(tenant_id) AND class = sqlc.arg(class)
  AND NOT (provider_id = ANY(sqlc.arg(listed)::text[]))
RETURNING provider_id, machine_tag, first_seen, removing_since, removed_at;

-- name: MarkOrphanRemoving :exec
-- Records that the sweep asks the provider to delete the orphan.
UPDATE provision_orphans SET removing_since = coalesce(removing_since, sqlc.arg(now)::timestamptz)
WHERE tenant_id = sqlc.arg(tenant_id) AND class = sqlc.arg(class) AND provider_id = sqlc.arg(provider_id);

-- name: MarkOrphanRemoved :one
-- Records that the provider deleted the orphan; no row when that was recorded already.
UPDATE provision_orphans SET removed_at = sqlc.arg(now)::timestamptz
WHERE tenant_id = sqlc.arg(tenant_id) AND class = sqlc.arg(class) AND provider_id = sqlc.arg(provider_id)
  AND removed_at IS NULL
RETURNING first_seen;
