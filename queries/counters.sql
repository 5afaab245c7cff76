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

-- name: ReserveCommands :one
-- The reservations of a batch of commands/create and commands/fanOut calls of one tenant against
-- their caps of commands a minute (quota.CommandReserver), before their own transactions and in
-- one of its own (an implicit one: this is its only statement): one number per call, 0 when
-- reserved, else the commands of the minute it would have made, then the seconds until the
-- minute's oldest second leaves it (commands_reserve_all, migration 0044).
SELECT commands_reserve_all(sqlc.arg(tenant_id)::uuid, sqlc.arg(commands)::bigint[], sqlc.arg(max_commands)::bigint[])::bigint[];
