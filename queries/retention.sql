-- Retention: pruning old rows in bounded batches. Each statement deletes at most lim rows and
-- runs in its own short transaction, so no statement holds many row locks or runs for long;
-- the retention job repeats a statement until it deletes nothing. The batch is computed once,
-- as an array (see queries/commands.sql for why not "id IN (SELECT ... LIMIT n)").

-- name: PruneAuditEvents :execrows
-- Deletes audit rows older than keep_ms among the lim oldest ids. Ids grow with time (created_at
-- is the inserting transaction's start, so neighbours may be out of order by a transaction's
-- length), so the old rows are the lowest ids: looking at a window of the lowest ids finds them
-- without an index on created_at, and costs one small index range scan when nothing is old.
DELETE FROM audit_events
WHERE id = ANY(ARRAY(
    SELECT w.id FROM (SELECT a.id, a.created_at FROM audit_events a ORDER BY a.id LIMIT sqlc.arg(lim)) w
    WHERE w.created_at < now() - sqlc.arg(keep_ms)::bigint * interval '1 millisecond'
));

-- name: PruneFinishedCommands :execrows
-- Deletes up to lim commands that reached a final state more than keep_ms ago. Final states
-- are never left, so nothing else writes these rows.
DELETE FROM commands
WHERE id = ANY(ARRAY(
    SELECT c.id FROM commands c
    WHERE c.finished_at IS NOT NULL AND c.finished_at < now() - sqlc.arg(keep_ms)::bigint * interval '1 millisecond'
    ORDER BY c.finished_at
    LIMIT sqlc.arg(lim)
));

-- name: PruneTunnels :execrows
-- Deletes up to lim tunnels closed more than keep_ms ago, and rows never closed whose ticket or
-- relay lease (expires_at) lapsed more than keep_ms ago: unused tickets, and tunnels whose API
-- went away.
DELETE FROM tunnels
WHERE id = ANY(ARRAY(
    (SELECT t.id FROM tunnels t
     WHERE t.closed_at IS NOT NULL AND t.closed_at < now() - sqlc.arg(keep_ms)::bigint * interval '1 millisecond'
     LIMIT sqlc.arg(lim))
    UNION ALL
    (SELECT t.id FROM tunnels t
     WHERE t.closed_at IS NULL AND t.expires_at < now() - sqlc.arg(keep_ms)::bigint * interval '1 millisecond'
     LIMIT sqlc.arg(lim))
));

-- name: PruneOutbox :execrows
-- Deletes outbox rows older than keep_ms among the lim first in the sinks' read order (tx_id,
-- id), windowed as PruneAuditEvents is, keeping every row some healthy sink has not delivered
-- yet: a row after such a sink's cursor stays however old it is. The cursors of failing webhooks
-- do not count: their events are parked in webhook_dead_letters instead (a failing webhook
-- whose dispatcher is not running for longer than keep_ms loses what it did not park), so one
-- broken endpoint cannot stop pruning for every tenant. A sink created later starts at the
-- horizon of its creation and never reads older rows (EnsureSinkCursor), so only existing
-- cursors count.
DELETE FROM outbox
WHERE id = ANY(ARRAY(
    SELECT w.id FROM (SELECT o.id, o.tx_id, o.created_at FROM outbox o ORDER BY o.tx_id, o.id LIMIT sqlc.arg(lim)) w
    WHERE w.created_at < now() - sqlc.arg(keep_ms)::bigint * interval '1 millisecond'
      AND NOT EXISTS (
        SELECT 1 FROM sink_cursors s LEFT JOIN webhooks h ON h.id = s.webhook_id
        WHERE (w.tx_id, w.id) > (s.tx_id, s.outbox_id) AND h.state IS DISTINCT FROM 'failing'
      )
));

-- name: PruneGPUHealthChanges :execrows
-- Deletes GPU health changes older than keep_ms among the lim oldest ids, windowed as
-- PruneAuditEvents is (ids grow with time).
DELETE FROM gpu_health_changes
WHERE id = ANY(ARRAY(
    SELECT w.id FROM (SELECT c.id, c.at FROM gpu_health_changes c ORDER BY c.id LIMIT sqlc.arg(lim)) w
    WHERE w.at < now() - sqlc.arg(keep_ms)::bigint * interval '1 millisecond'
));

-- name: PruneLeaseGPUMinutes :execrows
-- Deletes up to lim of the lease GPU minutes older than keep_ms, oldest first.
DELETE FROM lease_gpu_minutes
WHERE (lease_id, node_id, minute) IN (
    SELECT m.lease_id, m.node_id, m.minute FROM lease_gpu_minutes m
    WHERE m.minute < now() - sqlc.arg(keep_ms)::bigint * interval '1 millisecond'
    ORDER BY m.minute LIMIT sqlc.arg(lim)
);

-- name: PruneFanOuts :execrows
-- Deletes up to lim fan-outs whose deadline passed more than keep_ms ago (retention.commands) and
-- whose commands are all gone: every command of a fan-out has its deadline, so by then they are
-- final, and PruneFinishedCommands deletes them on the same retention.
DELETE FROM fan_outs
WHERE id = ANY(ARRAY(
    SELECT f.id FROM fan_outs f
    WHERE f.deadline < now() - sqlc.arg(keep_ms)::bigint * interval '1 millisecond'
      AND NOT EXISTS (SELECT 1 FROM commands c WHERE c.fan_out_id = f.id)
    ORDER BY f.deadline
    LIMIT sqlc.arg(lim)
));
