-- Per-tenant counters for two caps that were counted under a lock (internal/quota): live nodes
-- (checked at every join) and commands a minute (checked at every commands/create). Counting the
-- rows took 43 ms at 10,000 nodes and grew with the commands of the last minute, and the count
-- ran while holding the tenant's lock, so every join or create of a tenant waited for it. Now the
-- row's own insert bumps a counter in its transaction and the check reads the counter.

-- Nodes that count against rateLimits.tenant.nodes: neither revoked nor retired. As the lease
-- usage counters (0023_lease_usage), two rows summed when read: what joins added (added = true),
-- which a join's insert bumps and holds locked until it commits, so concurrent joins of a tenant
-- queue there for the rest of their transaction (join_admit, then COMMIT) and each reads a total
-- with every earlier join in it; and what revokes and retirements took away (added = false),
-- which never waits for a join nor a join for it. A check that reads the second row before a
-- concurrent revoke commits sees too many nodes, never too few.
CREATE TABLE tenant_node_counts (
    tenant_id uuid    NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    added     boolean NOT NULL,
    nodes     bigint  NOT NULL DEFAULT 0,
    PRIMARY KEY (tenant_id, added)
);

-- Row triggers: the update trigger names its columns and fires only when a node starts or stops
-- counting, so the heartbeats' constant UPDATE nodes SET last_seen_at fire nothing. A delete
-- (a node's, or its tenant's cascade) takes from the added row by an update only: the tenant and
-- its counters may be going in the same statement.
CREATE FUNCTION nodes_count() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'INSERT' THEN
        INSERT INTO tenant_node_counts AS c (tenant_id, added, nodes) VALUES (NEW.tenant_id, true, 1)
        ON CONFLICT (tenant_id, added) DO UPDATE SET nodes = c.nodes + 1;
    ELSIF TG_OP = 'DELETE' THEN
        UPDATE tenant_node_counts SET nodes = nodes - 1 WHERE tenant_id = OLD.tenant_id AND added;
    ELSIF NEW.revoked_at IS NULL AND NEW.state <> 'retired' THEN
        -- Counting again (no API call does it: retired and revoked are final) adds, as a join.
        INSERT INTO tenant_node_counts AS c (tenant_id, added, nodes) VALUES (NEW.tenant_id, true, 1)
        ON CONFLICT (tenant_id, added) DO UPDATE SET nodes = c.nodes + 1;
    ELSE
        INSERT INTO tenant_node_counts AS c (tenant_id, added, nodes) VALUES (NEW.tenant_id, false, -1)
        ON CONFLICT (tenant_id, added) DO UPDATE SET nodes = c.nodes - 1;
    END IF;
    RETURN NULL;
END
$$;

CREATE TRIGGER nodes_count_insert AFTER INSERT ON nodes FOR EACH ROW
    WHEN (NEW.revoked_at IS NULL AND NEW.state <> 'retired') EXECUTE FUNCTION nodes_count();
CREATE TRIGGER nodes_count_update AFTER UPDATE OF revoked_at, state ON nodes FOR EACH ROW
    WHEN ((OLD.revoked_at IS NULL AND OLD.state <> 'retired') IS DISTINCT FROM (NEW.revoked_at IS NULL AND NEW.state <> 'retired'))
    EXECUTE FUNCTION nodes_count();
CREATE TRIGGER nodes_count_delete AFTER DELETE ON nodes FOR EACH ROW
    WHEN (OLD.revoked_at IS NULL AND OLD.state <> 'retired') EXECUTE FUNCTION nodes_count();

INSERT INTO tenant_node_counts (tenant_id, added, nodes)
SELECT tenant_id, true, count(*) FROM nodes
WHERE revoked_at IS NULL AND state <> 'retired'
GROUP BY tenant_id;

-- The last statement of a join (queries/counters.sql, AdmitJoin), after the node's insert: spends
-- one use of the token and reads the tenant's nodes, the new one included. It raises instead of
-- returning, so that the join's BEGIN, statements and COMMIT go to the server together and a
-- refusal aborts the transaction before COMMIT: check_violation naming join_token_usable when the
-- token has no use left (or was revoked or expired meanwhile), or tenant_cap_nodes with the
-- tenant's nodes in DETAIL when they are over most.
CREATE FUNCTION join_admit(token text, tenant uuid, most bigint) RETURNS void LANGUAGE plpgsql AS $$
DECLARE
    n bigint;
