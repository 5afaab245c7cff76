-- GPU utilisation per lease: what each node's daemon reports every minute
-- (bettercompute.daemon.v1.GpuUsage), rolled up by the gateway onto the leases that hold the
-- GPUs, one row per lease per node per minute (docs/gpus.md, "Utilisation per lease"). A gang's
-- members each write their own row; a minute sent again replaces its row. GPUs no lease holds
-- are not stored. Kept for retention.gpuUsage.
CREATE TABLE lease_gpu_minutes (
    lease_id           uuid             NOT NULL REFERENCES pool_leases (id) ON DELETE CASCADE,
    node_id            uuid             NOT NULL REFERENCES nodes (id) ON DELETE CASCADE,
    -- The start of the minute summarised, on a whole minute.
    minute             timestamptz      NOT NULL CHECK (date_trunc('minute', minute) = minute),
    tenant_id          uuid             NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    pool_id            uuid             NOT NULL REFERENCES pools (id) ON DELETE CASCADE,
    -- The lease's GPUs on the node the minute summarised.
    gpus               integer          NOT NULL CHECK (gpus > 0),
    -- gpus × 60.
    gpu_seconds        bigint           NOT NULL CHECK (gpu_seconds >= 0),
    -- The sum of the GPUs' active seconds (at or above daemon.GPUActiveUtilPercent).
    active_gpu_seconds bigint           NOT NULL CHECK (active_gpu_seconds >= 0),
    -- The sum of the GPUs' mean utilisation (percent), over the util_gpus that reported one:
    -- the mean is util_sum / util_gpus.
    util_sum           double precision NOT NULL DEFAULT 0,
    util_gpus          integer          NOT NULL DEFAULT 0 CHECK (util_gpus >= 0 AND util_gpus <= gpus),
    -- The greatest utilisation sampled on any of the GPUs (percent); NULL when none reported one.
    util_max           real,
    -- The most device memory in use on any of the GPUs, bytes (0 when none reported it).
    memory_peak_bytes  bigint           NOT NULL DEFAULT 0 CHECK (memory_peak_bytes >= 0),
    PRIMARY KEY (lease_id, node_id, minute)
);
-- Retention deletes by age.
CREATE INDEX lease_gpu_minutes_minute ON lease_gpu_minutes (minute);

-- A pool's idle policy (docs/gpus.md, "Idle leases"): {"minUtilization": percent, "windowMs",
-- "action": "notify" | "release", "graceMs"}; '{}' for none. idle_since: when the lease was last
-- found idle and told (lease.idle), until it is busy again.
ALTER TABLE pools
    ADD COLUMN idle_policy jsonb NOT NULL DEFAULT '{}' CHECK (jsonb_typeof(idle_policy) = 'object');
ALTER TABLE pool_leases
    ADD COLUMN idle_since timestamptz;
