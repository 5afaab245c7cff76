-- Node lifecycle, NodeSpec status and inventory history.
--
-- state_generation counts a node's lifecycle state changes: it names each drain (the daemon's
-- "drain" command is created once per drain, with idempotency key "drain-<state_generation>").
-- applied_config is the config blob of the last "configure" command the node ran successfully,
-- so the NodeSpec reconciler knows whether the spec's config is in place even after the command
-- itself is gone (retention).

ALTER TABLE nodes
    ADD COLUMN state_generation bigint      NOT NULL DEFAULT 0,
    ADD COLUMN state_changed_at timestamptz,
    ADD COLUMN applied_config   jsonb       CHECK (applied_config IS NULL OR jsonb_typeof(applied_config) = 'object');

-- The liveness job's second pass: offline nodes whose heartbeats resumed.
CREATE INDEX nodes_offline_seen ON nodes (last_seen_at) WHERE NOT online;

-- What each node's daemon reported, one row per change: written by the gateway's hello only when
-- the inventory differs from the stored one.
CREATE TABLE node_inventory_history (
    id          bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    node_id     uuid        NOT NULL REFERENCES nodes (id) ON DELETE CASCADE,
    inventory   jsonb       NOT NULL CHECK (jsonb_typeof(inventory) = 'object'),
    recorded_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX node_inventory_history_node ON node_inventory_history (node_id, id);
