-- Per-tenant counters for two caps that were counted under a lock (internal/quota): live nodes
-- (checked at every join) and commands a minute (checked at every commands/create). Counting the
-- rows took 43 ms at 10,000 nodes and grew with the commands of the last minute, and the count
-- ran while holding the tenant's lock, so every join or create of a tenant waited for it. Now a
-- join's own insert bumps a counter in its transaction and the check reads the counter, and a
-- create of commands reserves them in a counter first.

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

-- Commands reserved through commands/create, per tenant and second, for
-- rateLimits.tenant.commandsPerMinute. A create reserves its commands before its own transaction,
-- in a short transaction of its own (commands_reserve) that takes the tenant's lock, reads the
-- minute, refuses or adds, and commits without waiting for the WAL to reach the disk: the lock
-- is held for microseconds, not for the create's durable commit, so concurrent creates of a
-- tenant no longer queue behind each other's disk flushes (at one flush of ~2 ms each, that
-- queue held a tenant at about 450 creates a second). Being exact needs only the lock: each
-- reservation reads every earlier one committed. A reservation whose create then fails still
-- counts, and a crash of the database may forget the last fraction of a second of them: a rate
-- limit can err either way by that much; what it must never do, let two creates past it together,
-- it does not.
CREATE TABLE tenant_command_seconds (
    tenant_id uuid        NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    second    timestamptz NOT NULL,
    commands  bigint      NOT NULL,
    PRIMARY KEY (tenant_id, second)
);

-- Reserves n commands for tenant in the current second, or refuses by raising check_violation
-- naming tenant_cap_commandsPerMinute, with DETAIL the commands of the minute (these n included)
-- and the seconds (at least 1) until the oldest second of them leaves the minute. It also prunes
-- the tenant's seconds that left the window a minute ago (a few rows, by the primary key).
CREATE FUNCTION commands_reserve(tenant uuid, n bigint, most bigint) RETURNS void LANGUAGE plpgsql AS $$
DECLARE
    total  bigint;
    oldest timestamptz;
BEGIN
    -- Only this transaction: a reservation is a rate limit's count, not acknowledged data.
    PERFORM set_config('synchronous_commit', 'off', true);
    PERFORM pg_advisory_xact_lock(hashtextextended('commandsPerMinute:' || tenant::text, 0));
    SELECT COALESCE(sum(commands), 0), min(second) INTO total, oldest
    FROM tenant_command_seconds
    WHERE tenant_id = tenant AND second > now() - interval '1 minute';
    IF total + n > most THEN
        RAISE EXCEPTION 'tenant % created % commands in the last minute, at most %', tenant, total + n, most
            USING ERRCODE = 'check_violation', CONSTRAINT = 'tenant_cap_commandsPerMinute',
                  DETAIL = (total + n) || ' ' || greatest(1, ceil(extract(epoch FROM coalesce(oldest, now()) + interval '1 minute' - now())))::integer;
    END IF;
    INSERT INTO tenant_command_seconds AS s (tenant_id, second, commands)
    VALUES (tenant, date_trunc('second', now()), n)
    ON CONFLICT (tenant_id, second) DO UPDATE SET commands = s.commands + excluded.commands;
    DELETE FROM tenant_command_seconds WHERE tenant_id = tenant AND second < now() - interval '2 minutes';
END
$$;

INSERT INTO tenant_command_seconds (tenant_id, second, commands)
SELECT tenant_id, date_trunc('second', created_at), count(*) FROM commands
WHERE created_at > now() - interval '1 minute'
GROUP BY tenant_id, date_trunc('second', created_at);
