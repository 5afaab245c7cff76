-- Embedded IAM: tenants, principals, API keys and role bindings; the audit log; stored responses
-- for idempotent calls; and the outbox that API transactions write events into.

CREATE TABLE tenants (
    id           uuid        PRIMARY KEY,
    parent_id    uuid        REFERENCES tenants (id),
    name         text        NOT NULL UNIQUE CHECK (name ~ '^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$'),
    display_name text        NOT NULL DEFAULT '',
    is_root      boolean     NOT NULL DEFAULT false,
    created_at   timestamptz NOT NULL DEFAULT now(),
    CHECK (is_root = (parent_id IS NULL))
);
-- At most one root tenant.
CREATE UNIQUE INDEX tenants_root ON tenants (is_root) WHERE is_root;
CREATE INDEX tenants_parent ON tenants (parent_id, id);

CREATE TABLE principals (
    id         uuid        PRIMARY KEY,
    tenant_id  uuid        NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    kind       text        NOT NULL CHECK (kind IN ('user', 'service_account')),
    name       text        NOT NULL CHECK (length(name) BETWEEN 1 AND 128),
    email      text        NOT NULL DEFAULT '',
    created_at timestamptz NOT NULL DEFAULT now(),
    UNIQUE (tenant_id, name)
);
CREATE INDEX principals_tenant ON principals (tenant_id, id);

CREATE TABLE api_keys (
    -- The public part of the key: "bck_<id>_<secret>".
    id           text        PRIMARY KEY,
    tenant_id    uuid        NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    principal_id uuid        NOT NULL REFERENCES principals (id) ON DELETE CASCADE,
    name         text        NOT NULL DEFAULT '',
    -- SHA-256 of the secret part; the secret itself is never stored.
    secret_hash  bytea       NOT NULL,
    expires_at   timestamptz,
    last_used_at timestamptz,
    created_at   timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX api_keys_tenant ON api_keys (tenant_id, id);
CREATE INDEX api_keys_expiry ON api_keys (expires_at) WHERE expires_at IS NOT NULL;

CREATE TABLE role_bindings (
    id           uuid        PRIMARY KEY,
    tenant_id    uuid        NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    principal_id uuid        NOT NULL REFERENCES principals (id) ON DELETE CASCADE,
    role         text        NOT NULL CHECK (role IN ('owner', 'admin', 'operator', 'viewer')),
    created_at   timestamptz NOT NULL DEFAULT now(),
    UNIQUE (principal_id, role)
);
CREATE INDEX role_bindings_tenant ON role_bindings (tenant_id, id);

CREATE TABLE audit_events (
    id           bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    -- Null for calls that were not authenticated.
    tenant_id    uuid,
    principal_id uuid,
    method       text        NOT NULL,
    target       text        NOT NULL DEFAULT '',
    outcome      text        NOT NULL,
    request_id   text        NOT NULL,
    created_at   timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX audit_events_tenant ON audit_events (tenant_id, id DESC);

CREATE TABLE idempotency_keys (
    principal_id uuid        NOT NULL,
    key          text        NOT NULL,
    method       text        NOT NULL,
    request_hash bytea       NOT NULL,
    response     bytea       NOT NULL,
    created_at   timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (principal_id, key)
);
CREATE INDEX idempotency_keys_created ON idempotency_keys (created_at);

CREATE TABLE outbox (
    id         bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    tenant_id  uuid        NOT NULL,
    type       text        NOT NULL,
    -- Events of one subject are delivered in id order.
    subject    text        NOT NULL,
    payload    jsonb       NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now()
);
