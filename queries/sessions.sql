-- Sessions a sign-in started (issue 23): the dashboard's cookie or a bearer "bcs_<id>_<secret>".
-- Every statement the API's handlers run takes the caller's tenant id.

-- name: CreateSession :one
INSERT INTO sessions (id, tenant_id, principal_id, auth_method_id, kind, secret_hash, expires_at)
VALUES (sqlc.arg(id), sqlc.arg(tenant_id), sqlc.arg(principal_id), sqlc.narg(auth_method_id), sqlc.arg(kind),
        sqlc.arg(secret_hash), sqlc.arg(expires_at))
RETURNING *;

-- name: AuthenticateSession :one
-- Resolves a session id to its principal, tenant and roles in one round trip, as
-- AuthenticateAPIKey does for keys.
SELECT s.id, s.secret_hash, s.expires_at, s.last_used_at, s.revoked_at, s.tenant_id, s.principal_id,
       p.kind, p.name AS principal_name, t.is_root, t.name AS tenant_name, t.suspended_at, t.deleted_at,
       COALESCE(array_agg(rb.role ORDER BY rb.role) FILTER (WHERE rb.role IS NOT NULL), '{}')::text[] AS roles
FROM sessions s
JOIN principals p ON p.id = s.principal_id
JOIN tenants t ON t.id = s.tenant_id
LEFT JOIN role_bindings rb ON rb.principal_id = s.principal_id
WHERE s.id = sqlc.arg(id)
GROUP BY s.id, p.id, t.id;

-- name: TouchSession :exec
-- Records use at most once a minute per session; the idle timeout counts from it.
UPDATE sessions SET last_used_at = now()
WHERE id = sqlc.arg(id) AND last_used_at < now() - interval '1 minute';

-- name: ListSessions :many
-- sessions/list: the tenant's sessions that have not ended (the idle timeout is the caller's to
-- apply: idle_after), newest first; the cursor is the last (created_at, id) seen.
SELECT s.*, COALESCE(m.name, '')::text AS method_name
FROM sessions s LEFT JOIN auth_methods m ON m.id = s.auth_method_id
WHERE s.tenant_id = sqlc.arg(tenant_id) AND s.revoked_at IS NULL AND s.expires_at > now()
  AND s.last_used_at > sqlc.arg(idle_after)::timestamptz
  AND (s.created_at, s.id) < (sqlc.arg(before_time)::timestamptz, sqlc.arg(before_id)::text)
ORDER BY s.created_at DESC, s.id DESC
LIMIT sqlc.arg(lim);

-- name: RevokeSession :execrows
-- sessions/revoke and auth/signOut: 0 rows for an unknown, another tenant's or an ended session.
UPDATE sessions SET revoked_at = now()
WHERE tenant_id = sqlc.arg(tenant_id) AND id = sqlc.arg(id) AND revoked_at IS NULL AND expires_at > now();

-- name: EndAuthMethodSessions :execrows
-- authMethods/delete: ends the method's sessions that had not ended, and counts them.
UPDATE sessions SET revoked_at = now()
-- The method is found in the caller's tenant; its sessions may be in tenants below it (rules of
-- the root tenant's methods may sign principals in there).
WHERE auth_method_id = (SELECT m.id FROM auth_methods m WHERE m.tenant_id = sqlc.arg(tenant_id) AND m.name = sqlc.arg(name))
  AND revoked_at IS NULL AND expires_at > now();
