-- The schema's version bookkeeping, and the extensions later migrations rely on.
-- Migrations are forward only: each runs once, in its own transaction, under the migrator's
-- advisory lock, and its checksum is kept so an edited migration is noticed.

CREATE EXTENSION IF NOT EXISTS btree_gist;

CREATE TABLE schema_migrations (
    version    bigint      PRIMARY KEY,
    name       text        NOT NULL,
    checksum   text        NOT NULL,
    applied_at timestamptz NOT NULL DEFAULT now()
);
