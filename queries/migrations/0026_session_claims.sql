-- Every gateway asks each second for the sessions other gateways claimed in the last seconds
-- (SessionsClaimedElsewhere, queries/gateway_scale.sql). Without an index that read every session
-- row: 3 ms a call at 10,000 nodes, once a second per gateway, and growing with the fleet
-- (docs/scaling.md). Claims are rare (a session start), so the index costs little to keep.
CREATE INDEX node_sessions_connected ON node_sessions (connected_at);
