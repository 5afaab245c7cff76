-- The provision module's machine classes (provision_classes).

-- name: CreateClass :one
-- Creates a class; no row when the tenant has one of that name.
INSERT INTO provision_classes (tenant_id, name, provider, params, credentials)
VALUES (sqlc.arg(tenant_id), sqlc.arg(name), sqlc.arg(provider), sqlc.arg(params), sqlc.narg(credentials))
ON CONFLICT (tenant_id, name) DO NOTHING
RETURNING *;

-- name: GetClass :one
SELECT * FROM provision_classes WHERE tenant_id = sqlc.arg(tenant_id) AND name = sqlc.arg(name);

-- name: ListClasses :many
-- A page of the tenant's classes by name, after the name after.
SELECT * FROM provision_classes
WHERE tenant_id = sqlc.arg(tenant_id) AND name > sqlc.arg(after)
ORDER BY name
LIMIT sqlc.arg(lim);

-- name: DeleteClass :execrows
-- Deletes a class no machine that is not gone uses, with the gone machines that name it (their
-- rows are only history). 0 rows: no such class, or one in use.
WITH unused AS (
    SELECT c.tenant_id, c.name FROM provision_classes c
    WHERE c.tenant_id = sqlc.arg(tenant_id) AND c.name = sqlc.arg(name)
      AND NOT EXISTS (SELECT 1 FROM provision_machines m
                      WHERE m.tenant_id = c.tenant_id AND m.class = c.name AND m.state <> 'gone')
    FOR UPDATE
), gone AS (
    DELETE FROM provision_machines m USING unused u
    WHERE m.tenant_id = u.tenant_id AND m.class = u.name
)
DELETE FROM provision_classes c USING unused u
WHERE c.tenant_id = u.tenant_id AND c.name = u.name;
