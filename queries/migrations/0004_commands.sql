-- Commands to nodes, and job_runs: when each background job last ran.
--
-- A command is a row the API (or a controller) writes and a gateway delivers to its node:
--
--   pending -> sent -> acked -> succeeded | failed  (sent -> succeeded | failed when the ack was lost)
--   pending | sent | acked -> expired    (the deadline passed first; the CommandSweeper)
--   pending | sent | acked -> cancelled  (commands/cancel)
--
-- The CommandSweeper also moves sent commands that were not acked in time back to pending, so
-- the gateway sends them again. workers/commands holds the same transitions in Go.

CREATE TABLE commands (
    id              uuid        PRIMARY KEY,
    tenant_id       uuid        NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    -- The node that runs the command. Nodes do not exist yet (a later issue adds them), so there
    -- is no foreign key; the migration that creates the nodes table adds it.
    node_id         uuid        NOT NULL,
    type            text        NOT NULL CHECK (length(type) BETWEEN 1 AND 128),
    payload         jsonb       NOT NULL DEFAULT '{}' CHECK (jsonb_typeof(payload) = 'object'),
    state           text        NOT NULL DEFAULT 'pending'
                                CHECK (state IN ('pending', 'sent', 'acked', 'succeeded', 'failed', 'expired', 'cancelled')),
    -- Creating a command again with the same key, for the same node, returns the first one.
    idempotency_key text        NOT NULL CHECK (length(idempotency_key) BETWEEN 1 AND 255),
    deadline        timestamptz NOT NULL,
    -- How many times the command was sent; the sweeper re-queues unacked sends.
    attempts        integer     NOT NULL DEFAULT 0,
    -- What the node reported when it finished, for succeeded and failed commands.
    result          jsonb       CHECK (result IS NULL OR jsonb_typeof(result) = 'object'),
    error           text        NOT NULL DEFAULT '',
    created_at      timestamptz NOT NULL DEFAULT now(),
    -- The last time the command was sent.
    sent_at         timestamptz,
    acked_at        timestamptz,
    -- Set exactly when the command reaches a final state.
    finished_at     timestamptz,
    updated_at      timestamptz NOT NULL DEFAULT now(),
    UNIQUE (tenant_id, node_id, idempotency_key),
    CHECK ((finished_at IS NOT NULL) = (state IN ('succeeded', 'failed', 'expired', 'cancelled')))
);
-- commands/list in a tenant (the unique index above serves the node filter).
CREATE INDEX commands_tenant ON commands (tenant_id, id);
-- Dispatch: the pending commands of the nodes a gateway serves, oldest first.
CREATE INDEX commands_pending ON commands (node_id, id) WHERE state = 'pending';
-- The sweeper: sent commands by send time, and unfinished commands by deadline (queries say
-- "finished_at IS NULL" rather than list the states, so the planner matches the partial index).
CREATE INDEX commands_sent ON commands (sent_at) WHERE state = 'sent';
CREATE INDEX commands_deadline ON commands (deadline) WHERE finished_at IS NULL;
-- Retention: finished commands by age.
CREATE INDEX commands_finished ON commands (finished_at) WHERE finished_at IS NOT NULL;

-- When each background job (a lease.Job or a loop inside one) last ran, and how it went; written
-- after every run by workers/jobrun, read by doctor.
CREATE TABLE job_runs (
    name        text        PRIMARY KEY,
    last_run_at timestamptz NOT NULL,
    -- Empty when the last run succeeded.
    last_error  text        NOT NULL DEFAULT '',
    -- The last run that succeeded; null until one has.
    last_ok_at  timestamptz
);
