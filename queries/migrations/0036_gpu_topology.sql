-- GPU topology inside the node (issue 34): each GPU's NUMA node and its links to the node's other
-- GPUs, from the daemon's inventory, so the placer can give a lease a well-connected set of GPUs;
-- what a lease asks for (topology preferred or required) and what each allocation got.

-- numa_node: NULL when unknown. links: how the GPU reaches each other GPU of its node, by the
-- peer's index ([{"peerIndex": 1, "path": "NV12", "nvlinks": 12}], path as `nvidia-smi topo -m`
-- names it); empty when unknown.
ALTER TABLE devices
    ADD COLUMN numa_node integer,
    ADD COLUMN links     jsonb NOT NULL DEFAULT '[]' CHECK (jsonb_typeof(links) = 'array');

-- 'preferred': the best-connected free set on the node chosen; 'required': only a set in one
-- NVLink domain (or, on a node without NVLink, behind one PCIe switch), else the lease waits.
ALTER TABLE pool_leases
    ADD COLUMN topology text NOT NULL DEFAULT 'preferred' CHECK (topology IN ('preferred', 'required'));

-- How the lease's GPUs on this allocation's node are joined: 'nvlink', 'numa', 'pcie_switch',
-- 'node', or '' (a single GPU, CPUs and memory, or a node whose topology is unknown).
ALTER TABLE allocations
    ADD COLUMN topology text NOT NULL DEFAULT '' CHECK (topology IN ('', 'nvlink', 'numa', 'pcie_switch', 'node'));

-- The topology of a GPU of an inventory (an element of the protojson of
-- bettercompute.daemon.v1.Inventory's gpus): its NUMA node and its links, reduced to what the
-- placer reads.
CREATE FUNCTION inventory_gpu_numa(g jsonb) RETURNS integer LANGUAGE sql IMMUTABLE AS $$
    SELECT CASE WHEN jsonb_typeof(g -> 'numaNode') = 'number' THEN (g ->> 'numaNode')::integer END
$$;

CREATE FUNCTION inventory_gpu_links(g jsonb) RETURNS jsonb LANGUAGE sql IMMUTABLE AS $$
    SELECT COALESCE(jsonb_agg(jsonb_build_object(
               'peerIndex', COALESCE((l ->> 'peerIndex')::integer, 0),
               'path', COALESCE(l ->> 'path', ''),
               'nvlinks', COALESCE((l ->> 'nvlinks')::integer, 0))
             ORDER BY COALESCE((l ->> 'peerIndex')::integer, 0)), '[]'::jsonb)
    FROM jsonb_array_elements(CASE WHEN jsonb_typeof(g -> 'links') = 'array' THEN g -> 'links' ELSE '[]'::jsonb END) AS l
$$;

-- The GPUs of an inventory with their topology.
CREATE FUNCTION inventory_gpu_topology(inventory jsonb)
RETURNS TABLE (idx integer, uuid text, numa_node integer, links jsonb)
LANGUAGE sql IMMUTABLE AS $$
    SELECT COALESCE((g ->> 'index')::integer, 0), COALESCE(g ->> 'uuid', ''), inventory_gpu_numa(g), inventory_gpu_links(g)
    FROM jsonb_array_elements(CASE WHEN jsonb_typeof(inventory -> 'gpus') = 'array' THEN inventory -> 'gpus' ELSE '[]'::jsonb END) AS g
$$;

-- sync_node_devices as in 0033, and each GPU's NUMA node and links kept too (written only when
-- they change, like the rest). A change of topology alone does not wake the health reconciler.
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

    -- Topology: the GPU of that UUID (or, without one, of that index), only when it changed.
    UPDATE devices d SET numa_node = t.numa_node, links = t.links, updated_at = now()
    FROM inventory_gpu_topology(inventory) t
    WHERE d.node_id = node AND d.kind = 'gpu' AND d.present
      AND CASE WHEN t.uuid <> '' THEN d.uuid = t.uuid ELSE d.uuid = '' AND d.idx = t.idx END
      AND (d.numa_node, d.links) IS DISTINCT FROM (t.numa_node, t.links);

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

-- The topology of the GPUs known already.
UPDATE devices d SET numa_node = t.numa_node, links = t.links
FROM nodes n CROSS JOIN LATERAL inventory_gpu_topology(n.inventory) t
WHERE d.node_id = n.id AND d.kind = 'gpu'
  AND CASE WHEN t.uuid <> '' THEN d.uuid = t.uuid ELSE d.uuid = '' AND d.idx = t.idx END
  AND (d.numa_node, d.links) IS DISTINCT FROM (t.numa_node, t.links);
