-- Capacity: pools of nodes, the allocatable devices of each node, pool leases (the API's
-- "leases") and their allocations, quotas, reservations and usage.
--
-- A pool belongs to a tenant and so do its leases: leases/create is for principals of the pool's
-- tenant. Quotas are keyed by (tenant, pool) all the same, so that leasing from another tenant's
-- pool can come later without a new table.
--
-- Over-commit is impossible in the database itself, not only in the placer:
--   * a GPU is held by at most one allocation at any moment (EXCLUDE on device and time range);
--   * CPUs and memory are counted per node by a trigger that refuses an allocation which does not
--     fit (SQLSTATE 23P01, like the exclusion constraint);
--   * a pool has at most one active reservation at any moment (EXCLUDE on pool and time range).

CREATE TABLE pools (
    id            uuid        PRIMARY KEY,
    tenant_id     uuid        NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    name          text        NOT NULL CHECK (name ~ '^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$'),
    description   text        NOT NULL DEFAULT '' CHECK (length(description) <= 500),
    -- Members: the tenant's nodes whose labels include every label of a non-empty selector, the
    -- nodes listed in node_ids, and the nodes whose pool (set from their join token) is the
    -- pool's name. Revoked and retired nodes are never members.
    node_selector jsonb       NOT NULL DEFAULT '{}' CHECK (jsonb_typeof(node_selector) = 'object'),
    node_ids      uuid[]      NOT NULL DEFAULT '{}' CHECK (cardinality(node_ids) <= 10000),
    created_at    timestamptz NOT NULL DEFAULT now(),
    updated_at    timestamptz NOT NULL DEFAULT now(),
    UNIQUE (tenant_id, name)
);
CREATE INDEX pools_tenant ON pools (tenant_id, id);

-- Allocatable devices of each node, kept in step with nodes.inventory (the protojson of
-- bettercompute.daemon.v1.Inventory) by the trigger below. A device that leaves the inventory is
-- kept (allocations refer to it) but is no longer present, so nothing new is placed on it.
CREATE TABLE devices (
    id           bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    node_id      uuid        NOT NULL REFERENCES nodes (id) ON DELETE CASCADE,
    kind         text        NOT NULL DEFAULT 'gpu' CHECK (kind IN ('gpu')),
    idx          integer     NOT NULL,
    model        text        NOT NULL,
    uuid         text        NOT NULL DEFAULT '',
    memory_bytes bigint      NOT NULL DEFAULT 0,
    present      boolean     NOT NULL DEFAULT true,
    updated_at   timestamptz NOT NULL DEFAULT now(),
    UNIQUE (node_id, kind, idx)
);

-- CPUs and memory of each node from its inventory, and how much of them allocations hold; and
-- how many present GPUs of each model it has ({"model": count}), so admission can size a pool
-- without reading every device.
CREATE TABLE node_resources (
    node_id      uuid    PRIMARY KEY REFERENCES nodes (id) ON DELETE CASCADE,
    cpus         integer NOT NULL DEFAULT 0,
    memory_bytes bigint  NOT NULL DEFAULT 0,
    gpus         jsonb   NOT NULL DEFAULT '{}' CHECK (jsonb_typeof(gpus) = 'object'),
    cpus_used    integer NOT NULL DEFAULT 0 CHECK (cpus_used >= 0),
    memory_used  bigint  NOT NULL DEFAULT 0 CHECK (memory_used >= 0)
);

-- sync_node_devices brings a node's devices and resources in line with its inventory. The
-- triggers below call it whenever a node's inventory is written, so the placer and admission never
-- see devices out of step with the inventory. A malformed inventory only logs a warning: it must
-- never fail the write of the inventory.
CREATE FUNCTION sync_node_devices(node uuid, inventory jsonb) RETURNS void LANGUAGE plpgsql AS $$
DECLARE
    gpus jsonb := CASE WHEN jsonb_typeof(inventory -> 'gpus') = 'array' THEN inventory -> 'gpus' ELSE '[]'::jsonb END;
