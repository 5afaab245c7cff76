-- Fan-outs (issue 37): one command to any number of nodes, admitted once (commands/fanOut). The
-- fan-out row holds what is common to its commands and the bound on how many of them may be
-- in flight (sent or acked) at once; each node's command is an ordinary row of commands that
-- names its fan-out. Gateways claim a fan-out's commands only through ClaimFanOutCommands,
-- which holds the fan-out's row for the claim so that the bound holds across gateways.
CREATE TABLE fan_outs (
    id              uuid        PRIMARY KEY,
    tenant_id       uuid        NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    type            text        NOT NULL,
    -- The selector as the caller gave it (commands/fanOut's FanOutSelector, protojson).
    selector        jsonb       NOT NULL DEFAULT '{}',
    idempotency_key text        NOT NULL,
    max_in_flight   integer     NOT NULL CHECK (max_in_flight > 0),
    -- The commands created, one per node reached.
    total           integer     NOT NULL CHECK (total >= 0),
    -- Every command of the fan-out has this deadline, so none is claimable after it.
    deadline        timestamptz NOT NULL,
    created_at      timestamptz NOT NULL DEFAULT now(),
    UNIQUE (tenant_id, idempotency_key)
);
CREATE INDEX fan_outs_tenant ON fan_outs (tenant_id, id);
CREATE INDEX fan_outs_deadline ON fan_outs (deadline);

ALTER TABLE commands ADD COLUMN fan_out_id uuid REFERENCES fan_outs (id) ON DELETE CASCADE;
-- commands/list and commands/getFanOut by fan-out.
CREATE INDEX commands_fan_out ON commands (fan_out_id, id) WHERE fan_out_id IS NOT NULL;
-- The gateways' claim: a fan-out's pending commands, and its commands in flight.
CREATE INDEX commands_fan_out_pending ON commands (fan_out_id, node_id) WHERE state = 'pending' AND fan_out_id IS NOT NULL;
CREATE INDEX commands_fan_out_in_flight ON commands (fan_out_id) WHERE state IN ('sent', 'acked') AND fan_out_id IS NOT NULL;

-- A UUIDv7 (time-ordered, as the Go code makes command ids) from the database's clock, for the
-- commands a fan-out inserts in one statement. PostgreSQL 18's uuidv7() does the same.
CREATE FUNCTION bc_uuidv7() RETURNS uuid LANGUAGE sql VOLATILE AS $$
    SELECT encode(set_bit(set_bit(overlay(uuid_send(gen_random_uuid()) PLACING
        substring(int8send(floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint) FROM 3)
        FROM 1 FOR 6), 52, 1), 53, 1), 'hex')::uuid
$$;
