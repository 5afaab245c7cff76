-- A machine's boot ticket: the credential in the boot configuration URL its provider hands the
-- machine (bare metal), which returns the machine's join token, the gateway endpoint and the
-- root CA once (machines/bootConfig).

CREATE TABLE provision_boot_tickets (
    machine_id    uuid        PRIMARY KEY REFERENCES provision_machines (id) ON DELETE CASCADE,
    -- SHA-256 of the ticket's secret; the ticket itself is bcb_<machine id>_<secret>.
    secret_hash   bytea       NOT NULL,
    -- The ticket sealed (purpose "provision-boot-config", bound to the machine's id), so a
    -- controller that continues after a crash hands the provider the same URL.
    ticket_sealed bytea       NOT NULL,
    -- The boot configuration (join token, gateway, root CA) sealed the same way, recorded before
    -- the provider is asked for the machine and forgotten when fetched.
    config_sealed bytea,
    expires_at    timestamptz NOT NULL,
    used_at       timestamptz,
    created_at    timestamptz NOT NULL DEFAULT now()
);
