-- IAM edges: who minted each API key (so promotion to owner can revoke keys a non-owner minted),
-- suspended and deleted (tombstoned) child tenants, and retired nodes' identities revoked.

-- created_by is the principal whose call minted the key (null when minted by the CLI, by tenant
-- creation, or before this migration); created_by_owner is whether that caller was an owner.
-- Promoting a principal to owner revokes its keys whose created_by_owner is false.
ALTER TABLE api_keys
    ADD COLUMN created_by       uuid,
    ADD COLUMN created_by_owner boolean NOT NULL DEFAULT false;
-- Keys of today's owners already act as an owner's: nothing will newly elevate them.
UPDATE api_keys k SET created_by_owner = true
WHERE EXISTS (SELECT 1 FROM role_bindings rb WHERE rb.principal_id = k.principal_id AND rb.role = 'owner');

-- A suspended tenant's API keys are refused until the root tenant resumes it. A deleted tenant is
-- a tombstone: its principals and keys are gone, its nodes revoked, its name stays taken. The
-- root tenant is never suspended nor deleted.
ALTER TABLE tenants
    ADD COLUMN suspended_at timestamptz,
    ADD COLUMN deleted_at   timestamptz,
    ADD CONSTRAINT tenants_root_lives CHECK (NOT is_root OR (suspended_at IS NULL AND deleted_at IS NULL));

-- Retiring a node now revokes its identity too; nodes retired before did not.
UPDATE nodes SET revoked_at = now(), updated_at = now()
WHERE state = 'retired' AND revoked_at IS NULL;
