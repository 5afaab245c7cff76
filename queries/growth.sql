-- name: GetPoolGrowth :one
-- What the pool can grow by; no row when it cannot.
SELECT * FROM pool_growth WHERE pool_id = sqlc.arg(pool_id);

-- name: SetPoolGrowth :exec
-- Records what the pool can grow by (the provision module, when a pool is scaled).
INSERT INTO pool_growth (pool_id, gpu_model, gpus, cpus, memory_bytes, machines)
VALUES (sqlc.arg(pool_id), sqlc.arg(gpu_model), sqlc.arg(gpus), sqlc.arg(cpus), sqlc.arg(memory_bytes), sqlc.arg(machines))
ON CONFLICT (pool_id) DO UPDATE SET gpu_model = EXCLUDED.gpu_model, gpus = EXCLUDED.gpus, cpus = EXCLUDED.cpus,
    memory_bytes = EXCLUDED.memory_bytes, machines = EXCLUDED.machines, updated_at = now();

-- name: DeletePoolGrowth :exec
DELETE FROM pool_growth WHERE pool_id = sqlc.arg(pool_id);
