-- A fleet of 10,000 nodes in the root tenant, for fleet.test.mjs: scripts/test loads it with psql
-- into a second `better-compute dev` (no simulated machines), as capacitytest.Nodes inserts
-- nodes (with their liveness) in one statement. GPU models by i % 10: 0-3 H100 (4,000 nodes, 8 GPUs each), 4-6 A100
-- (3,000, 8 each), 7-9 L4 (3,000, 1 each): 59,000 GPUs; every 50th node is cordoned.
-- Inventories are what the gateway stores: the protojson of the daemon's Inventory.
WITH n AS (
INSERT INTO nodes (id, tenant_id, hostname, pool, labels, state, online, inventory)
SELECT gen_random_uuid(), (SELECT id FROM tenants WHERE is_root), host,
       CASE WHEN model = 'H100' THEN 'train' ELSE 'infer' END,
       jsonb_build_object('rack', 'r' || (i % 40)),
       (CASE WHEN i % 50 = 0 THEN 'cordoned' ELSE 'ready' END)::node_state, true,
       jsonb_build_object('hostname', host, 'os', 'linux', 'kernel', '6.8.0', 'cpuModel', 'EPYC 9654',
         'cpus', 96, 'memoryBytes', '1099511627776',
         'gpus', (SELECT jsonb_agg(jsonb_build_object('index', g, 'model', model, 'memoryBytes', '85899345920',
                                                      'uuid', 'GPU-' || host || '-' || g))
                  FROM generate_series(0, gpus - 1) AS g))
FROM (
    SELECT i, format('fleet-%s', lpad(i::text, 5, '0')) AS host,
           CASE WHEN i % 10 < 4 THEN 'H100' WHEN i % 10 < 7 THEN 'A100' ELSE 'L4' END AS model,
           CASE WHEN i % 10 < 7 THEN 8 ELSE 1 END AS gpus
    FROM generate_series(1, 10000) AS i
) AS f
RETURNING id
)
INSERT INTO node_liveness (node_id, last_seen_at) SELECT id, now() FROM n;
ANALYZE nodes;
