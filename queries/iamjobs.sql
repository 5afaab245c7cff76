-- The IAM role's background jobs (workers/internal/iamjobs). Each statement handles at most lim rows;
-- the jobs repeat it until it handles fewer. Each batch is computed once, as an array or a
-- materialized CTE (see queries/commands.sql for why not "IN (SELECT ... LIMIT n)").

-- name: ExpireAPIKeys :one
-- Deletes up to lim API keys that expired more than grace_ms ago, and writes one audit row per
-- tenant of the batch ("job/iam:expire-keys", target "apiKeys/<id>,<id>,…", no principal), in
-- the same statement. Expired keys are already refused at authentication; this only removes
-- them.
WITH expired AS (
    DELETE FROM api_keys
    WHERE id = ANY(ARRAY(
        SELECT k.id FROM api_keys k
        WHERE k.expires_at IS NOT NULL AND k.expires_at < now() - sqlc.arg(grace_ms)::bigint * interval '1 millisecond'
        ORDER BY k.expires_at
        LIMIT sqlc.arg(lim)
        FOR UPDATE SKIP LOCKED
    ))
    RETURNING id, tenant_id
), audited AS (
    INSERT INTO audit_events (tenant_id, principal_id, method, target, outcome, request_id)
    SELECT e.tenant_id, NULL, 'job/iam:expire-keys', 'apiKeys/' || string_agg(e.id, ',' ORDER BY e.id), 'ok', sqlc.arg(request_id)::text
    FROM expired e
    GROUP BY e.tenant_id
)
SELECT count(*)::bigint AS deleted FROM expired;

-- name: PruneIdempotencyKeys :execrows
-- Deletes up to lim stored idempotent responses older than keep_ms.
WITH batch AS MATERIALIZED (
    SELECT k.principal_id, k.key FROM idempotency_keys k
    WHERE k.created_at < now() - sqlc.arg(keep_ms)::bigint * interval '1 millisecond'
    ORDER BY k.created_at
    LIMIT sqlc.arg(lim)
)
DELETE FROM idempotency_keys i
USING batch b
WHERE i.principal_id = b.principal_id AND i.key = b.key;
