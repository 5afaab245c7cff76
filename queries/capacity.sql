-- Pool leases (the API's "leases"), their allocations of devices and node resources, and the
-- statements of the capacity placer. Named pool_lease/allocation so as not to be confused with
-- the workers' locks (locks.sql). API statements take the caller's tenant id; the placer's take
-- a pool id. Statements that depend on the time take it as an argument (now), so that the placer
-- and the tests can run on an injected clock.

-- name: CreatePoolLease :one
INSERT INTO pool_leases (id, tenant_id, pool_id, principal_id, reservation_id, gpus, gpu_model, cpus,
                         memory_bytes, spread, tolerations, duration_ms, priority, topology,
                         nodes, gpus_per_node, gang_level, gang_level_required, on_unhealthy_member, idle_opt_out)
VALUES (sqlc.arg(id), sqlc.arg(tenant_id), sqlc.arg(pool_id), sqlc.narg(principal_id), sqlc.narg(reservation_id),
        sqlc.arg(gpus), sqlc.arg(gpu_model), sqlc.arg(cpus), sqlc.arg(memory_bytes), sqlc.arg(spread),
        sqlc.arg(tolerations), sqlc.arg(duration_ms), sqlc.arg(priority), sqlc.arg(topology),
        sqlc.arg(nodes), sqlc.arg(gpus_per_node), sqlc.arg(gang_level), sqlc.arg(gang_level_required),
        sqlc.arg(on_unhealthy_member), sqlc.arg(idle_opt_out))
RETURNING *;

-- name: CreateOwnPoolLease :one
-- CreatePoolLease into a pool of the lease's own tenant, with the pool's lookup folded in (one
-- round trip instead of two): no row, and nothing inserted, when the tenant has no such pool.
INSERT INTO pool_leases (id, tenant_id, pool_id, principal_id, reservation_id, gpus, gpu_model, cpus,
                         memory_bytes, spread, tolerations, duration_ms, priority, topology,
                         nodes, gpus_per_node, gang_level, gang_level_required, on_unhealthy_member, idle_opt_out)
SELECT sqlc.arg(id)::uuid, sqlc.arg(tenant_id)::uuid, sqlc.arg(pool_id)::uuid, sqlc.narg(principal_id)::uuid, sqlc.narg(reservation_id)::uuid,
       sqlc.arg(gpus)::integer, sqlc.arg(gpu_model)::text, sqlc.arg(cpus)::integer, sqlc.arg(memory_bytes)::bigint,
       sqlc.arg(spread)::boolean, sqlc.arg(tolerations)::jsonb, sqlc.arg(duration_ms)::bigint,
       sqlc.arg(priority)::integer, sqlc.arg(topology)::text, sqlc.arg(nodes)::integer,
       sqlc.arg(gpus_per_node)::integer, sqlc.arg(gang_level)::text, sqlc.arg(gang_level_required)::boolean,
       sqlc.arg(on_unhealthy_member)::text, sqlc.arg(idle_opt_out)::boolean
FROM pools p
WHERE p.tenant_id = sqlc.arg(tenant_id) AND p.id = sqlc.arg(pool_id)
RETURNING *;

-- name: ActivePoolLeaseTotals :one
-- What the tenant's pending and running leases in a pool ask for, against its quota.
SELECT count(*)::bigint AS leases,
       COALESCE(sum(gpus), 0)::bigint AS gpus,
       COALESCE(sum(cpus), 0)::bigint AS cpus,
       COALESCE(sum(memory_bytes), 0)::bigint AS memory_bytes
FROM pool_leases
WHERE tenant_id = sqlc.arg(tenant_id) AND pool_id = sqlc.arg(pool_id) AND state IN ('pending', 'placed', 'at_risk');

-- name: GetPoolLease :one
SELECT * FROM pool_leases WHERE tenant_id = sqlc.arg(tenant_id) AND id = sqlc.arg(id);

-- name: LockPoolLease :one
SELECT * FROM pool_leases WHERE tenant_id = sqlc.arg(tenant_id) AND id = sqlc.arg(id) FOR UPDATE;

-- name: ListPoolLeases :many
SELECT * FROM pool_leases
WHERE tenant_id = sqlc.arg(tenant_id) AND id > sqlc.arg(after)
  AND (sqlc.narg(pool_id)::uuid IS NULL OR pool_id = sqlc.narg(pool_id))
  AND (sqlc.narg(state)::lease_state IS NULL OR state = sqlc.narg(state))
ORDER BY id
LIMIT sqlc.arg(lim);

-- name: PoolLeaseAllocations :many
-- What the leases hold or held, with the devices' and nodes' names.
SELECT a.lease_id, a.node_id, n.hostname, a.device_id, COALESCE(d.idx, -1)::integer AS device_index,
       COALESCE(d.uuid, '')::text AS device_uuid, a.model, a.cpus, a.memory_bytes, a.started_at, a.ended_at, a.topology,
       a.rank
FROM allocations a
JOIN nodes n ON n.id = a.node_id
LEFT JOIN devices d ON d.id = a.device_id
WHERE a.lease_id = ANY(sqlc.arg(lease_ids)::uuid[])
ORDER BY a.lease_id, a.node_id, COALESCE(d.idx, -1);

-- name: ExtendPoolLease :one
-- Adds to the duration of a lease that has not ended; a placed lease's end moves with it.
UPDATE pool_leases
SET duration_ms = duration_ms + sqlc.arg(by_ms)::bigint,
    ends_at = ends_at + sqlc.arg(by_ms)::bigint * interval '1 millisecond',
    updated_at = now()
WHERE tenant_id = sqlc.arg(tenant_id) AND id = sqlc.arg(id) AND state IN ('pending', 'placed', 'at_risk')
RETURNING *;

-- name: ReservationsAgainstLease :many
-- Active reservations, other than the lease's own, of any pool that contains a node the lease
-- holds, whose window overlaps [starts_at, ends_at): an extension must not run into them.
SELECT DISTINCT r.id, r.pool_id, lower(r.during)::timestamptz AS starts_at, upper(r.during)::timestamptz AS ends_at
FROM allocations a
JOIN nodes n ON n.id = a.node_id
JOIN pools p ON pool_selects(p, n)
JOIN reservations r ON r.pool_id = p.id AND r.state = 'active'
WHERE a.lease_id = sqlc.arg(lease_id) AND a.ended_at IS NULL
  AND r.during && tstzrange(sqlc.arg(starts_at)::timestamptz, sqlc.arg(ends_at)::timestamptz)
  AND r.id IS DISTINCT FROM sqlc.narg(own_reservation_id)::uuid
ORDER BY starts_at;

-- name: EndPoolLeases :many
-- Ends leases that have not ended, as state (released, expired or failed): a placed lease ends at
-- its end or now, whichever comes first, a pending one now (now is the database's clock when
-- null). A preempted lease within its grace period ends the same way but stays preempted, with
-- its reason. Each row says the state the lease left and the nodes it held until now.
-- EndAllocations then frees what they held.
WITH old AS (
    SELECT id, state FROM pool_leases
    WHERE id = ANY(sqlc.arg(ids)::uuid[])
      AND (state IN ('pending', 'placed', 'at_risk') OR (state = 'preempted' AND ended_at IS NULL))
    FOR UPDATE
)
UPDATE pool_leases l
SET state = CASE WHEN l.state = 'preempted' THEN l.state ELSE sqlc.arg(state)::lease_state END,
    reason = CASE WHEN l.state = 'preempted' THEN l.reason ELSE sqlc.arg(reason)::text END,
    ended_at = CASE WHEN l.placed_at IS NULL THEN COALESCE(sqlc.narg(now)::timestamptz, now())
                    ELSE GREATEST(l.placed_at, LEAST(l.ends_at, COALESCE(sqlc.narg(now)::timestamptz, now()))) END,
    updated_at = now()
FROM old
WHERE l.id = old.id
RETURNING l.id, l.tenant_id, l.pool_id, l.state, old.state AS previous_state, l.placed_at, l.ended_at,
          ARRAY(SELECT DISTINCT a.node_id FROM allocations a
                WHERE a.lease_id = l.id AND a.ended_at IS NULL ORDER BY a.node_id)::uuid[] AS node_ids;

-- name: EndAllocations :exec
-- Ends the held allocations of leases that ended, at the lease's end, and meters them: one usage
-- record per lease, resource, model and UTC hour, from where metering stopped to the end, with
-- the GPU-seconds of it held on an unhealthy GPU (migration 0034).
WITH held AS (
    SELECT a.id, a.metered_until AS from_ts
    FROM allocations a
    WHERE a.lease_id = ANY(sqlc.arg(lease_ids)::uuid[]) AND a.ended_at IS NULL
    FOR UPDATE
), ended AS (
    UPDATE allocations a
    SET ended_at = GREATEST(a.started_at, l.ended_at), metered_until = GREATEST(a.started_at, l.ended_at)
    FROM held, pool_leases l
    WHERE a.id = held.id AND l.id = a.lease_id AND l.ended_at IS NOT NULL
    RETURNING a.lease_id, l.tenant_id, l.pool_id, a.device_id, a.model, a.cpus, a.memory_bytes,
              held.from_ts, a.ended_at AS to_ts, a.unhealthy_since, a.unhealthy_until
)
INSERT INTO usage_records (lease_id, tenant_id, pool_id, resource, model, quantity, period_start, period_end, unhealthy_amount)
SELECT e.lease_id, e.tenant_id, e.pool_id, q.resource, q.model, sum(q.quantity)::bigint,
       GREATEST(e.from_ts, h.h), LEAST(e.to_ts, h.h + interval '1 hour'),
       sum(CASE WHEN q.resource = 'gpu' THEN allocation_unhealthy_seconds(GREATEST(e.from_ts, h.h), LEAST(e.to_ts, h.h + interval '1 hour'), e.unhealthy_since, e.unhealthy_until) ELSE 0 END)
FROM ended e
CROSS JOIN LATERAL (VALUES
    ('gpu'::text, e.model, CASE WHEN e.device_id IS NULL THEN 0 ELSE 1 END::bigint),
    ('cpu'::text, ''::text, e.cpus::bigint),
    ('memory'::text, ''::text, ((e.memory_bytes + 1048575) / 1048576)::bigint)
) AS q (resource, model, quantity)
CROSS JOIN LATERAL generate_series(date_bin('1 hour', e.from_ts, '2000-01-01 00:00:00+00'),
                                   e.to_ts - interval '1 microsecond', interval '1 hour') AS h (h)
WHERE q.quantity > 0 AND e.to_ts > e.from_ts
GROUP BY e.lease_id, e.tenant_id, e.pool_id, q.resource, q.model, GREATEST(e.from_ts, h.h), LEAST(e.to_ts, h.h + interval '1 hour');

-- name: MeterHeldAllocations :execrows
-- Meters allocations still held, at most lim of them, up to through (an hour boundary) or their
-- lease's end if that comes first (the placer may not have expired the lease yet): one usage
-- record per lease, resource, model and UTC hour, with the GPU-seconds of it held on an unhealthy
-- GPU (migration 0034). Returns how many allocations it metered.
WITH held AS (
    SELECT a.id, a.metered_until AS from_ts, LEAST(sqlc.arg(through)::timestamptz, l.ends_at) AS to_ts
    FROM allocations a
    JOIN pool_leases l ON l.id = a.lease_id
    WHERE a.ended_at IS NULL AND a.metered_until < LEAST(sqlc.arg(through)::timestamptz, l.ends_at)
    ORDER BY a.id
    LIMIT sqlc.arg(lim)
    FOR UPDATE OF a SKIP LOCKED
), metered AS (
    UPDATE allocations a
    SET metered_until = held.to_ts
    FROM held, pool_leases l
    WHERE a.id = held.id AND l.id = a.lease_id
    RETURNING a.lease_id, l.tenant_id, l.pool_id, a.device_id, a.model, a.cpus, a.memory_bytes,
              held.from_ts, held.to_ts, a.unhealthy_since, a.unhealthy_until
), recorded AS (
    INSERT INTO usage_records (lease_id, tenant_id, pool_id, resource, model, quantity, period_start, period_end, unhealthy_amount)
    SELECT e.lease_id, e.tenant_id, e.pool_id, q.resource, q.model, sum(q.quantity)::bigint,
           GREATEST(e.from_ts, h.h), LEAST(e.to_ts, h.h + interval '1 hour'),
           sum(CASE WHEN q.resource = 'gpu' THEN allocation_unhealthy_seconds(GREATEST(e.from_ts, h.h), LEAST(e.to_ts, h.h + interval '1 hour'), e.unhealthy_since, e.unhealthy_until) ELSE 0 END)
    FROM metered e
    CROSS JOIN LATERAL (VALUES
        ('gpu'::text, e.model, CASE WHEN e.device_id IS NULL THEN 0 ELSE 1 END::bigint),
        ('cpu'::text, ''::text, e.cpus::bigint),
        ('memory'::text, ''::text, ((e.memory_bytes + 1048575) / 1048576)::bigint)
    ) AS q (resource, model, quantity)
    CROSS JOIN LATERAL generate_series(date_bin('1 hour', e.from_ts, '2000-01-01 00:00:00+00'),
                                       e.to_ts - interval '1 microsecond', interval '1 hour') AS h (h)
    WHERE q.quantity > 0 AND e.to_ts > e.from_ts
    GROUP BY e.lease_id, e.tenant_id, e.pool_id, q.resource, q.model, GREATEST(e.from_ts, h.h), LEAST(e.to_ts, h.h + interval '1 hour')
    RETURNING 1
)
SELECT 1 FROM metered;

-- name: PlacerPool :one
SELECT id, tenant_id, name, preemption_grace_ms, priority_preemption, topology_levels, gang_reservation_wait_ms
FROM pools WHERE id = sqlc.arg(id);

-- name: PlacerGrants :many
-- The pool's active grants: each grantee's nominal quota, borrowing limit and weight.
SELECT tenant_id, nominal, borrowing_limit, weight
FROM pool_grants
WHERE pool_id = sqlc.arg(pool_id) AND revoked_at IS NULL
ORDER BY tenant_id;

-- name: PlacerHoldingLeases :many
-- The pool's leases that hold what they were placed on (placed, at risk, or preempted within
-- their grace period), with their shape: what the placer counts against nominal quotas and may
-- preempt.
SELECT id, tenant_id, seq, priority, gpus, gpu_model, cpus, memory_bytes, borrowing, state, ends_at
FROM pool_leases
WHERE pool_id = sqlc.arg(pool_id) AND placed_at IS NOT NULL AND ended_at IS NULL
ORDER BY seq;

