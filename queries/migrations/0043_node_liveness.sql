-- Liveness in a narrow table of its own, written when it changes rather than per heartbeat
-- (docs/scaling.md, "Liveness"). The gateway that holds a node's session vouches for it:
-- while gateway_id names a gateway, the node was heard from as recently as that gateway's own
-- heartbeat (gateways.heartbeat_at), and nothing is written per node. The gateway writes a row
-- only when it starts or stops vouching: at hello, when the session ends, when the daemon's
-- heartbeats stop arriving, and when the gateway stops. A gateway that dies stops
-- heartbeating, so every node it vouched for goes stale within the liveness threshold.
-- No index but the key, so the few updates stay HOT.
CREATE TABLE node_liveness (
    node_id      uuid        PRIMARY KEY REFERENCES nodes (id) ON DELETE CASCADE,
    -- When the node was last heard from directly: the heartbeat at which a vouch started or
    -- ended.
    last_seen_at timestamptz NOT NULL,
    -- The gateway vouching for the node; NULL when none does.
    gateway_id   text
) WITH (fillfactor = 70);

INSERT INTO node_liveness (node_id, last_seen_at)
SELECT id, last_seen_at FROM nodes WHERE last_seen_at IS NOT NULL;

-- When each node was last heard from: directly, or through the gateway vouching for it, which
-- heard from it within two heartbeat intervals of its own heartbeat.
CREATE VIEW node_seen AS
SELECT l.node_id,
       GREATEST(l.last_seen_at, g.heartbeat_at)::timestamptz AS last_seen_at,
       l.gateway_id
FROM node_liveness l
LEFT JOIN gateways g ON g.id = l.gateway_id;

-- The liveness job's way to the few offline nodes that may come back.
CREATE INDEX nodes_offline ON nodes (id) WHERE NOT online;

ALTER TABLE nodes DROP COLUMN last_seen_at;
