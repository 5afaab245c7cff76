-- Tunnels (server/internal/tunnels): one row is a ticket from tunnels/create until the upgrade
-- that spends it sets opened_at, then an open tunnel until closed_at. API statements take the
-- caller's tenant id, but for the few the allow list of server/tenantscope_test.go names.
--
-- expires_at is the ticket's expiry while opened_at is null. Once opened it is the relaying API
-- process's lease on the tunnel, renewed by its watcher while it relays: an open tunnel whose
-- lease lapsed lost its API (a crash), counts against no cap, and is shown closed.

-- name: CreateTunnel :one
INSERT INTO tunnels (id, tenant_id, node_id, port, lease_id, principal_id, ticket_hash, expires_at)
VALUES (sqlc.arg(id), sqlc.arg(tenant_id), sqlc.arg(node_id), sqlc.arg(port), sqlc.narg(lease_id),
        sqlc.narg(principal_id), sqlc.arg(ticket_hash), now() + sqlc.arg(ttl_ms)::bigint * interval '1 millisecond')
RETURNING *;

-- name: TunnelLeasesOnNode :many
-- The tenant's placed or at-risk leases, not past their end, that hold an allocation on another tenant's node (in a
-- pool granted to it), with the ports their pools allow tunnels to: what tunnels/create allows a
-- grantee.
SELECT DISTINCT l.id AS lease_id, p.tunnel_ports, n.revoked_at, n.state
FROM allocations a
JOIN pool_leases l ON l.id = a.lease_id
JOIN pools p ON p.id = l.pool_id
JOIN nodes n ON n.id = a.node_id
WHERE a.node_id = sqlc.arg(node_id) AND a.ended_at IS NULL
  AND l.tenant_id = sqlc.arg(tenant_id) AND l.state IN ('placed', 'at_risk') AND l.ends_at > now()
  AND n.tenant_id <> sqlc.arg(tenant_id)
ORDER BY l.id;

-- name: SpendTunnelTicket :one
-- Spends a ticket of the tenant that is unused, not closed and not expired, at most once however
-- many upgrades race: it becomes an open tunnel relayed by api_instance, with a relay lease of
-- lease_ms, through the gateway holding the node's session now (if any).
UPDATE tunnels
SET opened_at = now(), api_instance = sqlc.arg(api_instance),
    expires_at = now() + sqlc.arg(lease_ms)::bigint * interval '1 millisecond',
    gateway_id = COALESCE((SELECT s.gateway_id FROM node_sessions s WHERE s.node_id = tunnels.node_id), '')
WHERE tenant_id = sqlc.arg(tenant_id) AND ticket_hash = sqlc.arg(ticket_hash)
  AND opened_at IS NULL AND closed_at IS NULL AND expires_at > now()
RETURNING *;

-- name: GetTunnelTicket :one
-- Why a ticket could not be spent: whose it is and its state, whatever its tenant (only the
-- tenant's id is read, to refuse another tenant's ticket distinctly, and none of it is returned).
SELECT tenant_id, (opened_at IS NOT NULL)::boolean AS opened, (closed_at IS NOT NULL)::boolean AS closed,
       (expires_at <= now())::boolean AS expired
FROM tunnels
WHERE ticket_hash = sqlc.arg(ticket_hash);

-- name: LockTunnelCaps :exec
-- The caps' locks of a tunnel being opened, the tenant's then the node's, held until the
-- transaction ends: openings that count against one cap run one after the other, so two cannot
-- both pass (see limits.sql).
SELECT pg_advisory_xact_lock(hashtextextended('tunnels.tenant:' || sqlc.arg(tenant_id)::uuid::text, 0)),
       pg_advisory_xact_lock(hashtextextended('tunnels.node:' || sqlc.arg(node_id)::uuid::text, 0));