-- name: PlacerHoldingAllocations :many
-- What the pool's holding leases hold: devices, or CPUs and memory, by node.
SELECT a.lease_id, a.node_id, COALESCE(a.device_id, 0)::bigint AS device_id, a.model, a.cpus, a.memory_bytes
FROM pool_leases l
JOIN allocations a ON a.lease_id = l.id AND a.ended_at IS NULL
WHERE l.pool_id = sqlc.arg(pool_id) AND l.placed_at IS NOT NULL AND l.ended_at IS NULL;

-- name: PreemptPoolLeases :many
-- placed or at_risk -> preempted: the leases keep what they hold until grace_ms from now (or
-- their own end, if sooner), when the placer ends them; with no grace period they end now, and
-- EndAllocations must then free what they held in the same transaction.
UPDATE pool_leases
SET state = 'preempted', preempted_at = sqlc.arg(now)::timestamptz, reason = sqlc.arg(reason)::text,
    ends_at = LEAST(ends_at, sqlc.arg(now)::timestamptz + sqlc.arg(grace_ms)::bigint * interval '1 millisecond'),
    ended_at = CASE WHEN sqlc.arg(grace_ms)::bigint = 0 THEN GREATEST(placed_at, LEAST(ends_at, sqlc.arg(now)::timestamptz)) END,
    updated_at = now()
