-- Autoscaling pools (the provision module's): a pool's scaling settings, the machines each
-- scaled pool owns, and the autoscaler's decisions, recorded in the transaction that makes
-- them take effect (the machines it creates, the machine it moves to deleting), so that a
-- process that dies after deciding and a new one continuing neither provision twice nor delete
-- twice.

CREATE TABLE provision_pool_scaling (
    pool_id            uuid        PRIMARY KEY REFERENCES pools (id) ON DELETE CASCADE,
    tenant_id          uuid        NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    -- A class of the pool's tenant; checked when set, and by the autoscaler when it provisions.
    class              text        NOT NULL CHECK (class ~ '^[a-z][a-z0-9-]{0,62}$'),
    min_machines       integer     NOT NULL CHECK (min_machines >= 0),
    max_machines       integer     NOT NULL CHECK (max_machines >= 1 AND max_machines >= min_machines),
    scale_up_delay_ms  bigint      NOT NULL CHECK (scale_up_delay_ms >= 0),
    scale_down_idle_ms bigint      NOT NULL CHECK (scale_down_idle_ms > 0),
    -- The last reason scaling up could not help, so the same one is recorded once.
    blocked            text        NOT NULL DEFAULT '',
    created_at         timestamptz NOT NULL DEFAULT now(),
    updated_at         timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX provision_pool_scaling_tenant ON provision_pool_scaling (tenant_id, pool_id);

-- The pool a machine was provisioned for, and the pool's name, which its join token carries so
-- that the node it joins as is a member of the pool (nodes.pool).
ALTER TABLE provision_machines
    ADD COLUMN pool_id uuid REFERENCES pools (id) ON DELETE SET NULL,
    ADD COLUMN pool    text NOT NULL DEFAULT '';
CREATE INDEX provision_machines_pool ON provision_machines (pool_id) WHERE pool_id IS NOT NULL AND state <> 'gone';

CREATE TABLE provision_scaling_decisions (
    id          bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    pool_id     uuid        NOT NULL REFERENCES pools (id) ON DELETE CASCADE,
    action      text        NOT NULL CHECK (action IN ('scale_up', 'scale_down', 'replace_failed', 'blocked')),
    count       integer     NOT NULL DEFAULT 0,
    machine_ids uuid[]      NOT NULL DEFAULT '{}',
    reason      text        NOT NULL DEFAULT '' CHECK (length(reason) <= 1024),
    at          timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX provision_scaling_decisions_pool ON provision_scaling_decisions (pool_id, id);
