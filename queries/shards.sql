-- Shard membership: workers of a role heartbeat here; each takes the shards that rendezvous
-- hashing gives it among the live members, under one lease per shard.

-- name: HeartbeatMember :exec
INSERT INTO shard_members (role, member) VALUES (sqlc.arg(role), sqlc.arg(member))
ON CONFLICT (role, member) DO UPDATE SET heartbeat_at = now();

-- name: LiveMembers :many
SELECT member FROM shard_members
WHERE role = sqlc.arg(role) AND heartbeat_at > now() - sqlc.arg(ttl_ms)::bigint * interval '1 millisecond'
ORDER BY member;

-- name: LeaveMembership :exec
DELETE FROM shard_members WHERE role = sqlc.arg(role) AND member = sqlc.arg(member);

-- name: PruneMembers :exec
-- Forgets members silent for much longer than a TTL (crashed processes).
DELETE FROM shard_members
WHERE role = sqlc.arg(role) AND heartbeat_at < now() - sqlc.arg(older_than_ms)::bigint * interval '1 millisecond';
