-- nodes/list and nodes/summary filter by GPU model (queries/nodes_views.sql). Without an index a
-- page of a rare model reads the tenant's nodes in id order, parsing every inventory, until it
-- has found a page: at 10,000 nodes, p99 above half a second on a busy 2-core machine. The
-- expression is the list of the node's GPU models, a few bytes, so the index stays small and
-- cheap to maintain when heartbeats rewrite the row.
CREATE INDEX nodes_gpu_models ON nodes USING gin (jsonb_path_query_array(inventory, '$.gpus[*].model'));
