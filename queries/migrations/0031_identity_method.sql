-- Issue 31: an identity belongs to the auth method that created it. A principal a provider's
-- subject signed in as is found again only through the same method (and issuer and subject):
-- another method naming the same issuer, or a method made again after its deletion, links
-- identities of its own and never adopts another's principals (nor their manual bindings).

-- Backfill: each identity is bound to the oldest method with its issuer, of its tenant or of a
-- tenant above it (the root tenant's methods sign principals in below it). Before this, the link
-- followed the last method a sign-in used, which may be one an admin made to reach the identity;
-- the oldest is the one it was made through, or was there first. None: the identity stays
-- unbound (NULL), and no sign-in matches it again.
UPDATE principal_identities i SET auth_method_id = (
    WITH RECURSIVE up AS (
        SELECT t.id, t.parent_id FROM tenants t WHERE t.id = i.tenant_id
        UNION
        SELECT t.id, t.parent_id FROM tenants t JOIN up u ON t.id = u.parent_id
    )
    SELECT m.id FROM auth_methods m
    WHERE m.issuer = i.issuer AND m.tenant_id IN (SELECT u.id FROM up u)
    ORDER BY m.created_at, m.id
    LIMIT 1
);

ALTER TABLE principal_identities DROP CONSTRAINT principal_identities_tenant_id_issuer_subject_key;
-- A deleted method's identities keep their rows with a NULL method (ON DELETE SET NULL): NULLs
-- are distinct, so they never conflict, and no lookup by method finds them.
ALTER TABLE principal_identities
    ADD CONSTRAINT principal_identities_method_subject UNIQUE (tenant_id, auth_method_id, issuer, subject);
-- The owner check of authMethods/create and update: identities of a method, and of an issuer.
CREATE INDEX principal_identities_method ON principal_identities (auth_method_id);
CREATE INDEX principal_identities_issuer ON principal_identities (tenant_id, issuer);
