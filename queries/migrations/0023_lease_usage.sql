-- Lease usage counters: what a tenant's pending and running leases (pending, placed, at_risk)
-- hold in each pool, and how many of its leases are pending, kept by triggers on pool_leases in
-- the transaction that changes the leases. leases/create admits against them instead of counting
-- pool_leases under a lock: its insert bumps the tenant's row and then the pool's row, which
-- stay locked until it commits, so concurrent creates of one tenant queue there for a few
-- statements, each one reading counts with every earlier create's lease in them, and the work
-- under the lock no longer grows with the number of leases.
--
-- Each count is two rows, summed when read: what inserts added (added = true) and what later
-- changes took away (added = false). Only creates lock the first, so a create never waits for
-- the placer's or a release's transaction, nor they for it. The changes of the API and the
-- workers only take from the counts (a lease leaves pending, or ends), so an admission that reads
-- the second row before such a change commits sees too much in use, never too little.

CREATE TABLE tenant_lease_usage (
    tenant_id uuid    NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    added     boolean NOT NULL,
    -- Leases of the tenant in state pending, in every pool: the pendingLeases cap.
    pending   bigint  NOT NULL DEFAULT 0,
    PRIMARY KEY (tenant_id, added)
);

CREATE TABLE pool_lease_usage (
    tenant_id    uuid    NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    pool_id      uuid    NOT NULL REFERENCES pools (id) ON DELETE CASCADE,
    added        boolean NOT NULL,
    -- The tenant's leases in the pool that are pending, placed or at_risk, and what they ask for:
    -- what pool_quotas limits.
    leases       bigint  NOT NULL DEFAULT 0,
    gpus         bigint  NOT NULL DEFAULT 0,
    cpus         bigint  NOT NULL DEFAULT 0,
    memory_bytes bigint  NOT NULL DEFAULT 0,
    PRIMARY KEY (tenant_id, pool_id, added)
);
CREATE INDEX pool_lease_usage_pool ON pool_lease_usage (pool_id);

-- What a lease adds to the counters (sign 1) or takes from them (sign -1).
CREATE FUNCTION lease_usage_delta(s lease_state, g integer, c integer, m bigint, sign integer,
                                  OUT leases bigint, OUT pending bigint, OUT gpus bigint, OUT cpus bigint, OUT memory_bytes bigint)
LANGUAGE sql IMMUTABLE AS $$
    SELECT CASE WHEN a THEN $5 ELSE 0 END,
           CASE WHEN $1 = 'pending' THEN $5 ELSE 0 END,
           CASE WHEN a THEN $5 * $2 ELSE 0 END,
           CASE WHEN a THEN $5 * $3 ELSE 0 END,
           CASE WHEN a THEN $5 * $4 ELSE 0 END
    FROM (SELECT $1 IN ('pending', 'placed', 'at_risk') AS a) s
$$;

