-- The machine PKI: the deployment's trust domain and its authorities (root CA, node CAs,
-- internal CA, JoinService signing key). Private keys are sealed under the deployment secret
-- (seal purpose "pki", the row's id and kind as associated data); nothing here is secret in the
-- clear.

-- One row once `pki init` has run.
CREATE TABLE pki_settings (
    singleton    boolean     PRIMARY KEY DEFAULT true CHECK (singleton),
    -- The SPIFFE trust domain of every identity: a lower-case DNS name.
    trust_domain text        NOT NULL CHECK (trust_domain ~ '^[a-z0-9]([a-z0-9.-]*[a-z0-9])?$' AND length(trust_domain) <= 253),
    created_at   timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE pki_authorities (
    id          uuid        PRIMARY KEY,
    kind        text        NOT NULL CHECK (kind IN ('root', 'node', 'internal', 'join')),
    -- The CA certificate; NULL for the join key, which has no certificate.
    cert_pem    text        CHECK ((cert_pem IS NULL) = (kind = 'join')),
    -- The public key, PKIX DER; Load checks that the opened private key matches it.
    public_key  bytea       NOT NULL,
    -- The private key, PKCS #8 DER sealed under the deployment secret.
    sealed_key  bytea       NOT NULL,
    -- The certificate's NotAfter; NULL for the join key.
    not_after   timestamptz CHECK ((not_after IS NULL) = (kind = 'join')),
    created_at  timestamptz NOT NULL DEFAULT now(),
    -- NULL while the authority is its kind's issuer. A rotated-out node CA gets the end of its
    -- overlap here, possibly in the future: it is still accepted until then, never after.
    retired_at  timestamptz
);
-- At most one issuer of each kind; rotation retires the old one in the same transaction.
CREATE UNIQUE INDEX pki_authorities_issuer ON pki_authorities (kind) WHERE retired_at IS NULL;
