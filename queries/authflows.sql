-- Sign-in flows in progress (auth_flows): a code flow's state or a device flow's handle, by
-- hash, spent once. They belong to no caller yet: the state (or handle) is the credential.

-- name: LockAuthFlowStarts :exec
-- Serializes the starts of one client address and of one method until the transaction ends, so
-- that CountOpenAuthFlows and CreateAuthFlow in the same transaction hold the caps exactly. Every
-- start takes the client's lock first, then the method's.
SELECT pg_advisory_xact_lock(hashtextextended('auth_flows.client:' || sqlc.arg(client)::text, 0)),
       pg_advisory_xact_lock(hashtextextended('auth_flows.method:' || sqlc.arg(auth_method_id)::uuid::text, 0));

-- name: CountOpenAuthFlows :one
-- The unfinished flows of a method and of a client address started in the last counted_secs
-- seconds: what the caps auth.flows.perMethod and auth.flows.perAddress count. An older
-- unfinished flow stays usable until it expires but counts against neither, so anonymous starts
-- cannot hold a method's sign-in shut for a flow's whole lifetime.
SELECT count(*) FILTER (WHERE f.auth_method_id = sqlc.arg(auth_method_id))::bigint AS method_open,
       count(*) FILTER (WHERE f.client = sqlc.arg(client))::bigint AS client_open
FROM auth_flows f
WHERE (f.auth_method_id = sqlc.arg(auth_method_id) OR f.client = sqlc.arg(client))
  AND f.used_at IS NULL AND f.expires_at > now()
  AND f.created_at > now() - make_interval(secs => sqlc.arg(counted_secs)::float8);

-- name: CreateAuthFlow :exec
-- Records a flow; the caller has taken LockAuthFlowStarts and checked CountOpenAuthFlows in the
-- same transaction.
INSERT INTO auth_flows (state_hash, auth_method_id, kind, redirect_uri, nonce, secret_sealed, return_to, expires_at, client)
VALUES (sqlc.arg(state_hash), sqlc.arg(auth_method_id), sqlc.arg(kind), sqlc.arg(redirect_uri), sqlc.arg(nonce),
        sqlc.arg(secret_sealed), sqlc.arg(return_to), sqlc.arg(expires_at), sqlc.arg(client));

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