BEGIN
    INSERT INTO devices (node_id, kind, idx, model, uuid, memory_bytes)
    SELECT DISTINCT ON (s.idx) node, 'gpu', s.idx, s.model, s.uuid, s.memory_bytes
    FROM (
        SELECT COALESCE((g ->> 'index')::integer, 0) AS idx, COALESCE(g ->> 'model', '') AS model,
               COALESCE(g ->> 'uuid', '') AS uuid, COALESCE((g ->> 'memoryBytes')::bigint, 0) AS memory_bytes
        FROM jsonb_array_elements(gpus) AS g
    ) s
    ORDER BY s.idx
    ON CONFLICT (node_id, kind, idx) DO UPDATE
    SET model = excluded.model, uuid = excluded.uuid, memory_bytes = excluded.memory_bytes,
        present = true, updated_at = now()
    WHERE (devices.model, devices.uuid, devices.memory_bytes, devices.present)
          IS DISTINCT FROM (excluded.model, excluded.uuid, excluded.memory_bytes, true);

    UPDATE devices d SET present = false, updated_at = now()
    WHERE d.node_id = node AND d.present
      AND d.idx NOT IN (SELECT COALESCE((g ->> 'index')::integer, 0) FROM jsonb_array_elements(gpus) AS g);

    INSERT INTO node_resources (node_id, cpus, memory_bytes, gpus)
    VALUES (node, COALESCE((inventory ->> 'cpus')::integer, 0), COALESCE((inventory ->> 'memoryBytes')::bigint, 0),
            (SELECT COALESCE(jsonb_object_agg(m.model, m.n), '{}'::jsonb)
             FROM (SELECT d.model, count(*) AS n FROM devices d WHERE d.node_id = node AND d.present GROUP BY d.model) m))
    ON CONFLICT (node_id) DO UPDATE SET cpus = excluded.cpus, memory_bytes = excluded.memory_bytes, gpus = excluded.gpus;
EXCEPTION WHEN others THEN
    RAISE WARNING 'node %: cannot read devices from inventory: %', node, SQLERRM;
END
$$;

CREATE FUNCTION nodes_sync_devices() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM sync_node_devices(NEW.id, NEW.inventory);
    RETURN NULL;
END
$$;

CREATE TRIGGER nodes_devices_insert AFTER INSERT ON nodes
    FOR EACH ROW EXECUTE FUNCTION nodes_sync_devices();
CREATE TRIGGER nodes_devices_update AFTER UPDATE OF inventory ON nodes
    FOR EACH ROW WHEN (OLD.inventory IS DISTINCT FROM NEW.inventory) EXECUTE FUNCTION nodes_sync_devices();

-- The nodes that exist already.
SELECT sync_node_devices(id, inventory) FROM nodes;

CREATE TABLE reservations (
    id           uuid        PRIMARY KEY,
    tenant_id    uuid        NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    pool_id      uuid        NOT NULL REFERENCES pools (id) ON DELETE CASCADE,
    -- The window, [start, end).
    during       tstzrange   NOT NULL CHECK (NOT isempty(during) AND NOT lower_inf(during) AND NOT upper_inf(during)),
    description  text        NOT NULL DEFAULT '' CHECK (length(description) <= 500),
    state        text        NOT NULL DEFAULT 'active' CHECK (state IN ('active', 'cancelled')),
    created_at   timestamptz NOT NULL DEFAULT now(),
    cancelled_at timestamptz,
    -- A pool is reserved at most once at any moment: double booking fails here.
    CONSTRAINT reservations_no_overlap EXCLUDE USING gist (pool_id WITH =, during WITH &&) WHERE (state = 'active')
);
CREATE INDEX reservations_tenant ON reservations (tenant_id, id);

