-- What `better-compute doctor` reads of the auth methods (issue 23), to check each provider.

-- name: DoctorAuthMethods :many
-- Every tenant's auth methods with what fetching their provider's discovery document and keys
-- needs, by tenant and name.
SELECT t.name AS tenant_name, m.name, m.kind, m.issuer, m.client_id, m.jwks_url, m.audiences
FROM auth_methods m JOIN tenants t ON t.id = m.tenant_id
ORDER BY t.name, m.name;