BEGIN
    UPDATE join_tokens SET uses = uses + 1
    WHERE id = token AND uses < max_uses AND revoked_at IS NULL AND expires_at > now();
    IF NOT FOUND THEN
        RAISE EXCEPTION 'join token % has been used up, revoked or expired', token
            USING ERRCODE = 'check_violation', CONSTRAINT = 'join_token_usable';
    END IF;
    SELECT COALESCE(sum(nodes), 0) INTO n FROM tenant_node_counts WHERE tenant_id = tenant;
    IF n > most THEN
        RAISE EXCEPTION 'tenant % has % nodes, at most %', tenant, n, most
            USING ERRCODE = 'check_violation', CONSTRAINT = 'tenant_cap_nodes', DETAIL = n::text;
    END IF;
END
$$;

-- Commands created, per tenant and second, for rateLimits.tenant.commandsPerMinute: every insert
-- into commands counts (commands/create, the workers' command.Create, node life cycle), an
-- idempotent replay (ON CONFLICT DO UPDATE) does not. A row per server process (backend) too, so
-- that concurrent transactions never bump, and wait on, the same row: the check's exactness
-- comes from the tenant's advisory lock, which commands_admit takes after the create's inserts,
-- right before it reads the window, and which is held to COMMIT. The window is a minute of
-- these rows, at most 60 for each connection that created commands in it.
CREATE TABLE tenant_command_seconds (
    tenant_id uuid        NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    second    timestamptz NOT NULL,
    backend   integer     NOT NULL,
    commands  bigint      NOT NULL,
    PRIMARY KEY (tenant_id, second, backend)
);

-- A statement's commands bump its backend's row of the transaction's second. The first bump of
-- a row also prunes the tenant's rows that left the window two minutes ago: at most 100, skipping
-- rows another transaction holds, so the prune is bounded and never waits.
CREATE FUNCTION commands_count_second() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    WITH bumped AS (
        INSERT INTO tenant_command_seconds AS s (tenant_id, second, backend, commands)
        SELECT n.tenant_id, date_trunc('second', now()), pg_backend_pid(), count(*)
        FROM new_rows n GROUP BY n.tenant_id ORDER BY n.tenant_id
        ON CONFLICT (tenant_id, second, backend) DO UPDATE SET commands = s.commands + excluded.commands
        RETURNING s.tenant_id, s.xmax = 0 AS fresh
    )
    DELETE FROM tenant_command_seconds o
    WHERE (o.tenant_id, o.second, o.backend) IN (
        SELECT x.tenant_id, x.second, x.backend FROM tenant_command_seconds x
        WHERE x.tenant_id IN (SELECT b.tenant_id FROM bumped b WHERE b.fresh)
          AND x.second < now() - interval '2 minutes'
        LIMIT 100 FOR UPDATE SKIP LOCKED);
    RETURN NULL;
END
$$;

CREATE TRIGGER commands_count_second AFTER INSERT ON commands
    REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION commands_count_second();

INSERT INTO tenant_command_seconds (tenant_id, second, backend, commands)
SELECT tenant_id, date_trunc('second', created_at), 0, count(*) FROM commands
WHERE created_at > now() - interval '1 minute'
GROUP BY tenant_id, date_trunc('second', created_at);

-- The check of commands/create (queries/counters.sql, AdmitCommands), sent after its inserts with
-- its last statements and COMMIT: takes the tenant's lock of the cap (the key of quota.Check's
-- LockTenantLimit), then reads the minute's counts in a statement of its own, whose snapshot
-- has every create that held the lock before committed. Concurrent creates of a tenant so queue
-- for this read and their COMMIT only; two of them, in one second or not, can never both pass.
-- Over most, it raises check_violation naming tenant_cap_commandsPerMinute, with DETAIL the
-- commands of the minute (the create's own included) and the seconds (at least 1) until the
-- oldest second of them leaves the minute.
CREATE FUNCTION commands_admit(tenant uuid, most bigint) RETURNS void LANGUAGE plpgsql AS $$
DECLARE
    n      bigint;
    oldest timestamptz;
BEGIN
    PERFORM pg_advisory_xact_lock(hashtextextended('commandsPerMinute:' || tenant::text, 0));
    SELECT COALESCE(sum(commands), 0), min(second) INTO n, oldest
    FROM tenant_command_seconds
    WHERE tenant_id = tenant AND second > now() - interval '1 minute';
    IF n > most THEN
        RAISE EXCEPTION 'tenant % created % commands in the last minute, at most %', tenant, n, most
            USING ERRCODE = 'check_violation', CONSTRAINT = 'tenant_cap_commandsPerMinute',
                  DETAIL = n || ' ' || greatest(1, ceil(extract(epoch FROM coalesce(oldest, now()) + interval '1 minute' - now())))::integer;
    END IF;
END
$$;