-- Pool leases: the API's leases of capacity from a pool.
CREATE TABLE pool_leases (
    id             uuid        PRIMARY KEY,
    -- Creation order: the placer places a pool's pending leases in this order.
    seq            bigint      GENERATED ALWAYS AS IDENTITY UNIQUE,
    tenant_id      uuid        NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    pool_id        uuid        NOT NULL REFERENCES pools (id) ON DELETE CASCADE,
    principal_id   uuid,
    -- Placed only inside the reservation's window, and ending at its end at the latest.
    reservation_id uuid        REFERENCES reservations (id) ON DELETE SET NULL,
    -- The shape: GPUs of one model, or CPUs and memory on one node.
    gpus           integer     NOT NULL DEFAULT 0 CHECK (gpus >= 0),
    gpu_model      text        NOT NULL DEFAULT '',
    cpus           integer     NOT NULL DEFAULT 0 CHECK (cpus >= 0),
    memory_bytes   bigint      NOT NULL DEFAULT 0 CHECK (memory_bytes >= 0),
    -- Spread: prefer the least loaded nodes; otherwise bin packing (the fullest node that fits).
    spread         boolean     NOT NULL DEFAULT false,
    -- [{"key", "operator": "Equal|Exists", "value", "effect"}], as Kubernetes tolerations.
    tolerations    jsonb       NOT NULL DEFAULT '[]' CHECK (jsonb_typeof(tolerations) = 'array'),
    -- How long the lease runs once placed; extend adds to it.
    duration_ms    bigint      NOT NULL CHECK (duration_ms > 0),
    state          text        NOT NULL DEFAULT 'pending'
                               CHECK (state IN ('pending', 'placed', 'at_risk', 'released', 'expired', 'failed')),
    reason         text        NOT NULL DEFAULT '',
    created_at     timestamptz NOT NULL DEFAULT now(),
    placed_at      timestamptz,
    ends_at        timestamptz,
    ended_at       timestamptz,
    updated_at     timestamptz NOT NULL DEFAULT now(),
    CHECK (gpus > 0 OR cpus > 0 OR memory_bytes > 0),
    CHECK ((state IN ('placed', 'at_risk')) = (placed_at IS NOT NULL AND ends_at IS NOT NULL AND ended_at IS NULL)
           OR state IN ('released', 'expired', 'failed'))
);
CREATE INDEX pool_leases_tenant ON pool_leases (tenant_id, id);
CREATE INDEX pool_leases_pending ON pool_leases (pool_id, seq) WHERE state = 'pending';
CREATE INDEX pool_leases_running ON pool_leases (pool_id, ends_at) WHERE state IN ('placed', 'at_risk');
CREATE INDEX pool_leases_active ON pool_leases (tenant_id, pool_id) WHERE state IN ('pending', 'placed', 'at_risk');
CREATE INDEX pool_leases_reservation ON pool_leases (reservation_id) WHERE reservation_id IS NOT NULL;

-- What each lease holds: one row per GPU, or one row of CPUs and memory on a node. ended_at is
-- null while held; metered_until is how far usage records cover the allocation.
CREATE TABLE allocations (
    id            bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    lease_id      uuid        NOT NULL REFERENCES pool_leases (id) ON DELETE CASCADE,
    node_id       uuid        NOT NULL REFERENCES nodes (id) ON DELETE CASCADE,
    device_id     bigint      REFERENCES devices (id) ON DELETE CASCADE,
    model         text        NOT NULL DEFAULT '',
    cpus          integer     NOT NULL DEFAULT 0 CHECK (cpus >= 0),
    memory_bytes  bigint      NOT NULL DEFAULT 0 CHECK (memory_bytes >= 0),
    started_at    timestamptz NOT NULL,
    ended_at      timestamptz,
    metered_until timestamptz NOT NULL,
    CHECK (ended_at IS NULL OR ended_at >= started_at),
    CHECK ((device_id IS NOT NULL) = (cpus = 0 AND memory_bytes = 0)),
    -- Two leases never hold one device at the same time.
    CONSTRAINT allocations_device_once EXCLUDE USING gist (device_id WITH =, tstzrange(started_at, ended_at) WITH &&)
        WHERE (device_id IS NOT NULL)
);
CREATE INDEX allocations_lease ON allocations (lease_id);
CREATE INDEX allocations_held_device ON allocations (device_id) WHERE ended_at IS NULL;
CREATE INDEX allocations_held_node ON allocations (node_id) WHERE ended_at IS NULL;

