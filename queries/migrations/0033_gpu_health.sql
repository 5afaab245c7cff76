-- GPU health (issue 33): every GPU known by its UUID, its health kept per GPU, the signals its
-- daemon last pushed kept per node, and each change of health in a history kept under retention.

-- A GPU's identity is its UUID: one that comes back at another index after a reboot is the same
-- device row (its allocations and history stay with it). GPUs without a UUID (daemons before
-- issue 33 could report one without) are still matched by index.
ALTER TABLE devices DROP CONSTRAINT devices_node_id_kind_idx_key;
CREATE UNIQUE INDEX devices_node_uuid ON devices (node_id, kind, uuid) WHERE uuid <> '';
CREATE UNIQUE INDEX devices_node_idx_without_uuid ON devices (node_id, kind, idx) WHERE uuid = '';

ALTER TABLE devices
    ADD COLUMN serial            text        NOT NULL DEFAULT '',
    ADD COLUMN pci_bus_id        text        NOT NULL DEFAULT '',
    -- healthy, degraded (watched, still placed), unhealthy (quarantined: the placer skips it).
    ADD COLUMN health            text        NOT NULL DEFAULT 'healthy' CHECK (health IN ('healthy', 'degraded', 'unhealthy')),
    -- The reasons (gpuhealth.Reason, JSON): empty when healthy.
    ADD COLUMN health_reasons    jsonb       NOT NULL DEFAULT '[]' CHECK (jsonb_typeof(health_reasons) = 'array'),
    ADD COLUMN health_changed_at timestamptz,
    -- An operator's quarantine (gpuhealth.Manual, JSON), until Clear.
    ADD COLUMN manual_quarantine jsonb       CHECK (manual_quarantine IS NULL OR jsonb_typeof(manual_quarantine) = 'object'),
    -- The last Clear, and what it acknowledged (gpuhealth.Acknowledged, JSON): the signals seen
    -- then, with their counts, so that only a new occurrence counts again.
    ADD COLUMN cleared_at        timestamptz,
    ADD COLUMN acknowledged      jsonb       NOT NULL DEFAULT '[]' CHECK (jsonb_typeof(acknowledged) = 'array');

-- The GPUs the placer must skip, and the fleet-wide views by health, are found without a scan.
CREATE INDEX devices_unhealthy ON devices (node_id) WHERE health <> 'healthy';

-- What each node's daemon last pushed about its GPUs' health (bettercompute.daemon.v1.GpuHealth
-- as protojson), written only when it changed, and what the health reconciler made of the
-- node-wide part: the node's reasons and whether a signal quarantines the whole node.
CREATE TABLE node_gpu_health (
    node_id      uuid        PRIMARY KEY REFERENCES nodes (id) ON DELETE CASCADE,
    report       jsonb       NOT NULL DEFAULT '{}' CHECK (jsonb_typeof(report) = 'object'),
    probe_error  text        NOT NULL DEFAULT '',
    reported_at  timestamptz NOT NULL DEFAULT now(),
    reasons      jsonb       NOT NULL DEFAULT '[]' CHECK (jsonb_typeof(reasons) = 'array'),
    quarantined  boolean     NOT NULL DEFAULT false,
    -- Set while a node-wide effect asks for a drain the reconciler has started.
    drain_requested_at timestamptz
);
CREATE INDEX node_gpu_health_quarantined ON node_gpu_health (node_id) WHERE quarantined;

-- Each change of a GPU's health, newest last.
CREATE TABLE gpu_health_changes (
    id           bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    tenant_id    uuid        NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    device_id    bigint      NOT NULL REFERENCES devices (id) ON DELETE CASCADE,
    at           timestamptz NOT NULL DEFAULT now(),
    from_health  text        NOT NULL,
    to_health    text        NOT NULL,
    reasons      jsonb       NOT NULL DEFAULT '[]',
    -- The operator behind Quarantine or Clear; NULL for the reconciler.
    principal_id uuid
);
CREATE INDEX gpu_health_changes_device ON gpu_health_changes (device_id, id DESC);
CREATE INDEX gpu_health_changes_at ON gpu_health_changes (at);

-- The GPUs an inventory (the protojson of bettercompute.daemon.v1.Inventory) lists.
CREATE FUNCTION inventory_gpus(inventory jsonb)
RETURNS TABLE (idx integer, model text, uuid text, memory_bytes bigint, serial text, pci_bus_id text)
LANGUAGE sql IMMUTABLE AS $$
    SELECT COALESCE((g ->> 'index')::integer, 0), COALESCE(g ->> 'model', ''), COALESCE(g ->> 'uuid', ''),
           COALESCE((g ->> 'memoryBytes')::bigint, 0), COALESCE(g ->> 'serial', ''), COALESCE(g ->> 'pciBusId', '')
    FROM jsonb_array_elements(CASE WHEN jsonb_typeof(inventory -> 'gpus') = 'array' THEN inventory -> 'gpus' ELSE '[]'::jsonb END) AS g
