-- Schema bookkeeping of modules (internal/module): each enabled module brings its own migrations,
-- applied after the core's under the same advisory lock and recorded here per module, as
-- schema_migrations records the core's. A module that is not enabled is left alone: its rows
-- stay and nothing of it is checked.

CREATE TABLE module_migrations (
    module     text        NOT NULL CHECK (module ~ '^[a-z0-9-]{1,32}$'),
    version    bigint      NOT NULL CHECK (version >= 0),
    name       text        NOT NULL CHECK (name ~ '^[a-z0-9_]+$'),
    checksum   text        NOT NULL,
    applied_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (module, version)
);
