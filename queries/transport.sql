-- name: SessionTransports :many
-- How the nodes' sessions reach their gateways (node_sessions.transport), for doctor: every
-- gateway holding sessions, with its sessions direct (h2) and over WebSocket.
SELECT gateway_id,
       (count(*) FILTER (WHERE transport = 'h2'))::bigint AS h2,
       (count(*) FILTER (WHERE transport = 'websocket'))::bigint AS websocket
FROM node_sessions
GROUP BY gateway_id
ORDER BY gateway_id;
