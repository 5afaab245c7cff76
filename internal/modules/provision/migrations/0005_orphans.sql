-- The orphan sweep's memory (the provision module's): each provider resource of this deployment
-- that no machine names, by the class whose provider lists it. first_seen ages it (providers do
-- not say when they made a resource), removing_since marks a Delete asked for, so a sweep that
-- dies between the provider's Delete and recording it still records the removal once; a row is
-- forgotten once its provider no longer lists the resource.

CREATE TABLE provision_orphans (
    tenant_id      uuid        NOT NULL,
    class          text        NOT NULL,
    provider_id    text        NOT NULL,
    -- The resource's machine tag (cut to 256 characters), as found.
    machine_tag    text        NOT NULL DEFAULT '' CHECK (length(machine_tag) <= 256),
    first_seen     timestamptz NOT NULL,
    last_seen      timestamptz NOT NULL,
    removing_since timestamptz,
    removed_at     timestamptz,
    PRIMARY KEY (tenant_id, class, provider_id),
    FOREIGN KEY (tenant_id, class) REFERENCES provision_classes (tenant_id, name) ON DELETE CASCADE
);
