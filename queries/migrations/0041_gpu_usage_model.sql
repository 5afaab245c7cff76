-- Efficiency and chargeback (docs/gpus.md, "Efficiency and chargeback"): usage/query and
-- usage/export put the active GPU-hours and the mean utilisation of lease_gpu_minutes beside the
-- metered GPU-hours of the same tenant, pool and GPU model, and usage/utilization reads the
-- minutes over time by tenant or pool. model: the GPU model of the lease's GPUs on the node
-- (devices.model, as the metering records have it); '' for minutes stored before it.
ALTER TABLE lease_gpu_minutes
    ADD COLUMN model text NOT NULL DEFAULT '';
UPDATE lease_gpu_minutes m
SET model = d.model
FROM allocations a
JOIN devices d ON d.id = a.device_id
WHERE a.lease_id = m.lease_id AND d.node_id = m.node_id AND d.kind = 'gpu';
-- The reads by tenant (the default scope) and by pool (the owned-pools scope) over a period.
CREATE INDEX lease_gpu_minutes_tenant_minute ON lease_gpu_minutes (tenant_id, minute);
CREATE INDEX lease_gpu_minutes_pool_minute ON lease_gpu_minutes (pool_id, minute);
