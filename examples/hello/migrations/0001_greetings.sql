-- The hello module's greetings: one row per greeting a tenant asked for; the reconciler writes
-- its message.
CREATE TABLE hello_greetings (
    id uuid PRIMARY KEY,
    tenant_id uuid NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    name text NOT NULL CHECK (char_length(name) BETWEEN 1 AND 64),
    message text NOT NULL DEFAULT '',
    created_at timestamptz NOT NULL DEFAULT now()
);

CREATE INDEX hello_greetings_tenant ON hello_greetings (tenant_id, created_at DESC);
