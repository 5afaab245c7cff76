-- Outbox delivery: a commit-safe read order for the outbox, tenants' webhooks, and the cursor of
-- every event sink.

-- The transaction that wrote each event. Identity ids are handed out at insert but become visible
-- at commit, in another order, so a reader that remembers "delivered up to id N" can pass over a
-- row with a smaller id whose transaction commits later. Sinks instead read only rows with
-- tx_id < pg_snapshot_xmin(pg_current_snapshot()), that is of transactions that have all
-- finished, in (tx_id, id) order: no row can appear later below that horizon.
ALTER TABLE outbox ADD COLUMN tx_id xid8 NOT NULL DEFAULT pg_current_xact_id();

-- The reads of sinks: every tenant (the log sink), and one tenant (a webhook).
CREATE INDEX outbox_dispatch ON outbox (tx_id, id);
CREATE INDEX outbox_tenant_dispatch ON outbox (tenant_id, tx_id, id);
-- events/list: a tenant's events, newest first.
CREATE INDEX outbox_tenant ON outbox (tenant_id, id);

CREATE TABLE webhooks (
    id            uuid        PRIMARY KEY,
    tenant_id     uuid        NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    url           text        NOT NULL CHECK (length(url) BETWEEN 1 AND 2048),
    description   text        NOT NULL DEFAULT '' CHECK (length(description) <= 500),
    -- Only events of these types are delivered; empty means every type.
    event_types   text[]      NOT NULL DEFAULT '{}',
    -- The signing secret ("whsec_…"), sealed under the deployment secret with the webhook id as
    -- associated data.
    secret_sealed bytea       NOT NULL,
    created_at    timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX webhooks_tenant ON webhooks (tenant_id, id);

-- How far each sink has delivered: every event at or before (tx_id, outbox_id) in the sinks' read
-- order. Written only by the holder of the sink's lease, under its fencing token.
CREATE TABLE sink_cursors (
    sink          text        PRIMARY KEY,
    -- Set for a webhook's sink, so deleting the webhook deletes its cursor.
    webhook_id    uuid        UNIQUE REFERENCES webhooks (id) ON DELETE CASCADE,
    tx_id         xid8        NOT NULL,
    outbox_id     bigint      NOT NULL,
    -- The last failed delivery, cleared by the next successful one.
    last_error    text        NOT NULL DEFAULT '',
    last_error_at timestamptz,
    updated_at    timestamptz NOT NULL DEFAULT now()
);
