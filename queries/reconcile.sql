-- The reconcile queue: due keys per kind. Enqueue runs in the caller's transaction; workers claim
-- due keys of their shards with SKIP LOCKED and push them out of sight for a visibility timeout,
-- so no key is reconciled by two workers at once.

-- name: EnqueueReconcile :exec
-- Makes the keys due now (sooner if already queued) and bumps their generation, so a key
-- enqueued again while it is being reconciled is reconciled once more.
INSERT INTO reconcile_queue (kind, key)
SELECT sqlc.arg(kind), k FROM unnest(sqlc.arg(keys)::text[]) AS k
ON CONFLICT (kind, key) DO UPDATE
SET due_at = LEAST(reconcile_queue.due_at, now()),
    generation = reconcile_queue.generation + 1,
    enqueued_at = now();

-- name: ClaimReconcile :many
WITH due AS (
    SELECT q.kind, q.key FROM reconcile_queue q
    WHERE q.kind = sqlc.arg(kind) AND q.shard = ANY(sqlc.arg(shards)::integer[]) AND q.due_at <= now()
    ORDER BY q.due_at
    LIMIT sqlc.arg(lim)
    FOR UPDATE SKIP LOCKED
)
UPDATE reconcile_queue q
SET due_at = now() + sqlc.arg(visibility_ms)::bigint * interval '1 millisecond'
FROM due
WHERE q.kind = due.kind AND q.key = due.key
RETURNING q.key, q.shard, q.generation, q.attempts, q.due_at AS hidden_until;

-- name: CompleteReconcile :exec
-- Removes reconciled keys, unless they were enqueued again meanwhile (generation moved on).
DELETE FROM reconcile_queue q
WHERE q.kind = sqlc.arg(kind)
  AND (q.key, q.generation) IN (
      SELECT unnest(sqlc.arg(keys)::text[]), unnest(sqlc.arg(generations)::bigint[]));

-- name: RetryReconcile :exec
UPDATE reconcile_queue
SET attempts = attempts + 1,
    last_error = sqlc.arg(last_error),
    due_at = now() + sqlc.arg(delay_ms)::bigint * interval '1 millisecond'
WHERE kind = sqlc.arg(kind) AND key = sqlc.arg(key);

-- name: ReleaseReconcile :exec
-- Makes claimed keys due again at once, attempts unchanged: a worker stopping hands back what it
-- claimed and did not finish, rather than hiding it for the rest of its visibility window. A key
-- whose due time moved since the claim (deferred, retried, or claimed again after the window)
-- is left as it is.
UPDATE reconcile_queue q
SET due_at = now()
WHERE q.kind = sqlc.arg(kind)
  AND (q.key, q.due_at) IN (
      SELECT unnest(sqlc.arg(keys)::text[]), unnest(sqlc.arg(hidden_until)::timestamptz[]));

-- name: NotifyReconcile :exec
SELECT pg_notify('bc_reconcile', sqlc.arg(kind)::text);

-- name: ReconcileQueueStats :many
-- Depth and age of each kind's due keys, for metrics and doctor.
SELECT kind,
       count(*)::bigint AS depth,
       count(*) FILTER (WHERE due_at <= now())::bigint AS due,
       COALESCE(EXTRACT(EPOCH FROM now() - min(due_at) FILTER (WHERE due_at <= now())), 0)::float8 AS oldest_due_seconds
FROM reconcile_queue
GROUP BY kind
ORDER BY kind;

-- name: ListenReconcile :exec
LISTEN bc_reconcile;
