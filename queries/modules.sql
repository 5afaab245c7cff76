-- Bookkeeping of module migrations (package migrate): module_migrations holds, per module, what
-- schema_migrations holds for the core. The lock is the core's (queries/migrate.sql).

-- name: ModuleMigrationsExists :one
SELECT (to_regclass('module_migrations') IS NOT NULL)::boolean AS exists;

-- name: ListAppliedModuleMigrations :many
SELECT version, name, checksum, applied_at
FROM module_migrations
WHERE module = sqlc.arg(module)
ORDER BY version;

-- name: RecordModuleMigration :exec
INSERT INTO module_migrations (module, version, name, checksum)
VALUES (sqlc.arg(module), sqlc.arg(version), sqlc.arg(name), sqlc.arg(checksum));
