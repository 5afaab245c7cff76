-- Sign-in flows in progress (auth_flows): a code flow's state or a device flow's handle, by
-- hash, spent once. They belong to no caller yet: the state (or handle) is the credential.

-- name: CreateAuthFlow :execrows
-- Records a flow unless the method already has max_open flows in progress (0 rows): starting a
-- sign-in is public, and this bounds what anonymous callers can make the database hold.
INSERT INTO auth_flows (state_hash, auth_method_id, kind, redirect_uri, nonce, secret_sealed, return_to, expires_at)
SELECT sqlc.arg(state_hash), sqlc.arg(auth_method_id), sqlc.arg(kind), sqlc.arg(redirect_uri), sqlc.arg(nonce),
       sqlc.arg(secret_sealed), sqlc.arg(return_to), sqlc.arg(expires_at)
WHERE (SELECT count(*) FROM auth_flows f
       WHERE f.auth_method_id = sqlc.arg(auth_method_id) AND f.used_at IS NULL AND f.expires_at > now()) < sqlc.arg(max_open)::bigint;

-- name: SpendAuthFlow :one
-- Spends a flow of the kind: the first caller with its state gets it; a used, expired or unknown
-- state, or one of another kind, none.
UPDATE auth_flows SET used_at = now()
WHERE state_hash = sqlc.arg(state_hash) AND kind = sqlc.arg(kind) AND used_at IS NULL AND expires_at > now()
RETURNING *;

-- name: GetDeviceFlow :one
-- A device flow still waiting for the user, for its poll (spent with SpendAuthFlow once approved).
SELECT * FROM auth_flows
WHERE state_hash = sqlc.arg(state_hash) AND kind = 'device' AND used_at IS NULL AND expires_at > now();

-- name: DeleteEndedAuthFlows :execrows
-- Retention: flows spent or expired an hour ago.
DELETE FROM auth_flows WHERE expires_at < now() - interval '1 hour';