WHERE id = ANY(sqlc.arg(ids)::uuid[]) AND state IN ('placed', 'at_risk')
RETURNING id, tenant_id, pool_id, state, ends_at, ended_at, priority, borrowing;

-- name: SetPoolLeasesBorrowing :exec
-- Records whether running leases borrow, as the placer last counted them.
UPDATE pool_leases
SET borrowing = sqlc.arg(borrowing)::boolean, updated_at = now()
WHERE id = ANY(sqlc.arg(ids)::uuid[]) AND borrowing <> sqlc.arg(borrowing)::boolean AND ended_at IS NULL;

-- name: PlacerNow :one
-- The database's clock when this statement starts: as the first statement of the placer's
-- snapshot it is no earlier than the end of any allocation the snapshot sees ended.
SELECT clock_timestamp()::timestamptz AS now;

-- name: PlacerNodes :many
-- The pool's members as the placer sees them, with their CPUs and memory. A node a GPU health
-- signal quarantines carries one more taint, quarantine_taint with effect NoSchedule.
SELECT n.id, n.state, n.online, n.hostname, n.labels,
       (CASE WHEN h.quarantined
             THEN n.taints || jsonb_build_array(jsonb_build_object('key', sqlc.arg(quarantine_taint)::text, 'value', '', 'effect', 'NoSchedule'))
             ELSE n.taints END)::jsonb AS taints,
       COALESCE(r.cpus, 0)::integer AS cpus, COALESCE(r.cpus_used, 0)::integer AS cpus_used,
       COALESCE(r.memory_bytes, 0)::bigint AS memory_bytes, COALESCE(r.memory_used, 0)::bigint AS memory_used
