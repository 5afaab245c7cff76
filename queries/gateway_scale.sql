-- Set-based checks of a gateway's watch loop: they name the gateway, not every node it holds,
-- so their cost does not grow with an array of every connected node id each second.

-- name: RevokedSessionsOf :many
-- The nodes holding a session on this gateway that have been revoked (nodes_revoked keeps the
-- revoked ones few to scan).
SELECT s.node_id FROM nodes n JOIN node_sessions s ON s.node_id = n.id
WHERE n.revoked_at IS NOT NULL AND s.gateway_id = sqlc.arg(gateway_id);

-- name: SessionsClaimedElsewhere :many
-- Sessions that other gateways claimed within the last window_seconds, by the database's
-- clock: those of them whose node has a session here supersede it.
SELECT node_id, session_id FROM node_sessions
WHERE gateway_id <> sqlc.arg(gateway_id)
  AND connected_at > now() - make_interval(secs => sqlc.arg(window_seconds)::float8);

-- name: SessionsOfGateway :many
-- The session rows that name this gateway: one whose session is not the one the gateway holds
-- for the node was claimed over it.
SELECT node_id, session_id FROM node_sessions WHERE gateway_id = sqlc.arg(gateway_id);
