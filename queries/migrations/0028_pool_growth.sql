-- What a pool can grow by: the machine a module (the provision module's autoscaler) adds to it
-- and how many more it may add. leases/create and the placer count it as capacity the pool can
-- have, so a lease larger than every current member waits for new machines instead of being
-- refused or failed. No row: the pool is its members.
CREATE TABLE pool_growth (
    pool_id      uuid        PRIMARY KEY REFERENCES pools (id) ON DELETE CASCADE,
    -- The added machine's GPU model ('' without GPUs), GPUs, CPUs and memory.
    gpu_model    text        NOT NULL DEFAULT '',
    gpus         integer     NOT NULL DEFAULT 0 CHECK (gpus >= 0),
    cpus         integer     NOT NULL DEFAULT 0 CHECK (cpus >= 0),
    memory_bytes bigint      NOT NULL DEFAULT 0 CHECK (memory_bytes >= 0),
    -- How many machines the pool may have at most.
    machines     integer     NOT NULL DEFAULT 0 CHECK (machines >= 0),
    updated_at   timestamptz NOT NULL DEFAULT now()
);
