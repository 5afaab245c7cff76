-- name: CreateGreeting :one
INSERT INTO hello_greetings (id, tenant_id, name)
VALUES (sqlc.arg(id), sqlc.arg(tenant_id), sqlc.arg(name))
RETURNING *;

-- name: ListGreetings :many
-- The tenant's greetings, newest first.
SELECT * FROM hello_greetings
WHERE tenant_id = sqlc.arg(tenant_id)
ORDER BY created_at DESC, id DESC
LIMIT sqlc.arg(lim);

-- name: WriteMessage :execrows
-- The reconciler's write: the greeting's message, once.
UPDATE hello_greetings SET message = 'Hello, ' || name || '!'
WHERE id = sqlc.arg(id) AND message = '';
