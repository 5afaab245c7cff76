-- Idle leases lent (docs/gpus.md, "Idle leases"): a pool whose idle policy's action is "lend"
-- lends an idle lease's GPUs to other tenants' leases until the holder wakes. The holder's
-- allocations on them end (it is not billed while they are lent, and allocations_device_once
-- still holds); lease_loans keeps the allocations it gets back, on the same devices, when it
-- wakes. A lease opts out of its pool's idle policy where the policy allows it.

ALTER TABLE pool_leases
    -- Created with idle_opt_out: the idle job leaves the lease alone.
    ADD COLUMN idle_opt_out boolean     NOT NULL DEFAULT false,
    -- While lent: since when; wake_requested_at once the holder asked for (or showed a need of)
    -- its GPUs back, until they are back.
    ADD COLUMN lent_since        timestamptz,
    ADD COLUMN wake_requested_at timestamptz;

-- One row per GPU a lent lease gets back: the holder's allocation that ended when it was lent.
-- Rows go when the holder gets its GPUs back or ends.
CREATE TABLE lease_loans (
    lease_id      uuid        NOT NULL REFERENCES pool_leases (id) ON DELETE CASCADE,
    allocation_id bigint      NOT NULL REFERENCES allocations (id) ON DELETE CASCADE,
    device_id     bigint      NOT NULL REFERENCES devices (id) ON DELETE CASCADE,
    node_id       uuid        NOT NULL REFERENCES nodes (id) ON DELETE CASCADE,
    since         timestamptz NOT NULL,
    PRIMARY KEY (lease_id, device_id)
);
CREATE UNIQUE INDEX lease_loans_device ON lease_loans (device_id);

-- A borrower's allocation: on a GPU lent by lent_from (set by the trigger below whenever an
-- allocation starts on a lent GPU), preempted when the holder wakes.
ALTER TABLE allocations ADD COLUMN lent_from uuid REFERENCES pool_leases (id) ON DELETE SET NULL;
CREATE INDEX allocations_lent_from ON allocations (lent_from) WHERE lent_from IS NOT NULL AND ended_at IS NULL;

CREATE FUNCTION allocations_mark_loan() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    SELECT l.lease_id INTO NEW.lent_from
    FROM lease_loans l JOIN pool_leases h ON h.id = l.lease_id AND h.ended_at IS NULL
    WHERE l.device_id = NEW.device_id AND l.lease_id <> NEW.lease_id;
    RETURN NEW;
END
$$;
CREATE TRIGGER allocations_loan BEFORE INSERT ON allocations
    FOR EACH ROW WHEN (NEW.device_id IS NOT NULL) EXECUTE FUNCTION allocations_mark_loan();

-- The placer reads a pool's waking loans on every reconcile, the idle job the lent leases
-- every minute.
CREATE INDEX pool_leases_lent ON pool_leases (pool_id) WHERE lent_since IS NOT NULL;
