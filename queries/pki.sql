-- The machine PKI: settings and authorities (see migrations/0006_pki.sql).

-- name: InsertPKISettings :one
-- Claims the deployment's PKI for a trust domain; no row when it is already initialised (a
-- concurrent Init waits for the other transaction and then gets no row).
INSERT INTO pki_settings (trust_domain) VALUES (sqlc.arg(trust_domain))
ON CONFLICT (singleton) DO NOTHING
RETURNING *;

-- name: GetPKISettings :one
SELECT * FROM pki_settings;

-- name: LockPKISettings :one
-- Serialises changes to the authorities (rotation) for the rest of the transaction.
SELECT * FROM pki_settings FOR UPDATE;

-- name: InsertPKIAuthority :exec
INSERT INTO pki_authorities (id, kind, cert_pem, public_key, sealed_key, not_after, retired_at)
VALUES (sqlc.arg(id), sqlc.arg(kind), sqlc.narg(cert_pem), sqlc.arg(public_key), sqlc.arg(sealed_key),
        sqlc.narg(not_after), sqlc.narg(retired_at));

-- name: ListPKIAuthorities :many
-- Every authority: root, node, internal, join; issuers first, then newest first within a kind.
SELECT * FROM pki_authorities ORDER BY CASE kind WHEN 'root' THEN 0 WHEN 'node' THEN 1 WHEN 'internal' THEN 2 ELSE 3 END, retired_at IS NOT NULL, created_at DESC, id;

-- name: ListLivePKIAuthorities :many
-- The authorities still accepted at the given time: the issuers, and rotated-out ones whose
-- overlap has not ended.
SELECT * FROM pki_authorities
WHERE retired_at IS NULL OR retired_at > sqlc.arg(at)::timestamptz
ORDER BY CASE kind WHEN 'root' THEN 0 WHEN 'node' THEN 1 WHEN 'internal' THEN 2 ELSE 3 END, retired_at IS NOT NULL, created_at DESC, id;

-- name: RetirePKIAuthorities :exec
-- Ends, at the latest at until, the acceptance of every authority of the kind: the issuer and
-- rotated-out ones whose overlap would last longer.
UPDATE pki_authorities SET retired_at = sqlc.arg(until)::timestamptz
WHERE kind = sqlc.arg(kind) AND (retired_at IS NULL OR retired_at > sqlc.arg(until)::timestamptz);
