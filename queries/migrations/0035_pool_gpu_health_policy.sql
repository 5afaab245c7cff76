-- A pool's override of the GPU health policy (gpuhealth.Override, JSON): rules tried before the
-- default policy's on the pool's members, and what to do with a lease of the pool whose GPU
-- becomes unhealthy ("keep", the default, or "end"). '{}' overrides nothing. (0034 is left to
-- usage, written in parallel.)
ALTER TABLE pools
    ADD COLUMN gpu_health_policy jsonb NOT NULL DEFAULT '{}' CHECK (jsonb_typeof(gpu_health_policy) = 'object');
