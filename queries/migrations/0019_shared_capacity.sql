-- Shared capacity: a pool's owner grants the pool to other tenants (pool_grants), each with a
-- nominal quota it can always lease, a borrowing limit beyond it and a fair-share weight; the
-- owner's own nominal quota is what the grants leave. Leases carry a priority and whether they
-- borrow; the placer preempts borrowing leases for tenants within their nominal quota.
--
-- Amounts of capacity (nominal, borrowing_limit) are the JSON of capacity.Resources, with the
-- field names of bettercompute.pools.v1.Resources and every amount a JSON number:
-- {"gpus": {"<model>": n}, "cpus": n, "memoryBytes": n}.

ALTER TABLE pools
    -- How long a preempted lease keeps its devices before they are freed.
    ADD COLUMN preemption_grace_ms bigint NOT NULL DEFAULT 30000 CHECK (preemption_grace_ms BETWEEN 0 AND 3600000),
    -- Whether a pending lease may preempt a lower-priority lease of its own tenant.
    ADD COLUMN priority_preemption boolean NOT NULL DEFAULT false;

CREATE TABLE pool_grants (
    id              uuid        PRIMARY KEY,
    pool_id         uuid        NOT NULL REFERENCES pools (id) ON DELETE CASCADE,
    -- The pool's tenant, kept here so that an owner's statements need not join pools.
    owner_tenant_id uuid        NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    -- The grantee.
    tenant_id       uuid        NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    nominal         jsonb       NOT NULL DEFAULT '{}' CHECK (jsonb_typeof(nominal) = 'object'),
    borrowing_limit jsonb       NOT NULL DEFAULT '{}' CHECK (jsonb_typeof(borrowing_limit) = 'object'),
    weight          integer     NOT NULL DEFAULT 1 CHECK (weight BETWEEN 1 AND 1000),
    created_at      timestamptz NOT NULL DEFAULT now(),
    updated_at      timestamptz NOT NULL DEFAULT now(),
    revoked_at      timestamptz,
    CHECK (tenant_id <> owner_tenant_id)
);
-- One active grant per pool and grantee; revoked ones stay for the record.
CREATE UNIQUE INDEX pool_grants_active ON pool_grants (pool_id, tenant_id) WHERE revoked_at IS NULL;
CREATE INDEX pool_grants_grantee ON pool_grants (tenant_id, id);
CREATE INDEX pool_grants_owner ON pool_grants (owner_tenant_id, id);

ALTER TABLE pool_leases
    ADD COLUMN priority     integer     NOT NULL DEFAULT 0 CHECK (priority BETWEEN -1000 AND 1000),
    -- Beyond its tenant's nominal quota when last placed or re-counted by the placer.
    ADD COLUMN borrowing    boolean     NOT NULL DEFAULT false,
    ADD COLUMN preempted_at timestamptz;

-- A preempted lease holds its devices until its end (the grace period after the preemption),
-- then ends like any other, staying preempted.
ALTER TABLE pool_leases DROP CONSTRAINT pool_leases_check1;
ALTER TABLE pool_leases ADD CONSTRAINT pool_leases_check1
    CHECK ((state IN ('placed', 'at_risk')) = (placed_at IS NOT NULL AND ends_at IS NOT NULL AND ended_at IS NULL)
           OR state IN ('released', 'expired', 'failed', 'preempted'));
ALTER TABLE pool_leases ADD CONSTRAINT pool_leases_preempted
    CHECK ((state = 'preempted') = (preempted_at IS NOT NULL) AND (state <> 'preempted' OR placed_at IS NOT NULL));

-- Leases that hold what they were placed on: placed, at risk, and preempted within their grace.
DROP INDEX pool_leases_running;
CREATE INDEX pool_leases_holding ON pool_leases (pool_id, ends_at) WHERE placed_at IS NOT NULL AND ended_at IS NULL;
CREATE INDEX pool_leases_preempted ON pool_leases (pool_id, preempted_at) WHERE preempted_at IS NOT NULL;

-- An owner's usage by grantee reads usage_hourly by pool.
CREATE INDEX usage_hourly_pool ON usage_hourly (pool_id, hour);