FROM pools p
JOIN nodes n ON pool_member(p, n)
LEFT JOIN node_resources r ON r.node_id = n.id
LEFT JOIN node_gpu_health h ON h.node_id = n.id
WHERE p.id = sqlc.arg(pool_id)
ORDER BY n.id;

-- name: PlacerDevices :many
-- The present devices of the pool's members that are not unhealthy (quarantined GPUs are never
-- allocated), and whether an allocation holds each, with their NUMA node and links (migration 0036).
-- A GPU lent by an idle lease (migration 0040) is free to borrow until the lease wakes; then it
-- is held for the lease until the lease has it back. The GPUs of waking loans are few: read once
-- (a hashed subplan), not probed for each of the pool's devices.
SELECT d.id, d.node_id, d.idx, d.model, d.numa_node, d.links,
       (EXISTS (SELECT 1 FROM allocations a WHERE a.device_id = d.id AND a.ended_at IS NULL)
        OR d.id IN (SELECT ll.device_id FROM lease_loans ll JOIN pool_leases h ON h.id = ll.lease_id
                    WHERE h.wake_requested_at IS NOT NULL AND h.ended_at IS NULL))::boolean AS held
FROM pools p
JOIN nodes n ON pool_member(p, n)
JOIN devices d ON d.node_id = n.id AND d.present AND d.health <> 'unhealthy'
WHERE p.id = sqlc.arg(pool_id)
ORDER BY d.node_id, d.idx;

