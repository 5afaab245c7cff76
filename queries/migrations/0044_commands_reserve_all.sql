-- Reservations of rateLimits.tenant.commandsPerMinute in batches (docs/security.md). Each API
-- process keeps at most one reservation call in flight per tenant (quota.CommandReserver):
-- the creates that arrive meanwhile wait and go together in the next call, which decides each
-- of them in the order they arrived, exactly as if each had called commands_reserve alone. The
-- tenant's creates then no longer convoy on its lock, one short transaction each: at 500 creates
-- a second a process makes a few calls a round trip instead of one per create. The lock, the
-- window and the table are migration 0025's: commands_reserve stays for a process of an older
-- release during an upgrade, and both take the same lock, so the cap stays exact between them.
--
-- Returns one number per element of ns, then the seconds (at least 1) until the oldest second
-- of the minute leaves it: 0 when the element's ns[i] commands were reserved, or, when they
-- were refused (over mosts[i], its own cap), the commands of the minute they would have made,
-- these included. Refused elements add nothing; later ones may still fit.
CREATE FUNCTION commands_reserve_all(tenant uuid, ns bigint[], mosts bigint[]) RETURNS bigint[] LANGUAGE plpgsql AS $$
DECLARE
    total  bigint;
    oldest timestamptz;
    added  bigint := 0;
    answer bigint[] := '{}';
BEGIN
    -- Only this transaction: a reservation is a rate limit's count, not acknowledged data.
    PERFORM set_config('synchronous_commit', 'off', true);
    PERFORM pg_advisory_xact_lock(hashtextextended('commandsPerMinute:' || tenant::text, 0));
    SELECT COALESCE(sum(commands), 0), min(second) INTO total, oldest
    FROM tenant_command_seconds
    WHERE tenant_id = tenant AND second > now() - interval '1 minute';
    FOR i IN 1 .. coalesce(array_length(ns, 1), 0) LOOP
        IF total + ns[i] > mosts[i] THEN
            answer := answer || (total + ns[i]);
        ELSE
            total := total + ns[i];
            added := added + ns[i];
            answer := answer || 0::bigint;
        END IF;
    END LOOP;
    IF added > 0 THEN
        INSERT INTO tenant_command_seconds AS s (tenant_id, second, commands)
        VALUES (tenant, date_trunc('second', now()), added)
        ON CONFLICT (tenant_id, second) DO UPDATE SET commands = s.commands + excluded.commands;
    END IF;
    DELETE FROM tenant_command_seconds WHERE tenant_id = tenant AND second < now() - interval '2 minutes';
    RETURN answer || greatest(1, ceil(extract(epoch FROM coalesce(oldest, now()) + interval '1 minute' - now())))::bigint;
END
$$;