-- name: CheckTunnelOpen :one
-- What opening a just-spent tunnel of the tenant depends on: whether it is still allowed (the node
-- is neither revoked nor retired; the node's spec allows the port, for a node of the tenant; the
-- lease is placed or at risk and not past its end, holds an allocation on the node and its pool allows the port, for
-- another tenant's node), the control URL of the live gateway holding the node's session (empty
-- when there is none), and the open tunnels on the node and of the tenant, this one included.
SELECT
    (n.revoked_at IS NULL AND n.state <> 'retired' AND CASE
        WHEN n.tenant_id = t.tenant_id THEN t.lease_id IS NULL AND COALESCE(n.spec -> 'tunnelPorts', '[]'::jsonb) @> to_jsonb(t.port)
        ELSE EXISTS (SELECT 1 FROM pool_leases l JOIN pools p ON p.id = l.pool_id
                     WHERE l.id = t.lease_id AND l.tenant_id = t.tenant_id AND l.state IN ('placed', 'at_risk') AND l.ends_at > now()
                       AND t.port = ANY (p.tunnel_ports)
                       AND EXISTS (SELECT 1 FROM allocations a
                                   WHERE a.lease_id = l.id AND a.node_id = n.id AND a.ended_at IS NULL))
    END)::boolean AS allowed,
    COALESCE((SELECT g.control_url FROM gateways g
              WHERE g.id = t.gateway_id AND g.control_url <> '' AND g.heartbeat_at > now() - interval '30 seconds'), '')::text AS control_url,
    (SELECT count(*) FROM tunnels o
     WHERE o.node_id = t.node_id AND o.opened_at IS NOT NULL AND o.closed_at IS NULL AND o.expires_at > now())::bigint AS open_on_node,
    (SELECT count(*) FROM tunnels o
     WHERE o.tenant_id = t.tenant_id AND o.opened_at IS NOT NULL AND o.closed_at IS NULL AND o.expires_at > now())::bigint AS open_of_tenant
FROM tunnels t
JOIN nodes n ON n.id = t.node_id
WHERE t.tenant_id = sqlc.arg(tenant_id) AND t.id = sqlc.arg(id);

-- name: RecordTunnelClosed :exec
-- How an open tunnel of the tenant ended, written by the API that relayed it.
UPDATE tunnels
SET closed_at = now(), close_code = sqlc.arg(close_code), close_reason = sqlc.arg(close_reason),
    bytes_to_node = sqlc.arg(bytes_to_node), bytes_from_node = sqlc.arg(bytes_from_node)
WHERE tenant_id = sqlc.arg(tenant_id) AND id = sqlc.arg(id);

-- name: TunnelsToEnd :many
-- The watcher's query: which of the open tunnels this API process relays (ids) must end, and
-- why. For a tunnel to another tenant's node (through a lease), lease_ended when the lease is no
-- longer placed or at risk (or gone) or its end has come (before the placer records it: the
-- tunnel must not wait for the placer's next pass), not_held when it no longer holds an
-- allocation on the node.
SELECT t.id,
       (t.close_requested_at IS NOT NULL)::boolean AS close_requested,
       (n.revoked_at IS NOT NULL OR n.state = 'retired')::boolean AS node_gone,
       (n.tenant_id <> t.tenant_id AND (l.id IS NULL OR l.state NOT IN ('placed', 'at_risk') OR l.ends_at <= now()))::boolean AS lease_ended,
       (n.tenant_id <> t.tenant_id AND NOT EXISTS (
           SELECT 1 FROM allocations a WHERE a.lease_id = t.lease_id AND a.node_id = t.node_id AND a.ended_at IS NULL))::boolean AS not_held
FROM tunnels t
JOIN nodes n ON n.id = t.node_id
LEFT JOIN pool_leases l ON l.id = t.lease_id
WHERE t.api_instance = sqlc.arg(api_instance) AND t.id = ANY (sqlc.arg(ids)::uuid[])
  AND t.opened_at IS NOT NULL AND t.closed_at IS NULL
  AND (t.close_requested_at IS NOT NULL OR n.revoked_at IS NOT NULL OR n.state = 'retired'
       OR (n.tenant_id <> t.tenant_id AND (l.id IS NULL OR l.state NOT IN ('placed', 'at_risk') OR l.ends_at <= now() OR NOT EXISTS (
           SELECT 1 FROM allocations a WHERE a.lease_id = t.lease_id AND a.node_id = t.node_id AND a.ended_at IS NULL))));

-- name: RenewTunnelRelays :exec
-- Renews this API process's relay lease on the open tunnels it relays (ids).
UPDATE tunnels
SET expires_at = now() + sqlc.arg(lease_ms)::bigint * interval '1 millisecond'
WHERE api_instance = sqlc.arg(api_instance) AND id = ANY (sqlc.arg(ids)::uuid[])
  AND opened_at IS NOT NULL AND closed_at IS NULL;

-- name: RequestTunnelClose :one
-- tunnels/close: asks the relaying API to end an open tunnel of the tenant, or closes an unused
-- ticket at once (close_code, close_reason). Nothing happens to a closed tunnel or one asked to
-- close before (no row).
UPDATE tunnels
SET close_requested_at = now(),
    closed_at = CASE WHEN opened_at IS NULL THEN now() END,
    close_code = CASE WHEN opened_at IS NULL THEN sqlc.arg(close_code)::integer END,
    close_reason = CASE WHEN opened_at IS NULL THEN sqlc.arg(close_reason)::text ELSE close_reason END
WHERE tenant_id = sqlc.arg(tenant_id) AND id = sqlc.arg(id) AND closed_at IS NULL AND close_requested_at IS NULL
RETURNING *;

-- name: GetTunnel :one
SELECT * FROM tunnels WHERE tenant_id = sqlc.arg(tenant_id) AND id = sqlc.arg(id);

-- name: ListTunnels :many
-- The tenant's tunnels, newest first (ids are UUIDv7), after the cursor: only the open ones
-- unless include_closed, which adds closed tunnels and tickets.
SELECT * FROM tunnels
WHERE tenant_id = sqlc.arg(tenant_id) AND id < sqlc.arg(before)
  AND (sqlc.narg(node_id)::uuid IS NULL OR node_id = sqlc.narg(node_id))
  AND (sqlc.arg(include_closed)::boolean
       OR (opened_at IS NOT NULL AND closed_at IS NULL AND expires_at > now()))
ORDER BY id DESC
LIMIT sqlc.arg(lim);
