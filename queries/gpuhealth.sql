-- GPU health (issue 33): what daemons push, what the health reconciler (internal/gpustate) reads
-- and writes, and the operators' quarantine and clear. The reconciler's kind, 'gpu.health'
-- (gpuhealth.ReconcileKind), is also written by sync_node_devices (migration 0033).

-- name: RecordGPUHealth :one
-- Stores a node's GPU health snapshot when it differs from the stored one, and then queues the
-- node for the health reconciler in the same statement. Returns whether it changed anything.
WITH up AS (
    INSERT INTO node_gpu_health (node_id, report, probe_error, reported_at)
    SELECT n.id, sqlc.arg(report)::jsonb, sqlc.arg(probe_error)::text, now() FROM nodes n WHERE n.id = sqlc.arg(node_id)
    ON CONFLICT (node_id) DO UPDATE
    SET report = excluded.report, probe_error = excluded.probe_error, reported_at = now()
    WHERE node_gpu_health.report IS DISTINCT FROM excluded.report
    RETURNING node_id
), queued AS (
    INSERT INTO reconcile_queue (kind, key)
    SELECT sqlc.arg(kind)::text, node_id::text FROM up
    ON CONFLICT (kind, key) DO UPDATE
    SET due_at = LEAST(reconcile_queue.due_at, now()), generation = reconcile_queue.generation + 1, enqueued_at = now()
    RETURNING 1
)
SELECT EXISTS (SELECT 1 FROM up)::boolean AS changed;

-- name: GPUHealthNode :one
-- The node as the health reconciler needs it, with what its daemon last pushed and what the
-- reconciler made of it last time.
SELECT n.id, n.tenant_id, n.hostname, n.state,
       COALESCE(h.report, '{}'::jsonb)::jsonb AS report, COALESCE(h.probe_error, '')::text AS probe_error,
       COALESCE(h.reasons, '[]'::jsonb)::jsonb AS reasons, COALESCE(h.quarantined, false)::boolean AS quarantined,
       h.drain_requested_at
FROM nodes n
LEFT JOIN node_gpu_health h ON h.node_id = n.id
WHERE n.id = sqlc.arg(id);

-- name: LockGPUHealthDevices :many
-- The node's GPUs, locked: the reconciler and the operators' quarantine and clear change a
-- node's GPUs one transaction at a time. With the lease that holds each now, and, for a gang,
-- what it asked to happen when a member's GPU becomes unhealthy ('' for the pool's policy).
SELECT d.id, d.uuid, d.idx, d.model, d.pci_bus_id, d.serial, d.present, d.updated_at, d.health, d.health_reasons,
       d.manual_quarantine, d.cleared_at, d.acknowledged,
       a.lease_id AS lease_id, l.tenant_id AS lease_tenant_id, l.pool_id AS lease_pool_id,
       COALESCE(l.on_unhealthy_member, '')::text AS lease_on_unhealthy
FROM devices d
LEFT JOIN allocations a ON a.device_id = d.id AND a.ended_at IS NULL
LEFT JOIN pool_leases l ON l.id = a.lease_id
WHERE d.node_id = sqlc.arg(node_id) AND d.kind = 'gpu'
ORDER BY d.idx, d.id
FOR UPDATE OF d;

-- name: GPUHealthPoolPolicies :many
-- The GPU health policy overrides (gpuhealth.Override, JSON) of the pools node_id is a member of
-- (member), and of the pools of the leases that hold its GPUs now though the node left them (not
-- member: only their lease action counts), in pool id order.
SELECT p.id, p.name, p.gpu_health_policy, pool_member(p, n)::boolean AS member
FROM nodes n
JOIN pools p ON pool_member(p, n) OR p.id IN (
    SELECT l.pool_id FROM devices d
    JOIN allocations a ON a.device_id = d.id AND a.ended_at IS NULL
    JOIN pool_leases l ON l.id = a.lease_id
    WHERE d.node_id = n.id)
WHERE n.id = sqlc.arg(node_id)
ORDER BY p.id;

-- name: SetDeviceHealth :exec
UPDATE devices
SET health = sqlc.arg(health)::text, health_reasons = sqlc.arg(reasons)::jsonb,
    health_changed_at = CASE WHEN health <> sqlc.arg(health)::text THEN now() ELSE health_changed_at END
WHERE id = sqlc.arg(id);

-- name: InsertGPUHealthChange :exec
INSERT INTO gpu_health_changes (tenant_id, device_id, from_health, to_health, reasons, principal_id)
VALUES (sqlc.arg(tenant_id), sqlc.arg(device_id), sqlc.arg(from_health)::text, sqlc.arg(to_health)::text,
        sqlc.arg(reasons)::jsonb, sqlc.narg(principal_id));

-- name: SetNodeGPUHealth :exec
-- The node-wide part of the reconciler's verdict.
INSERT INTO node_gpu_health (node_id, reasons, quarantined, drain_requested_at)
VALUES (sqlc.arg(node_id), sqlc.arg(reasons)::jsonb, sqlc.arg(quarantined)::boolean, sqlc.narg(drain_requested_at))
ON CONFLICT (node_id) DO UPDATE
SET reasons = excluded.reasons, quarantined = excluded.quarantined, drain_requested_at = excluded.drain_requested_at;

-- name: SetDeviceManualQuarantine :exec
UPDATE devices SET manual_quarantine = sqlc.arg(manual)::jsonb WHERE id = sqlc.arg(id);

-- name: ClearDevice :exec
-- An operator's clear: the manual quarantine ends, the reasons go, and the signals seen until now
-- are acknowledged.
UPDATE devices
SET manual_quarantine = NULL, health_reasons = '[]', cleared_at = now(), acknowledged = sqlc.arg(acknowledged)::jsonb
WHERE id = sqlc.arg(id);

-- name: GPUHealthResyncKeys :many
-- Nodes the health reconciler looks at again on its periodic resync: those with node-wide
-- reasons, a GPU that is not healthy, or a GPU that is missing. Healthy nodes are not: every
-- change of theirs is queued in the transaction that makes it, and a resync of every node would
-- cost writes (the queue's) for nothing.
SELECT node_id::text AS key FROM node_gpu_health WHERE quarantined OR reasons <> '[]'::jsonb
UNION
SELECT DISTINCT d.node_id::text FROM devices d WHERE d.kind = 'gpu' AND (d.health <> 'healthy' OR NOT d.present);

-- name: MarkAllocationUnhealthy :exec
-- Keeps the unhealthy span of the allocation that holds GPU device_id now, for metering
-- (migration 0034): when the GPU becomes unhealthy (unhealthy true) the span opens at at, or, when
-- the last span was not metered to its end yet, that span goes on (the two merge); when it becomes
-- healthy or degraded again, an open span closes at at.
UPDATE allocations a
SET unhealthy_since = CASE
        WHEN NOT sqlc.arg(unhealthy)::boolean THEN a.unhealthy_since
        WHEN a.unhealthy_since IS NOT NULL AND (a.unhealthy_until IS NULL OR a.unhealthy_until > a.metered_until) THEN a.unhealthy_since
        ELSE GREATEST(a.started_at, sqlc.arg(at)::timestamptz) END,
    unhealthy_until = CASE
        WHEN sqlc.arg(unhealthy)::boolean THEN NULL
        ELSE GREATEST(a.unhealthy_since, sqlc.arg(at)::timestamptz) END
WHERE a.device_id = sqlc.arg(device_id) AND a.ended_at IS NULL
  AND (sqlc.arg(unhealthy)::boolean OR (a.unhealthy_since IS NOT NULL AND a.unhealthy_until IS NULL));