-- name: PlacerNodeReservations :many
-- Active reservations not over by now, of any pool of the tenant, with the nodes among node_ids
-- that they cover (a node may be a member of several pools).
SELECT r.id, r.pool_id, lower(r.during)::timestamptz AS starts_at, upper(r.during)::timestamptz AS ends_at, n.id AS node_id
FROM reservations r
JOIN pools p ON p.id = r.pool_id
JOIN nodes n ON pool_member(p, n)
WHERE r.tenant_id = sqlc.arg(tenant_id) AND r.state = 'active' AND upper(r.during) > sqlc.arg(now)::timestamptz
  AND n.id = ANY(sqlc.arg(node_ids)::uuid[]);

-- name: PlacerPoolReservations :many
-- The pool's own active reservations not over by now.
SELECT r.id, lower(r.during)::timestamptz AS starts_at, upper(r.during)::timestamptz AS ends_at
FROM reservations r
WHERE r.pool_id = sqlc.arg(pool_id) AND r.state = 'active' AND upper(r.during) > sqlc.arg(now)::timestamptz;

-- name: PendingPoolLeases :many
-- The pool's pending leases in creation order, after seq.
SELECT id, tenant_id, seq, priority, gpus, gpu_model, cpus, memory_bytes, spread, tolerations, duration_ms, reservation_id, topology,
       nodes, gpus_per_node, gang_level, gang_level_required, created_at, reserved_start
