-- Retention of sign-in sessions (issue 23): a session that ended, by its absolute expiry or by
-- revocation, is kept a while for sessions/list and audit, then deleted by the retention job.

-- name: PruneEndedSessions :execrows
-- Deletes up to lim sessions that expired or were revoked more than keep_ms ago. A session that
-- ended by its idle timeout only is deleted once its absolute expiry is that old.
DELETE FROM sessions
WHERE id = ANY(ARRAY(
    SELECT s.id FROM sessions s
    WHERE s.expires_at < now() - sqlc.arg(keep_ms)::bigint * interval '1 millisecond'
       OR s.revoked_at < now() - sqlc.arg(keep_ms)::bigint * interval '1 millisecond'
    LIMIT sqlc.arg(lim)
));