-- One statement's changes: inserts to the added rows, updates to the others, deletes (which
-- happen to active leases only with their tenant or pool) back from the added rows, updating
-- only since their tenant or pool may be going with them. Tenant rows first, then pool rows,
-- each in key order, so that writers take the counters' locks in one order.
CREATE FUNCTION pool_leases_count_usage() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'DELETE' THEN
        UPDATE tenant_lease_usage u SET pending = u.pending + c.pending
        FROM (SELECT o.tenant_id, sum(d.pending) AS pending
              FROM old_rows o, lease_usage_delta(o.state, o.gpus, o.cpus, o.memory_bytes, -1) d
              GROUP BY o.tenant_id) c
        WHERE u.tenant_id = c.tenant_id AND u.added AND c.pending <> 0;
        UPDATE pool_lease_usage u
        SET leases = u.leases + c.leases, gpus = u.gpus + c.gpus, cpus = u.cpus + c.cpus, memory_bytes = u.memory_bytes + c.memory_bytes
        FROM (SELECT o.tenant_id, o.pool_id, sum(d.leases) AS leases, sum(d.gpus) AS gpus, sum(d.cpus) AS cpus, sum(d.memory_bytes) AS memory_bytes
              FROM old_rows o, lease_usage_delta(o.state, o.gpus, o.cpus, o.memory_bytes, -1) d
              GROUP BY o.tenant_id, o.pool_id) c
        WHERE u.tenant_id = c.tenant_id AND u.pool_id = c.pool_id AND u.added AND c.leases <> 0;
        RETURN NULL;
    END IF;
    IF TG_OP = 'INSERT' THEN
        INSERT INTO tenant_lease_usage AS u (tenant_id, added, pending)
        SELECT n.tenant_id, true, sum(d.pending)
        FROM new_rows n, lease_usage_delta(n.state, n.gpus, n.cpus, n.memory_bytes, 1) d
        GROUP BY n.tenant_id HAVING sum(d.pending) <> 0
        ORDER BY n.tenant_id
        ON CONFLICT (tenant_id, added) DO UPDATE SET pending = u.pending + excluded.pending;
        INSERT INTO pool_lease_usage AS u (tenant_id, pool_id, added, leases, gpus, cpus, memory_bytes)
        SELECT n.tenant_id, n.pool_id, true, sum(d.leases), sum(d.gpus), sum(d.cpus), sum(d.memory_bytes)
        FROM new_rows n, lease_usage_delta(n.state, n.gpus, n.cpus, n.memory_bytes, 1) d
        GROUP BY n.tenant_id, n.pool_id HAVING sum(d.leases) <> 0
        ORDER BY n.tenant_id, n.pool_id
        ON CONFLICT (tenant_id, pool_id, added) DO UPDATE
        SET leases = u.leases + excluded.leases, gpus = u.gpus + excluded.gpus,
            cpus = u.cpus + excluded.cpus, memory_bytes = u.memory_bytes + excluded.memory_bytes;
        RETURN NULL;
    END IF;
    INSERT INTO tenant_lease_usage AS u (tenant_id, added, pending)
    SELECT c.tenant_id, false, sum(d.pending)
    FROM (SELECT n.tenant_id, n.state, n.gpus, n.cpus, n.memory_bytes, 1 AS sign FROM new_rows n
          UNION ALL
          SELECT o.tenant_id, o.state, o.gpus, o.cpus, o.memory_bytes, -1 FROM old_rows o) c,
         lease_usage_delta(c.state, c.gpus, c.cpus, c.memory_bytes, c.sign) d
    GROUP BY c.tenant_id HAVING sum(d.pending) <> 0
    ORDER BY c.tenant_id
    ON CONFLICT (tenant_id, added) DO UPDATE SET pending = u.pending + excluded.pending;
    INSERT INTO pool_lease_usage AS u (tenant_id, pool_id, added, leases, gpus, cpus, memory_bytes)
    SELECT c.tenant_id, c.pool_id, false, sum(d.leases), sum(d.gpus), sum(d.cpus), sum(d.memory_bytes)
    FROM (SELECT n.tenant_id, n.pool_id, n.state, n.gpus, n.cpus, n.memory_bytes, 1 AS sign FROM new_rows n
          UNION ALL
          SELECT o.tenant_id, o.pool_id, o.state, o.gpus, o.cpus, o.memory_bytes, -1 FROM old_rows o) c,
         lease_usage_delta(c.state, c.gpus, c.cpus, c.memory_bytes, c.sign) d
    GROUP BY c.tenant_id, c.pool_id
    HAVING (sum(d.leases), sum(d.gpus), sum(d.cpus), sum(d.memory_bytes)) <> (0, 0, 0, 0)
    ORDER BY c.tenant_id, c.pool_id
    ON CONFLICT (tenant_id, pool_id, added) DO UPDATE
    SET leases = u.leases + excluded.leases, gpus = u.gpus + excluded.gpus,
        cpus = u.cpus + excluded.cpus, memory_bytes = u.memory_bytes + excluded.memory_bytes;
    RETURN NULL;
END
$$;

CREATE TRIGGER pool_leases_usage_insert AFTER INSERT ON pool_leases
    REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION pool_leases_count_usage();
CREATE TRIGGER pool_leases_usage_update AFTER UPDATE ON pool_leases
    REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION pool_leases_count_usage();
CREATE TRIGGER pool_leases_usage_delete AFTER DELETE ON pool_leases
    REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION pool_leases_count_usage();

INSERT INTO tenant_lease_usage (tenant_id, added, pending)
SELECT t.id, true, count(l.id) FILTER (WHERE l.state = 'pending')
FROM tenants t LEFT JOIN pool_leases l ON l.tenant_id = t.id
GROUP BY t.id
HAVING count(l.id) > 0;

INSERT INTO pool_lease_usage (tenant_id, pool_id, added, leases, gpus, cpus, memory_bytes)
SELECT tenant_id, pool_id, true, count(*), sum(gpus), sum(cpus), sum(memory_bytes)
FROM pool_leases
WHERE state IN ('pending', 'placed', 'at_risk')
GROUP BY tenant_id, pool_id;
