-- How each node's session reaches its gateway: 'h2' (HTTP/2 over mutual TLS, direct) or
-- 'websocket' (the same TLS session inside a WebSocket, through proxies). Sessions before this
-- migration were all direct.
ALTER TABLE node_sessions
    ADD COLUMN transport text NOT NULL DEFAULT 'h2' CHECK (transport IN ('h2', 'websocket'));
