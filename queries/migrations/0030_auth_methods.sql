-- Sign-in through identity providers (issue 23): a tenant's auth methods (OIDC for people, JWT
-- for machine tokens), their binding rules, the identities that link a provider's subject to a
-- principal, the flows in progress, and the sessions a sign-in starts.

CREATE TABLE auth_methods (
    id                   uuid        PRIMARY KEY,
    tenant_id            uuid        NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    name                 text        NOT NULL CHECK (name ~ '^[a-z][a-z0-9-]{0,31}$'),
    display_name         text        NOT NULL DEFAULT '' CHECK (length(display_name) <= 128),
    kind                 text        NOT NULL CHECK (kind IN ('oidc', 'jwt')),
    issuer               text        NOT NULL DEFAULT '',
    client_id            text        NOT NULL DEFAULT '',
    -- The OIDC client secret, sealed under the deployment secret (internal/seal); empty for none.
    client_secret_sealed bytea       NOT NULL DEFAULT '',
    scopes               text[]      NOT NULL DEFAULT '{}',
    redirect_uris        text[]      NOT NULL DEFAULT '{}',
    jwks_url             text        NOT NULL DEFAULT '',
    audiences            text[]      NOT NULL DEFAULT '{}',
    -- {"groups": path, "email": path, "name": path}.
    claim_paths          jsonb       NOT NULL DEFAULT '{}',
    -- The binding rules in priority order, as auth.v1.BindingRule in protojson (a list).
    rules                jsonb       NOT NULL DEFAULT '[]',
    created_at           timestamptz NOT NULL DEFAULT now(),
    updated_at           timestamptz NOT NULL DEFAULT now(),
    UNIQUE (tenant_id, name)
);

-- Who a principal is at an identity provider: linked by issuer and subject, never by email.
CREATE TABLE principal_identities (
    principal_id   uuid        PRIMARY KEY REFERENCES principals (id) ON DELETE CASCADE,
    tenant_id      uuid        NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    issuer         text        NOT NULL,
    subject        text        NOT NULL CHECK (length(subject) BETWEEN 1 AND 255),
    auth_method_id uuid        REFERENCES auth_methods (id) ON DELETE SET NULL,
    last_login_at  timestamptz NOT NULL DEFAULT now(),
    UNIQUE (tenant_id, issuer, subject)
);

-- A role binding from a binding rule is replaced at each sign-in; one made through the API stays.
ALTER TABLE role_bindings
    ADD COLUMN source text NOT NULL DEFAULT 'manual' CHECK (source IN ('manual', 'rule'));

-- Authorization code and device flows in progress: single use, short-lived.
CREATE TABLE auth_flows (
    -- SHA-256 of the state (code flow) or of the handle (device flow); neither is stored.
    state_hash     bytea       PRIMARY KEY,
    auth_method_id uuid        NOT NULL REFERENCES auth_methods (id) ON DELETE CASCADE,
    kind           text        NOT NULL CHECK (kind IN ('browser', 'cli', 'device')),
    redirect_uri   text        NOT NULL DEFAULT '',
    nonce          text        NOT NULL DEFAULT '',
    -- The PKCE verifier (code flow) or the device code (device flow), sealed.
    secret_sealed  bytea       NOT NULL,
    -- Where the dashboard goes after its sign-in (a path of this deployment).
    return_to      text        NOT NULL DEFAULT '',
    created_at     timestamptz NOT NULL DEFAULT now(),
    expires_at     timestamptz NOT NULL,
    used_at        timestamptz
);
CREATE INDEX auth_flows_expiry ON auth_flows (expires_at);

-- Sessions a sign-in started: the dashboard's cookie or a bearer token "bcs_<id>_<secret>".
CREATE TABLE sessions (
    id             text        PRIMARY KEY,
    tenant_id      uuid        NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    principal_id   uuid        NOT NULL REFERENCES principals (id) ON DELETE CASCADE,
    auth_method_id uuid        REFERENCES auth_methods (id) ON DELETE CASCADE,
    kind           text        NOT NULL CHECK (kind IN ('browser', 'cli', 'token')),
    -- SHA-256 of the secret part; the secret itself is never stored.
    secret_hash    bytea       NOT NULL,
    created_at     timestamptz NOT NULL DEFAULT now(),
    last_used_at   timestamptz NOT NULL DEFAULT now(),
    -- The absolute end; the idle timeout ends it sooner (last_used_at + idle).
    expires_at     timestamptz NOT NULL,
    revoked_at     timestamptz
);
CREATE INDEX sessions_tenant ON sessions (tenant_id, created_at DESC);
CREATE INDEX sessions_principal ON sessions (principal_id);
CREATE INDEX sessions_expiry ON sessions (expires_at);