-- CPUs and memory: an allocation that does not fit its node's free resources is refused.
CREATE FUNCTION allocations_count_resources() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'INSERT' THEN
        IF NEW.ended_at IS NULL THEN
            UPDATE node_resources
            SET cpus_used = cpus_used + NEW.cpus, memory_used = memory_used + NEW.memory_bytes
            WHERE node_id = NEW.node_id
              AND cpus_used + NEW.cpus <= cpus AND memory_used + NEW.memory_bytes <= memory_bytes;
            IF NOT FOUND THEN
                RAISE EXCEPTION 'node % has not % CPUs and % bytes of memory free', NEW.node_id, NEW.cpus, NEW.memory_bytes
                    USING ERRCODE = 'exclusion_violation', CONSTRAINT = 'allocations_node_resources';
            END IF;
        END IF;
    ELSIF OLD.ended_at IS NULL AND NEW.ended_at IS NOT NULL THEN
        UPDATE node_resources
        SET cpus_used = GREATEST(cpus_used - OLD.cpus, 0), memory_used = GREATEST(memory_used - OLD.memory_bytes, 0)
        WHERE node_id = OLD.node_id;
    END IF;
    RETURN NULL;
END
$$;
CREATE TRIGGER allocations_resources AFTER INSERT OR UPDATE OF ended_at ON allocations
    FOR EACH ROW WHEN (NEW.cpus > 0 OR NEW.memory_bytes > 0) EXECUTE FUNCTION allocations_count_resources();

-- Quotas of a tenant in a pool; a null limit is no limit. Admission refuses a lease that would
-- take the tenant's pending and running leases in the pool past a limit.
CREATE TABLE pool_quotas (
    tenant_id        uuid        NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    pool_id          uuid        NOT NULL REFERENCES pools (id) ON DELETE CASCADE,
    max_gpus         integer     CHECK (max_gpus >= 0),
    max_cpus         integer     CHECK (max_cpus >= 0),
    max_memory_bytes bigint      CHECK (max_memory_bytes >= 0),
    max_leases       integer     CHECK (max_leases >= 0),
    updated_at       timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, pool_id)
);

-- Metering: what leases used, per lease, resource and model, each record inside one UTC hour.
-- Written when allocations end and, for running ones, at every hour boundary. quantity is GPUs,
-- CPUs or MiB of memory; the usage is quantity x (period_end - period_start). No foreign keys:
-- usage outlives leases and pools.
CREATE TABLE usage_records (
    id           bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    lease_id     uuid        NOT NULL,
    tenant_id    uuid        NOT NULL,
    pool_id      uuid        NOT NULL,
    resource     text        NOT NULL CHECK (resource IN ('gpu', 'cpu', 'memory')),
    model        text        NOT NULL DEFAULT '',
    quantity     bigint      NOT NULL CHECK (quantity > 0),
    period_start timestamptz NOT NULL,
    period_end   timestamptz NOT NULL,
    aggregated   boolean     NOT NULL DEFAULT false,
    created_at   timestamptz NOT NULL DEFAULT now(),
    CHECK (period_end > period_start),
    CHECK (date_bin('1 hour', period_start, '2000-01-01 00:00:00+00') = date_bin('1 hour', period_end - interval '1 microsecond', '2000-01-01 00:00:00+00'))
);
CREATE INDEX usage_records_unaggregated ON usage_records (id) WHERE NOT aggregated;
CREATE INDEX usage_records_lease ON usage_records (lease_id);

-- Hourly totals, by the usage job: amount is quantity-seconds (GPU-seconds, CPU-seconds,
-- MiB-seconds), exact.
CREATE TABLE usage_hourly (
    tenant_id  uuid        NOT NULL,
    hour       timestamptz NOT NULL,
    pool_id    uuid        NOT NULL,
    resource   text        NOT NULL,
    model      text        NOT NULL,
    amount     numeric     NOT NULL,
    records    bigint      NOT NULL,
    updated_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, hour, pool_id, resource, model)
);
