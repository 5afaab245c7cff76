-- Per-tenant counters that the creates' own inserts keep (migration 0025_tenant_counters), read
-- by the caps' checks (internal/quota) instead of counting rows.

-- name: InsertJoinedNode :exec
-- CreateNode for a join, whose result the join does not need: it rides in one round trip with
-- the join's other statements. Its trigger bumps the tenant's node counter and holds it locked.
INSERT INTO nodes (id, tenant_id, hostname, pool, labels, join_token_id, cert_not_after)
VALUES (sqlc.arg(id), sqlc.arg(tenant_id), sqlc.arg(hostname), sqlc.arg(pool), sqlc.arg(labels),
        sqlc.arg(join_token_id), sqlc.arg(cert_not_after));

-- name: AdmitJoin :exec
-- The last statement of a join, after the node's insert: spends a use of the token and refuses
-- the join, by raising, when the token has none left or the tenant's nodes are over max_nodes.
SELECT join_admit(sqlc.arg(token_id)::text, sqlc.arg(tenant_id)::uuid, sqlc.arg(max_nodes)::bigint);

-- name: TenantNodeCount :one
-- The tenant's nodes that count against its cap: neither revoked nor retired.
SELECT COALESCE(sum(nodes), 0)::bigint FROM tenant_node_counts WHERE tenant_id = sqlc.arg(tenant_id);

-- name: ReserveCommands :exec
-- commands/create's reservation of its commands against max_commands a minute, before its own
-- transaction and in one of its own (an implicit one: this is its only statement): refuses, by
-- raising, when the tenant's commands of the last minute would be over it.
SELECT commands_reserve(sqlc.arg(tenant_id)::uuid, sqlc.arg(commands)::bigint, sqlc.arg(max_commands)::bigint);
