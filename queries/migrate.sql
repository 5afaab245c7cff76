-- Bookkeeping of the migrator (package migrate). The lock is a session-level advisory lock, held
-- on one connection while pending migrations run, so concurrent migrators take turns.

-- name: AcquireMigrationLock :exec
SELECT pg_advisory_lock(sqlc.arg(lock_key)::bigint);

-- name: ReleaseMigrationLock :exec
SELECT pg_advisory_unlock(sqlc.arg(lock_key)::bigint);

-- name: SchemaMigrationsExists :one
SELECT (to_regclass('schema_migrations') IS NOT NULL)::boolean AS exists;

-- name: ListAppliedMigrations :many
SELECT version, name, checksum, applied_at
FROM schema_migrations
ORDER BY version;

-- name: RecordMigration :exec
INSERT INTO schema_migrations (version, name, checksum)
VALUES (sqlc.arg(version), sqlc.arg(name), sqlc.arg(checksum));

-- name: ExtensionInstalled :one
SELECT EXISTS (SELECT 1 FROM pg_catalog.pg_extension WHERE extname = sqlc.arg(name)::text) AS installed;
