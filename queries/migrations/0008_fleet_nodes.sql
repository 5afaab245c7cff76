-- The fleet's view of a node: its life-cycle state, whether it is online, its taints, and its
-- desired state (NodeSpec) with generations, Kubernetes-style.
--
-- state: joining -> ready -> cordoned -> draining -> drained -> retired (cordoned -> ready by
-- uncordon). online is separate: a node silent past the liveness threshold goes offline without
-- changing state, and its leases are marked at risk.

ALTER TABLE nodes
    ADD CONSTRAINT nodes_state CHECK (state IN ('joining', 'ready', 'cordoned', 'draining', 'drained', 'retired')),
    ADD COLUMN online              boolean     NOT NULL DEFAULT false,
    ADD COLUMN online_changed_at   timestamptz,
    -- [{"key": "...", "value": "...", "effect": "NoSchedule"}]
    ADD COLUMN taints              jsonb       NOT NULL DEFAULT '[]' CHECK (jsonb_typeof(taints) = 'array'),
    -- The NodeSpec: labels, taints, daemon version wanted, config blob.
    ADD COLUMN spec                jsonb       NOT NULL DEFAULT '{}' CHECK (jsonb_typeof(spec) = 'object'),
    ADD COLUMN spec_generation     bigint      NOT NULL DEFAULT 1,
    ADD COLUMN observed_generation bigint      NOT NULL DEFAULT 0,
    -- [{"type": "...", "status": "True|False|Unknown", "reason": "...", "message": "...", "lastTransitionTime": "..."}]
    ADD COLUMN conditions          jsonb       NOT NULL DEFAULT '[]' CHECK (jsonb_typeof(conditions) = 'array');

-- A node is schedulable when it is ready, online and not revoked.
CREATE INDEX nodes_schedulable ON nodes (tenant_id, pool) WHERE state = 'ready' AND online AND revoked_at IS NULL;
CREATE INDEX nodes_liveness ON nodes (last_seen_at) WHERE online;