FROM pool_leases
WHERE pool_id = sqlc.arg(pool_id) AND state = 'pending' AND seq > sqlc.arg(after_seq)::bigint
ORDER BY seq
LIMIT sqlc.arg(lim);

-- name: MarkPoolLeasesPlaced :many
-- pending -> placed, for those of the leases still pending; a lease of a reservation ends at the
-- reservation's end at the latest.
UPDATE pool_leases l
SET state = 'placed', placed_at = sqlc.arg(now)::timestamptz, updated_at = now(), reason = '', reserved_start = NULL,
    borrowing = COALESCE(l.id = ANY(sqlc.arg(borrowing_ids)::uuid[]), false),
    ends_at = LEAST(sqlc.arg(now)::timestamptz + l.duration_ms * interval '1 millisecond',
                    COALESCE((SELECT upper(r.during) FROM reservations r WHERE r.id = l.reservation_id), 'infinity'::timestamptz))
WHERE l.id = ANY(sqlc.arg(ids)::uuid[]) AND l.state = 'pending'
RETURNING l.id, l.tenant_id, l.placed_at, l.ends_at;

-- name: InsertDeviceAllocations :exec
-- ranks: a gang member's rank, -1 outside a gang (NULL).
INSERT INTO allocations (lease_id, node_id, device_id, model, topology, rank, started_at, metered_until)
SELECT unnest(sqlc.arg(lease_ids)::uuid[]), unnest(sqlc.arg(node_ids)::uuid[]), unnest(sqlc.arg(device_ids)::bigint[]),
       unnest(sqlc.arg(models)::text[]), unnest(sqlc.arg(topologies)::text[]), NULLIF(unnest(sqlc.arg(ranks)::integer[]), -1),
       sqlc.arg(now)::timestamptz, sqlc.arg(now)::timestamptz;

-- name: SetGangDomains :exec
-- The domains the placed gangs got.
UPDATE pool_leases l SET gang_domain = x.domain
FROM (SELECT unnest(sqlc.arg(ids)::uuid[]) AS id, unnest(sqlc.arg(domains)::text[]) AS domain) AS x
WHERE l.id = x.id;

-- name: SetGangReservations :exec
-- The pool's pending gangs' reservations as the placer last planned them: when each of ids
-- expects to start (starts), and none for the pool's other pending gangs that had one. One scan
-- of the pool's pending leases, no join: a self-join's plan cached while pool_leases was nearly
-- empty scanned the whole table again for each reserved gang.
UPDATE pool_leases l
SET reserved_start = (sqlc.arg(starts)::timestamptz[])[array_position(sqlc.arg(ids)::uuid[], l.id)]
WHERE l.pool_id = sqlc.arg(pool_id) AND l.state = 'pending' AND l.nodes > 0
  AND (l.id = ANY(sqlc.arg(ids)::uuid[]) OR l.reserved_start IS NOT NULL)
  AND l.reserved_start IS DISTINCT FROM (sqlc.arg(starts)::timestamptz[])[array_position(sqlc.arg(ids)::uuid[], l.id)];

