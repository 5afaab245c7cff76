-- Node secrets: values a tenant stores for its nodes, which a node fetches over its mTLS session
-- (DaemonService.Secret) when its NodeSpec names them. The API never returns a value.

CREATE TABLE secrets (
    id           uuid        PRIMARY KEY,
    tenant_id    uuid        NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    -- The syntax of label keys; compared byte by byte, so list order does not depend on a locale.
    name         text        COLLATE "C" NOT NULL
                             CHECK (name ~ '^[A-Za-z0-9]([A-Za-z0-9._/-]{0,61}[A-Za-z0-9])?$'),
    -- The value, sealed under the deployment secret (purpose "node-secret") with the secret's id as
    -- associated data, so a sealed value copied to another row does not open.
    value_sealed bytea       NOT NULL,
    created_at   timestamptz NOT NULL DEFAULT now(),
    updated_at   timestamptz NOT NULL DEFAULT now(),
    UNIQUE (tenant_id, name)
);
