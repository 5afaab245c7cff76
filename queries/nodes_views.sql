-- Views of a large fleet (nodes/list filters, nodes/summary). The two statements share one
-- filter; keep their WHERE clauses the same so a summary's totals count exactly what the list
-- pages through. An empty filter value matches every node. The GPU model filter is written on the
-- expression that the index nodes_gpu_models (migration 0024) holds.

-- name: ListNodesFiltered :many
SELECT n.*, s.gateway_id AS session_gateway, s.connected_at AS session_connected_at, s.transport AS session_transport,
       v.last_seen_at
FROM nodes n LEFT JOIN node_sessions s ON s.node_id = n.id LEFT JOIN node_seen v ON v.node_id = n.id
WHERE n.tenant_id = sqlc.arg(tenant_id) AND n.id > sqlc.arg(after)
  AND (sqlc.narg(selector)::jsonb IS NULL OR n.labels @> sqlc.narg(selector))
  AND (cardinality(sqlc.arg(states)::text[]) = 0 OR n.state::text = ANY(sqlc.arg(states)::text[]))
  AND (sqlc.narg(online)::boolean IS NULL OR n.online = sqlc.narg(online))
  AND (sqlc.arg(gpu_model)::text = ''
       OR jsonb_path_query_array(n.inventory, '$.gpus[*].model') @> jsonb_build_array(sqlc.arg(gpu_model)::text))
  AND (sqlc.arg(pool)::text = '' OR n.pool = sqlc.arg(pool))
  AND starts_with(n.hostname, sqlc.arg(hostname_prefix)::text)
ORDER BY n.id
LIMIT sqlc.arg(lim);

-- name: SummarizeNodes :many
-- Matching nodes grouped by state, online, the models of their GPUs (in inventory order; a GPU
-- reported without a model has none) and their number of GPUs. A fleet has few such groups, so
-- one hashed pass over the nodes counts everything nodes/summary reports, without expanding
-- every GPU into a row of its own.
SELECT n.state, n.online,
       jsonb_path_query_array(n.inventory, '$.gpus[*].model') AS gpu_models,
       (CASE WHEN jsonb_typeof(n.inventory->'gpus') = 'array' THEN jsonb_array_length(n.inventory->'gpus') ELSE 0 END)::bigint AS gpus,
       count(*)::bigint AS nodes
FROM nodes n
WHERE n.tenant_id = sqlc.arg(tenant_id)
  AND (sqlc.narg(selector)::jsonb IS NULL OR n.labels @> sqlc.narg(selector))
  AND (cardinality(sqlc.arg(states)::text[]) = 0 OR n.state::text = ANY(sqlc.arg(states)::text[]))
  AND (sqlc.narg(online)::boolean IS NULL OR n.online = sqlc.narg(online))
  AND (sqlc.arg(gpu_model)::text = ''
       OR jsonb_path_query_array(n.inventory, '$.gpus[*].model') @> jsonb_build_array(sqlc.arg(gpu_model)::text))
  AND (sqlc.arg(pool)::text = '' OR n.pool = sqlc.arg(pool))
  AND starts_with(n.hostname, sqlc.arg(hostname_prefix)::text)
GROUP BY 1, 2, 3, 4;