-- name: GangMembers :many
-- The nodes the gangs hold or held: each member's rank, its domain (its labels of the pool's
-- topology levels), whether it is online,
-- the addresses its daemon reported, and the unhealthy GPUs the gang holds on it.
SELECT a.lease_id, a.node_id, min(a.rank)::integer AS rank, n.hostname, n.online,
       COALESCE((SELECT jsonb_object_agg(k, n.labels ->> k) FROM unnest(p.topology_levels) AS k WHERE n.labels ? k),
                '{}'::jsonb)::jsonb AS domain,
       COALESCE((SELECT jsonb_agg(addr) FROM jsonb_array_elements(
                     CASE WHEN jsonb_typeof(n.inventory -> 'nics') = 'array' THEN n.inventory -> 'nics' ELSE '[]'::jsonb END) AS nic,
                     jsonb_array_elements_text(CASE WHEN jsonb_typeof(nic -> 'addresses') = 'array' THEN nic -> 'addresses' ELSE '[]'::jsonb END) AS addr),
                '[]'::jsonb)::jsonb AS addresses,
       array_agg(COALESCE(d.idx, -1) ORDER BY d.idx)::integer[] AS gpu_indexes,
       array_remove(array_agg(CASE WHEN d.health = 'unhealthy' THEN d.idx END ORDER BY d.idx), NULL)::integer[] AS unhealthy
FROM allocations a
JOIN pool_leases l ON l.id = a.lease_id
JOIN pools p ON p.id = l.pool_id
JOIN nodes n ON n.id = a.node_id
LEFT JOIN devices d ON d.id = a.device_id
WHERE a.lease_id = ANY(sqlc.arg(lease_ids)::uuid[]) AND a.rank IS NOT NULL AND l.tenant_id = sqlc.arg(tenant_id)
GROUP BY a.lease_id, a.node_id, n.hostname, n.labels, n.online, n.inventory, p.topology_levels
ORDER BY a.lease_id, 3;

-- name: InsertResourceAllocations :exec
INSERT INTO allocations (lease_id, node_id, cpus, memory_bytes, started_at, metered_until)
SELECT unnest(sqlc.arg(lease_ids)::uuid[]), unnest(sqlc.arg(node_ids)::uuid[]), unnest(sqlc.arg(cpus)::integer[]),
       unnest(sqlc.arg(memory_bytes)::bigint[]), sqlc.arg(now)::timestamptz, sqlc.arg(now)::timestamptz;

-- name: DuePoolLeases :many
-- The pool's holding leases whose end has come: placed ones at their time, preempted ones at the
-- end of their grace period.
SELECT id FROM pool_leases
WHERE pool_id = sqlc.arg(pool_id) AND placed_at IS NOT NULL AND ended_at IS NULL AND ends_at <= sqlc.arg(now)::timestamptz
ORDER BY ends_at
LIMIT sqlc.arg(lim);

