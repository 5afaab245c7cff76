-- Two row-at-a-time triggers that the placer's batches paid for 5,000 times a statement, made
-- statement-at-a-time (docs/benchmarks.md, "One-tenant placement"). What they record is unchanged.
--
-- The lease usage counters of migration 0023, kept on updates of pool_leases at a fraction of the
-- cost. The placer marks up to 5,000 leases placed in one statement (docs/benchmarks.md, "One-tenant
-- placement"): the update trigger of 0023 called lease_usage_delta, a function in FROM that
-- PostgreSQL runs once per row (not inlined: it has OUT parameters), twice for each old and new
-- row, and took more than half of that statement's time. This one counts the same deltas with
-- the expressions written out, reading each transition table only for the rows that count:
-- a row adds to pending only in state pending, and to leases, gpus, cpus and memory only in an
-- active state (pending, placed, at_risk); a group whose deltas are all zero writes nothing, as
-- before. Order and locking are 0023's: tenant rows, then pool rows, each in key order.
-- Inserts and deletes keep pool_leases_count_usage. (A column list on the trigger, to spare the
-- updates that change no count, is not allowed with transition tables.)
CREATE FUNCTION pool_leases_count_usage_update() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO tenant_lease_usage AS u (tenant_id, added, pending)
    SELECT c.tenant_id, false, sum(c.sign)
    FROM (SELECT n.tenant_id, 1 AS sign FROM new_rows n WHERE n.state = 'pending'
          UNION ALL
          SELECT o.tenant_id, -1 FROM old_rows o WHERE o.state = 'pending') c
    GROUP BY c.tenant_id HAVING sum(c.sign) <> 0
    ORDER BY c.tenant_id
    ON CONFLICT (tenant_id, added) DO UPDATE SET pending = u.pending + excluded.pending;
    INSERT INTO pool_lease_usage AS u (tenant_id, pool_id, added, leases, gpus, cpus, memory_bytes)
    SELECT c.tenant_id, c.pool_id, false, sum(c.sign), sum(c.sign * c.gpus), sum(c.sign * c.cpus), sum(c.sign * c.memory_bytes)
    FROM (SELECT n.tenant_id, n.pool_id, 1 AS sign, n.gpus::bigint AS gpus, n.cpus::bigint AS cpus, n.memory_bytes
          FROM new_rows n WHERE n.state IN ('pending', 'placed', 'at_risk')
          UNION ALL
          SELECT o.tenant_id, o.pool_id, -1, o.gpus, o.cpus, o.memory_bytes
          FROM old_rows o WHERE o.state IN ('pending', 'placed', 'at_risk')) c
    GROUP BY c.tenant_id, c.pool_id
    HAVING (sum(c.sign), sum(c.sign * c.gpus), sum(c.sign * c.cpus), sum(c.sign * c.memory_bytes)) <> (0, 0, 0, 0)
    ORDER BY c.tenant_id, c.pool_id
    ON CONFLICT (tenant_id, pool_id, added) DO UPDATE
    SET leases = u.leases + excluded.leases, gpus = u.gpus + excluded.gpus,
        cpus = u.cpus + excluded.cpus, memory_bytes = u.memory_bytes + excluded.memory_bytes;
    RETURN NULL;
END
$$;

DROP TRIGGER pool_leases_usage_update ON pool_leases;
CREATE TRIGGER pool_leases_usage_update AFTER UPDATE ON pool_leases
    REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION pool_leases_count_usage_update();

-- Allocations on a lent GPU (migration 0040) are marked once per statement instead of once per
-- row: the placer inserts up to 5,000 allocations in one statement, and 0040's BEFORE INSERT row
-- trigger ran a query per row (30 ms of such an insert) to find the few, if any, on lent GPUs.
-- After the insert, the allocations it made on a GPU lent by another lease that has not ended
-- get lent_from, as before: at the end of the inserting statement, so the transaction's next
-- statement, and every other transaction, sees them marked.
CREATE FUNCTION allocations_mark_loans() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    UPDATE allocations a SET lent_from = l.lease_id
    FROM new_rows n
    JOIN lease_loans l ON l.device_id = n.device_id AND l.lease_id <> n.lease_id
    JOIN pool_leases h ON h.id = l.lease_id AND h.ended_at IS NULL
    WHERE a.id = n.id;
    RETURN NULL;
END
$$;

DROP TRIGGER allocations_loan ON allocations;
DROP FUNCTION allocations_mark_loan();
CREATE TRIGGER allocations_loans AFTER INSERT ON allocations
    REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION allocations_mark_loans();
