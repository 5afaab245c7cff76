-- A node inserted without an inventory (every join: InsertJoinedNode leaves it '{}') gets its
-- node_resources row of zeros directly. nodes_devices_insert used to run sync_node_devices for it,
-- whose EXCEPTION block is a subtransaction and whose five statements (the devices of an inventory
-- that has none, their topology, the resources with a count of the node's devices, which a new
-- node has none of) ended in that same row: a good part of the database's work in a join (issue
-- 37, docs/benchmarks.md "Joins against bare TLS handshakes"). An inventory reported later (the
-- update trigger) and a node inserted with one still go through sync_node_devices.
CREATE OR REPLACE FUNCTION nodes_sync_devices() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'INSERT' AND NEW.inventory = '{}'::jsonb THEN
        INSERT INTO node_resources (node_id, cpus, memory_bytes, gpus) VALUES (NEW.id, 0, 0, '{}')
        ON CONFLICT (node_id) DO UPDATE SET cpus = excluded.cpus, memory_bytes = excluded.memory_bytes, gpus = excluded.gpus;
        RETURN NULL;
    END IF;
    PERFORM sync_node_devices(NEW.id, NEW.inventory);
    RETURN NULL;
END
$$;
