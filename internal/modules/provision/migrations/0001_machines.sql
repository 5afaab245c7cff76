-- The provision module's machines: classes (a provider kind, its parameters, its sealed
-- credentials), machines (where each is in its lifecycle, at its provider and in the fleet) and
-- each machine's steps, recorded as it enters them.

CREATE TABLE provision_classes (
    tenant_id   uuid        NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    name        text        NOT NULL CHECK (name ~ '^[a-z][a-z0-9-]{0,62}$'),
    provider    text        NOT NULL,
    params      jsonb       NOT NULL DEFAULT '{}' CHECK (jsonb_typeof(params) = 'object'),
    -- The credentials sealed under the deployment secret (purpose "provision-credentials",
    -- bound to the tenant and the class's name); NULL when the class has none.
    credentials bytea,
    created_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, name)
);

CREATE TABLE provision_machines (
    id                uuid        PRIMARY KEY,
    tenant_id         uuid        NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    class             text        NOT NULL,
    name              text        NOT NULL CHECK (name ~ '^[a-z][a-z0-9-]{0,62}$'),
    state             text        NOT NULL DEFAULT 'requested' CHECK (state IN (
        'requested', 'provisioning', 'booting', 'joined', 'ready',
        'deleting', 'draining', 'destroying', 'gone', 'failed')),
    reason            text        NOT NULL DEFAULT '' CHECK (length(reason) <= 1024),
    provider_id       text        NOT NULL DEFAULT '',
    node_id           uuid        REFERENCES nodes (id) ON DELETE SET NULL,
    -- The single-use join token minted for the machine alone, and the token itself sealed
    -- (purpose "provision-join-token", bound to the machine's id) until the machine joined,
    -- so a controller that continues after a crash hands the provider the same token.
    join_token_id     text,
    join_token_sealed bytea,
    created_at        timestamptz NOT NULL DEFAULT now(),
    updated_at        timestamptz NOT NULL DEFAULT now(),
    state_changed_at  timestamptz NOT NULL DEFAULT now(),
    FOREIGN KEY (tenant_id, class) REFERENCES provision_classes (tenant_id, name)
);
CREATE INDEX provision_machines_tenant ON provision_machines (tenant_id, id);
CREATE INDEX provision_machines_live ON provision_machines (id) WHERE state NOT IN ('gone', 'failed');
-- A name is the tenant's until its machine is gone.
CREATE UNIQUE INDEX provision_machines_name ON provision_machines (tenant_id, name) WHERE state <> 'gone';

CREATE TABLE provision_machine_steps (
    machine_id uuid        NOT NULL REFERENCES provision_machines (id) ON DELETE CASCADE,
    seq        bigint      GENERATED ALWAYS AS IDENTITY,
    state      text        NOT NULL,
    detail     text        NOT NULL DEFAULT '' CHECK (length(detail) <= 1024),
    at         timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (machine_id, seq)
);

-- The controller finds the node a machine's token joined: an index on the core's column, for
-- the tokens that have one.
CREATE INDEX provision_nodes_join_token ON nodes (tenant_id, join_token_id) WHERE join_token_id IS NOT NULL;