$$;

-- sync_node_devices, now by UUID: a reported GPU with a UUID updates the row of that UUID
-- (index, model, memory, serial, PCI id), one without is matched by index, and a present GPU the
-- inventory no longer lists becomes missing (present false), which the health reconciler, enqueued
-- here, turns into the reason gpu_missing.
CREATE OR REPLACE FUNCTION sync_node_devices(node uuid, inventory jsonb) RETURNS void LANGUAGE plpgsql AS $$
DECLARE
    changed integer := 0;
    n integer;
BEGIN
    INSERT INTO devices (node_id, kind, idx, model, uuid, memory_bytes, serial, pci_bus_id)
    SELECT DISTINCT ON (s.uuid) node, 'gpu', s.idx, s.model, s.uuid, s.memory_bytes, s.serial, s.pci_bus_id
    FROM inventory_gpus(inventory) s WHERE s.uuid <> ''
    ORDER BY s.uuid, s.idx
    ON CONFLICT (node_id, kind, uuid) WHERE uuid <> '' DO UPDATE
    SET idx = excluded.idx, model = excluded.model, memory_bytes = excluded.memory_bytes, serial = excluded.serial,
        pci_bus_id = excluded.pci_bus_id, present = true, updated_at = now()
    WHERE (devices.idx, devices.model, devices.memory_bytes, devices.serial, devices.pci_bus_id, devices.present)
          IS DISTINCT FROM (excluded.idx, excluded.model, excluded.memory_bytes, excluded.serial, excluded.pci_bus_id, true);
    GET DIAGNOSTICS n = ROW_COUNT;
    changed := changed + n;

    INSERT INTO devices (node_id, kind, idx, model, uuid, memory_bytes, serial, pci_bus_id)
    SELECT DISTINCT ON (s.idx) node, 'gpu', s.idx, s.model, '', s.memory_bytes, s.serial, s.pci_bus_id
    FROM inventory_gpus(inventory) s WHERE s.uuid = ''
    ORDER BY s.idx
    ON CONFLICT (node_id, kind, idx) WHERE uuid = '' DO UPDATE
    SET model = excluded.model, memory_bytes = excluded.memory_bytes, serial = excluded.serial,
        pci_bus_id = excluded.pci_bus_id, present = true, updated_at = now()
    WHERE (devices.model, devices.memory_bytes, devices.serial, devices.pci_bus_id, devices.present)
          IS DISTINCT FROM (excluded.model, excluded.memory_bytes, excluded.serial, excluded.pci_bus_id, true);
    GET DIAGNOSTICS n = ROW_COUNT;
    changed := changed + n;

    UPDATE devices d SET present = false, updated_at = now()
    WHERE d.node_id = node AND d.present
      AND NOT EXISTS (SELECT 1 FROM inventory_gpus(inventory) s
                      WHERE CASE WHEN d.uuid <> '' THEN s.uuid = d.uuid ELSE s.uuid = '' AND s.idx = d.idx END);
    GET DIAGNOSTICS n = ROW_COUNT;
    changed := changed + n;

    INSERT INTO node_resources (node_id, cpus, memory_bytes, gpus)
    VALUES (node, COALESCE((inventory ->> 'cpus')::integer, 0), COALESCE((inventory ->> 'memoryBytes')::bigint, 0),
            (SELECT COALESCE(jsonb_object_agg(m.model, m.n), '{}'::jsonb)
             FROM (SELECT d.model, count(*) AS n FROM devices d WHERE d.node_id = node AND d.present GROUP BY d.model) m))
    ON CONFLICT (node_id) DO UPDATE SET cpus = excluded.cpus, memory_bytes = excluded.memory_bytes, gpus = excluded.gpus;

    -- A GPU came, went or moved: the health reconciler looks at the node (gpu_missing).
    IF changed > 0 THEN
        INSERT INTO reconcile_queue (kind, key) VALUES ('gpu.health', node::text)
        ON CONFLICT (kind, key) DO UPDATE
        SET due_at = LEAST(reconcile_queue.due_at, now()), generation = reconcile_queue.generation + 1, enqueued_at = now();
    END IF;
EXCEPTION WHEN others THEN
    RAISE WARNING 'node %: cannot read devices from inventory: %', node, SQLERRM;
END
$$;

-- Serials and PCI ids of the GPUs known already.
UPDATE devices d SET serial = g.serial, pci_bus_id = g.pci_bus_id
FROM nodes n CROSS JOIN LATERAL inventory_gpus(n.inventory) g
WHERE d.node_id = n.id AND d.uuid <> '' AND d.uuid = g.uuid;
