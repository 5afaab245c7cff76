-- Remediations (issue 35): repairing a GPU or node that health marked bad, one ladder of steps at
-- a time (internal/remediation), within each pool's budget.

-- state: waiting (for its turn: the pool's budget), running, succeeded (back in service),
-- service (the hardware needs people: the ticket is in the history), returned (back in service
-- by hand after service: remediations/returnFromService), cancelled, failed (the node went:
-- retired or deleted). steps: the ladder as planned ([{action, level, window}]);
-- step: the index of the step running; step_started_at and step_command_id: when it started and
-- the command it sent, if any. history: what each step did ([{step, action, outcome, detail,
-- startedAt, endedAt}]). reason_detail: an operator's words for one started by hand
-- (reason_check 'manual').
CREATE TABLE remediations (
    id              uuid        PRIMARY KEY,
    tenant_id       uuid        NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    node_id         uuid        NOT NULL REFERENCES nodes (id) ON DELETE CASCADE,
    gpu_uuid        text        NOT NULL DEFAULT '',
    gpu_serial      text        NOT NULL DEFAULT '',
    reason_check    text        NOT NULL,
    reason_code     bigint      NOT NULL DEFAULT 0,
    reason_detail   text        NOT NULL DEFAULT '',
    ladder          text        NOT NULL,
    policy_version  text        NOT NULL,
    steps           jsonb       NOT NULL CHECK (jsonb_typeof(steps) = 'array'),
    state           text        NOT NULL DEFAULT 'waiting'
                    CHECK (state IN ('waiting', 'running', 'succeeded', 'service', 'returned', 'cancelled', 'failed')),
    step            integer     NOT NULL DEFAULT 0 CHECK (step >= 0),
    step_started_at timestamptz,
    step_command_id uuid,
    history         jsonb       NOT NULL DEFAULT '[]' CHECK (jsonb_typeof(history) = 'array'),
    failure_domain  text        NOT NULL DEFAULT '',
    principal_id    uuid,
    created_at      timestamptz NOT NULL DEFAULT now(),
    updated_at      timestamptz NOT NULL DEFAULT now(),
    ended_at        timestamptz,
    CHECK ((state IN ('waiting', 'running')) = (ended_at IS NULL))
);
-- One remediation in progress per node.
CREATE UNIQUE INDEX remediations_active_node ON remediations (node_id) WHERE state IN ('waiting', 'running');
CREATE INDEX remediations_tenant ON remediations (tenant_id, id);
CREATE INDEX remediations_serial ON remediations (gpu_serial, created_at) WHERE gpu_serial <> '';

-- A pool's remediation budget: at most remediation_max_nodes of its members in remediation at
-- once, and at most one of the members sharing a value of the label remediation_domain ('' for
-- none). remediation_auto: whether a GPU or node that turns unhealthy starts one by itself.
-- remediation_override: the pool's rules and ladders on top of the default policy.
ALTER TABLE pools
    ADD COLUMN remediation_auto      boolean NOT NULL DEFAULT true,
    ADD COLUMN remediation_max_nodes integer NOT NULL DEFAULT 1 CHECK (remediation_max_nodes BETWEEN 1 AND 10000),
    ADD COLUMN remediation_domain    text    NOT NULL DEFAULT 'rack',
    -- The pool's override of the remediation policy (remediation.Override, JSON): rules tried
    -- before the default policy's, and ladders that replace the default's of the same name.
    ADD COLUMN remediation_override  jsonb   NOT NULL DEFAULT '{}' CHECK (jsonb_typeof(remediation_override) = 'object');
