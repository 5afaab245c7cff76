-- Which nodes belong to a pool is said once, here, and every statement that needs it calls these
-- functions instead of spelling the predicate out again.
--
-- pool_selects: the node belongs to the pool's tenant and is listed in node_ids, carries every
-- label of a non-empty node_selector, or has the pool's name as its pool (from its join token).
-- pool_member: pool_selects, and the node is neither revoked nor retired; what capacity, the
-- placer and pools/get count.
--
-- Both are plain SQL over their arguments (IMMUTABLE), so the planner inlines them into the
-- statement that calls them and plans the join as if the predicate were written there. Their
-- bodies are strings, not SQL-standard bodies (RETURN …): PostgreSQL 17 refuses to add a column
-- with a default to a table whose row type an SQL-standard body uses, as 0019 does to pools.
-- This file was amended for that; a database that applied the earlier text has the same
-- functions, rewritten by 0027.
-- replaces checksum 4b2ecb23ed5e8f0f370768358afc2f42522b67a8f52aa63db36c185a9b4071db
CREATE FUNCTION pool_selects(p pools, n nodes) RETURNS boolean
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
SELECT n.tenant_id = p.tenant_id
   AND (n.id = ANY(p.node_ids) OR n.pool = p.name OR (p.node_selector <> '{}'::jsonb AND n.labels @> p.node_selector))
$$;

CREATE FUNCTION pool_member(p pools, n nodes) RETURNS boolean
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
SELECT pool_selects(p, n) AND n.revoked_at IS NULL AND n.state <> 'retired'
$$;
