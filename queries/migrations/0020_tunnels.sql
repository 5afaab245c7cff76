-- Tunnels: a ticket from tunnels/create, and the tunnel it opens (internal/tunnel). One row is
-- both: a ticket until opened_at is set by the upgrade that spends it (one conditional update),
-- then an open tunnel until closed_at. The ticket is stored hashed (SHA-256).

-- Ports grantees may open tunnels to on members they hold a placed lease on.
ALTER TABLE pools ADD COLUMN tunnel_ports integer[] NOT NULL DEFAULT '{}'
    CHECK (cardinality(tunnel_ports) <= 64 AND 0 < ALL (tunnel_ports) AND 65536 > ALL (tunnel_ports));

CREATE TABLE tunnels (
    id                 uuid        PRIMARY KEY,
    tenant_id          uuid        NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    node_id            uuid        NOT NULL REFERENCES nodes (id) ON DELETE CASCADE,
    port               integer     NOT NULL CHECK (port BETWEEN 1 AND 65535),
    -- For a node of another tenant: the placed lease that allows the tunnel; it closes when the
    -- lease ends.
    lease_id           uuid        REFERENCES pool_leases (id) ON DELETE SET NULL,
    principal_id       uuid,
    ticket_hash        bytea       NOT NULL UNIQUE CHECK (length(ticket_hash) = 32),
    created_at         timestamptz NOT NULL DEFAULT now(),
    expires_at         timestamptz NOT NULL,
    opened_at          timestamptz,
    -- Which API process relays it and which gateway, while open.
    api_instance       text        NOT NULL DEFAULT '',
    gateway_id         text        NOT NULL DEFAULT '',
    -- tunnels/close asks the relaying API to close it.
    close_requested_at timestamptz,
    closed_at          timestamptz,
    close_code         integer,
    close_reason       text        NOT NULL DEFAULT '' CHECK (length(close_reason) <= 200),
    bytes_to_node      bigint      NOT NULL DEFAULT 0,
    bytes_from_node    bigint      NOT NULL DEFAULT 0,
    CHECK (closed_at IS NULL OR close_code IS NOT NULL)
);
CREATE INDEX tunnels_tenant ON tunnels (tenant_id, id);
CREATE INDEX tunnels_open_node ON tunnels (node_id) WHERE opened_at IS NOT NULL AND closed_at IS NULL;
CREATE INDEX tunnels_open_tenant ON tunnels (tenant_id) WHERE opened_at IS NOT NULL AND closed_at IS NULL;
CREATE INDEX tunnels_open_api ON tunnels (api_instance) WHERE opened_at IS NOT NULL AND closed_at IS NULL;
-- For retention: tickets never used and relays whose API went away (by expiry), closed
-- tunnels (by their close).
CREATE INDEX tunnels_unclosed_expiry ON tunnels (expires_at) WHERE closed_at IS NULL;
CREATE INDEX tunnels_closed ON tunnels (closed_at) WHERE closed_at IS NOT NULL;
