-- The pool membership functions of 0016 with string bodies, for databases that applied 0016
-- before it was amended: PostgreSQL 17 refuses to add a column with a default to pools while an
-- SQL-standard function body (RETURN …) uses its row type. The same predicates; a no-op on a
-- database that applied the amended 0016.
CREATE OR REPLACE FUNCTION pool_selects(p pools, n nodes) RETURNS boolean
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
SELECT n.tenant_id = p.tenant_id
   AND (n.id = ANY(p.node_ids) OR n.pool = p.name OR (p.node_selector <> '{}'::jsonb AND n.labels @> p.node_selector))
$$;

CREATE OR REPLACE FUNCTION pool_member(p pools, n nodes) RETURNS boolean
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
SELECT pool_selects(p, n) AND n.revoked_at IS NULL AND n.state <> 'retired'
$$;
