-- Workflows: rolling operations over many nodes (upgrade, reboot, drain, configure, exec), a few
-- nodes at a time. The workflow row holds what to do and how carefully; each node's progress is
-- a workflow_nodes row that the workflow controller (reconciler kind "workflow") advances from
-- what is recorded, so a controller that dies is replaced by one that goes on where it stopped.

CREATE TYPE workflow_state AS ENUM ('running', 'paused', 'succeeded', 'failed', 'cancelled');
CREATE TYPE workflow_step AS ENUM (
    'pending', 'cordon', 'drain', 'act', 'verify', 'uncordon', 'succeeded', 'failed', 'skipped');

CREATE TABLE workflows (
    id                uuid           PRIMARY KEY,
    tenant_id         uuid           NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    name              text           NOT NULL DEFAULT '' CHECK (length(name) <= 128),
    -- The action's kind and the action itself (bettercompute.workflows.v1.Action as protojson).
    action_type       text           NOT NULL CHECK (action_type IN ('upgrade', 'reboot', 'drain', 'configure', 'exec')),
    action            jsonb          NOT NULL CHECK (jsonb_typeof(action) = 'object'),
    -- The target as given (bettercompute.workflows.v1.Target as protojson).
    target            jsonb          NOT NULL CHECK (jsonb_typeof(target) = 'object'),
    -- For an upgrade, the version: a spec-made workflow is found by it.
    version           text           NOT NULL DEFAULT '' CHECK (length(version) <= 128),
    max_parallel      integer        NOT NULL CHECK (max_parallel BETWEEN 1 AND 1000),
    max_failures      integer        NOT NULL CHECK (max_failures >= 0),
    min_healthy_ms    bigint         NOT NULL CHECK (min_healthy_ms >= 0),
    drain_deadline_ms bigint         NOT NULL CHECK (drain_deadline_ms >= 0),
    step_timeout_ms   bigint         NOT NULL CHECK (step_timeout_ms > 0),
    state             workflow_state NOT NULL DEFAULT 'running',
    reason            text           NOT NULL DEFAULT '' CHECK (length(reason) <= 1024),
    -- 'api' (workflows/create) or 'spec' (made for NodeSpec daemon versions).
    origin            text           NOT NULL DEFAULT 'api' CHECK (origin IN ('api', 'spec')),
    created_by        text           NOT NULL DEFAULT '',
    created_at        timestamptz    NOT NULL DEFAULT now(),
    updated_at        timestamptz    NOT NULL DEFAULT now(),
    finished_at       timestamptz,
    CHECK ((finished_at IS NOT NULL) = (state IN ('succeeded', 'failed', 'cancelled')))
);
CREATE INDEX workflows_tenant ON workflows (tenant_id, id);
CREATE INDEX workflows_unfinished ON workflows (tenant_id, origin, version) WHERE finished_at IS NULL;

CREATE TABLE workflow_nodes (
    workflow_id   uuid          NOT NULL REFERENCES workflows (id) ON DELETE CASCADE,
    node_id       uuid          NOT NULL REFERENCES nodes (id) ON DELETE CASCADE,
    tenant_id     uuid          NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    -- The node's place in the workflow's order (then node_id: nodes added to a workflow at the
    -- same moment may share a position).
    position      integer       NOT NULL CHECK (position >= 0),
    step          workflow_step NOT NULL DEFAULT 'pending',
    -- Attempt n sends its commands with idempotency keys naming n, so each attempt sends each
    -- command once however often the controller runs.
    attempt       integer       NOT NULL DEFAULT 1 CHECK (attempt >= 1),
    -- The act step's command of this attempt, once created.
    command_id    uuid,
    -- Whether this workflow cordoned the node (it then uncordons it; a node an operator
    -- cordoned stays cordoned).
    cordoned      boolean       NOT NULL DEFAULT false,
    message       text          NOT NULL DEFAULT '' CHECK (length(message) <= 1024),
    admitted_at   timestamptz,
    step_at       timestamptz,
    -- When the act step began: the step timeout counts from it.
    act_at        timestamptz,
    -- Since when the node has been ready (and on the version) after uncordon.
    healthy_since timestamptz,
    finished_at   timestamptz,
    -- True until the workflow finished and let go of the node: a node is in at most one open
    -- workflow at a time.
    open          boolean       NOT NULL DEFAULT true,
    PRIMARY KEY (workflow_id, node_id)
);
CREATE UNIQUE INDEX workflow_nodes_open_node ON workflow_nodes (node_id) WHERE open;
CREATE INDEX workflow_nodes_command ON workflow_nodes (command_id) WHERE command_id IS NOT NULL AND open;
CREATE INDEX workflow_nodes_step ON workflow_nodes (workflow_id, step, position);
