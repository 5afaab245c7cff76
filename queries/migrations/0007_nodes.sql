-- Nodes and how they join and connect: join tokens, nodes, gateways and the live session of
-- each node.

CREATE TABLE join_tokens (
    -- The public part of the token, "bcj_<id>_<secret>".
    id          text        PRIMARY KEY,
    tenant_id   uuid        NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    description text        NOT NULL DEFAULT '',
    -- The pool nodes joining with the token are placed in (pools come with the fleet).
    pool        text        NOT NULL DEFAULT '',
    labels      jsonb       NOT NULL DEFAULT '{}' CHECK (jsonb_typeof(labels) = 'object'),
    -- SHA-256 of the secret part.
    secret_hash bytea       NOT NULL,
    max_uses    integer     NOT NULL CHECK (max_uses >= 1),
    uses        integer     NOT NULL DEFAULT 0 CHECK (uses >= 0 AND uses <= max_uses),
    expires_at  timestamptz NOT NULL,
    revoked_at  timestamptz,
    created_at  timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX join_tokens_tenant ON join_tokens (tenant_id, id);

CREATE TABLE nodes (
    id             uuid        PRIMARY KEY,
    tenant_id      uuid        NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    hostname       text        NOT NULL DEFAULT '',
    pool           text        NOT NULL DEFAULT '',
    labels         jsonb       NOT NULL DEFAULT '{}' CHECK (jsonb_typeof(labels) = 'object'),
    join_token_id  text,
    state          text        NOT NULL DEFAULT 'joining',
    daemon_version text        NOT NULL DEFAULT '',
    inventory      jsonb       NOT NULL DEFAULT '{}',
    cert_not_after timestamptz,
    -- Written in batches by gateways from heartbeats.
    last_seen_at   timestamptz,
    revoked_at     timestamptz,
    created_at     timestamptz NOT NULL DEFAULT now(),
    updated_at     timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX nodes_tenant ON nodes (tenant_id, id);
CREATE INDEX nodes_labels ON nodes USING gin (labels);
CREATE INDEX nodes_revoked ON nodes (revoked_at) WHERE revoked_at IS NOT NULL;

ALTER TABLE commands ADD CONSTRAINT commands_node FOREIGN KEY (node_id) REFERENCES nodes (id) ON DELETE CASCADE;

CREATE TABLE gateways (
    id           text        PRIMARY KEY,
    region       text        NOT NULL,
    -- Where the internal control API listens (https, mTLS from the internal CA).
    control_url  text        NOT NULL DEFAULT '',
    started_at   timestamptz NOT NULL DEFAULT now(),
    heartbeat_at timestamptz NOT NULL DEFAULT now()
);

-- The live session of each node: the newest wins, and the gateway of an older one ends it.
CREATE TABLE node_sessions (
    node_id      uuid        PRIMARY KEY REFERENCES nodes (id) ON DELETE CASCADE,
    gateway_id   text        NOT NULL,
    session_id   text        NOT NULL,
    connected_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX node_sessions_gateway ON node_sessions (gateway_id);