-- name: NextPoolWake :one
-- When the placer next has something to do for the pool without being told: the first end of a
-- running lease, or the next start or end of a reservation of the tenant (reservations of other
-- pools may cover the pool's nodes), or when a pending gang has waited long enough for the placer
-- to reserve a domain for it. Unix seconds; 0 when nothing is due.
SELECT COALESCE(EXTRACT(EPOCH FROM LEAST(
    (SELECT min(l.ends_at) FROM pool_leases l WHERE l.pool_id = sqlc.arg(pool_id) AND l.placed_at IS NOT NULL AND l.ended_at IS NULL),
    (SELECT min(l.created_at + p.gang_reservation_wait_ms * interval '1 millisecond')
     FROM pool_leases l JOIN pools p ON p.id = l.pool_id
     WHERE l.pool_id = sqlc.arg(pool_id) AND l.state = 'pending' AND l.nodes > 0 AND l.reserved_start IS NULL
       AND l.created_at + p.gang_reservation_wait_ms * interval '1 millisecond' > sqlc.arg(now)::timestamptz),
    (SELECT min(lower(r.during)) FROM reservations r
     WHERE r.tenant_id = sqlc.arg(tenant_id) AND r.state = 'active' AND lower(r.during) > sqlc.arg(now)::timestamptz),
    (SELECT min(upper(r.during)) FROM reservations r
     WHERE r.tenant_id = sqlc.arg(tenant_id) AND r.state = 'active' AND upper(r.during) > sqlc.arg(now)::timestamptz)
)), 0)::float8 AS next_epoch;

-- name: ScheduleReconcile :exec
-- From inside a reconcile of key: makes the key due again after delay_ms (by the database's
-- clock). The runtime hides a key it works on by pushing due_at into the future; an enqueue
-- meanwhile pulls it back to now, and is kept. The generation moves on, so the runtime keeps the
-- key when the reconcile completes.
INSERT INTO reconcile_queue (kind, key, due_at)
VALUES (sqlc.arg(kind), sqlc.arg(key), now() + sqlc.arg(delay_ms)::bigint * interval '1 millisecond')
ON CONFLICT (kind, key) DO UPDATE
SET due_at = CASE WHEN reconcile_queue.due_at > now() THEN excluded.due_at ELSE reconcile_queue.due_at END,
    generation = reconcile_queue.generation + 1,
    attempts = 0,
    last_error = NULL;

-- name: InsertOutboxEvents :exec
-- Many events in one statement, for workers (API calls emit through admission).
INSERT INTO outbox (tenant_id, type, subject, payload)
SELECT unnest(sqlc.arg(tenant_ids)::uuid[]), unnest(sqlc.arg(types)::text[]), unnest(sqlc.arg(subjects)::text[]),
       unnest(sqlc.arg(payloads)::text[])::jsonb;

-- name: MarkNodeLeasesAtRisk :many
-- placed -> at_risk for the leases holding anything on the nodes.
UPDATE pool_leases l SET state = 'at_risk', updated_at = now()
WHERE l.state = 'placed'
  AND l.id IN (SELECT a.lease_id FROM allocations a WHERE a.node_id = ANY(sqlc.arg(node_ids)::uuid[]) AND a.ended_at IS NULL)
RETURNING l.id, l.tenant_id, l.pool_id;

-- name: MarkNodeLeasesPlaced :many
-- at_risk -> placed for the leases holding anything on the nodes, once every node they hold is
-- online and not revoked.
UPDATE pool_leases l SET state = 'placed', updated_at = now()
WHERE l.state = 'at_risk'
  AND l.id IN (SELECT a.lease_id FROM allocations a WHERE a.node_id = ANY(sqlc.arg(node_ids)::uuid[]) AND a.ended_at IS NULL)
  AND NOT EXISTS (
      SELECT 1 FROM allocations a JOIN nodes n ON n.id = a.node_id
      WHERE a.lease_id = l.id AND a.ended_at IS NULL AND (NOT n.online OR n.revoked_at IS NOT NULL))
RETURNING l.id, l.tenant_id, l.pool_id;

-- name: CountNodeActiveLeases :one
-- How many leases hold anything on a node.
SELECT count(DISTINCT lease_id)::bigint FROM allocations WHERE node_id = sqlc.arg(node_id) AND ended_at IS NULL;

-- name: PoolsOfNodes :many
-- The pools the nodes are members of.
SELECT DISTINCT p.id
FROM nodes n
JOIN pools p ON pool_member(p, n)
WHERE n.id = ANY(sqlc.arg(node_ids)::uuid[]);

-- name: ShareActiveGrant :one
-- The tenant's active grant of a pool, for leases/create from a granted pool. Shared-locked until
-- the transaction ends, so a concurrent revoke (which updates the row) waits for the lease to
-- commit and then fails it as pending, or runs first and the lease is refused.
-- With the pool's topology levels, which a gang's level must be one of.
SELECT g.id, g.pool_id, g.owner_tenant_id, g.tenant_id, g.nominal, g.borrowing_limit, g.weight,
       (SELECT p.topology_levels FROM pools p WHERE p.id = g.pool_id)::text[] AS topology_levels
FROM pool_grants g
WHERE g.pool_id = sqlc.arg(pool_id) AND g.tenant_id = sqlc.arg(tenant_id) AND g.revoked_at IS NULL
FOR SHARE OF g;
