package sso_test

import (
	"crypto/rand"
	"crypto/rsa"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/go-jose/go-jose/v4"
	"github.com/google/uuid"

	authv1 "github.com/better-compute/better-compute/gen/go/bettercompute/auth/v1"
	"github.com/better-compute/better-compute/gen/go/bettercompute/auth/v1/authv1connect"
	iamv1 "github.com/better-compute/better-compute/gen/go/bettercompute/iam/v1"
)

// TestOwnerNotReachableThroughAnotherMethod is issue 31's attack against the real provider:
// Alice signs in through the OIDC method "corp" and is made owner; an admin who is not an owner
// then tries to become her. A JWT method naming the provider's issuer with the admin's own keys
// is refused; one with the provider's keys (which could reach her) needs an owner; and a method
// of the same issuer, even stored without the API's checks, signs in as a principal of its own.
func TestOwnerNotReachableThroughAnotherMethod(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	b := e.browser(t)
	if res := b.signIn(alice); res.StatusCode != http.StatusSeeOther {
		t.Fatalf("callback: %s", res.Status)
	}
	me, err := b.whoAmI(true)
	if err != nil {
		t.Fatal(err)
	}
	owner := me.GetPrincipal().GetId()
	rootIAM := e.api.IAM(e.api.AdminKey)
	if _, err := rootIAM.CreateRoleBinding(ctx, &iamv1.CreateRoleBindingRequest{PrincipalId: owner, Role: iamv1.Role_ROLE_OWNER}); err != nil {
		t.Fatal(err)
	}
	mallory := e.nonOwnerAdmin(t)
	key, jwksURL := serveKeys(t)
	evil := func(name, jwks string) *authv1.AuthMethod {
		return &authv1.AuthMethod{
			Name: name, Kind: authv1.AuthMethodKind_AUTH_METHOD_KIND_JWT, Issuer: e.op.Issuer(), JwksUrl: jwks, Audiences: []string{e.op.ClientID(), "evil"},
			Rules: []*authv1.BindingRule{{Priority: 1, Roles: []iamv1.Role{iamv1.Role_ROLE_VIEWER}}},
		}
	}

	_, err = mallory.CreateAuthMethod(ctx, &authv1.CreateAuthMethodRequest{AuthMethod: evil("evil", jwksURL)})
	if connect.CodeOf(err) != connect.CodeAlreadyExists || !strings.Contains(err.Error(), "auth_method.issuer") {
		t.Fatalf("a JWT method of the provider's issuer with the admin's keys: %v, want already_exists naming the issuer", err)
	}
	_, err = mallory.CreateAuthMethod(ctx, &authv1.CreateAuthMethodRequest{AuthMethod: evil("ci", "")})
	if connect.CodeOf(err) != connect.CodePermissionDenied {
		t.Fatalf("a JWT method of the provider's keys, which could reach the owner, by a non-owner: %v, want permission_denied", err)
	}
	// An owner adds it; the provider's token for Alice then signs in as a principal of its own.
	if _, err := e.admin.CreateAuthMethod(ctx, &authv1.CreateAuthMethodRequest{AuthMethod: evil("ci", "")}); err != nil {
		t.Fatal(err)
	}
	res, err := e.public.ExchangeToken(ctx, &authv1.ExchangeTokenRequest{Tenant: "root", Method: "ci", Token: e.idToken(t, alice)})
	if err != nil {
		t.Fatal(err)
	}
	e.wantNotOwner(t, res.GetLogin(), owner)

	// Bypassing the API's checks, the admin's keys sign as the provider: still not Alice.
	if _, err := e.api.Pool.Exec(ctx, `INSERT INTO auth_methods (id, tenant_id, name, kind, issuer, jwks_url, audiences, rules)
		SELECT $1, id, 'evil', 'jwt', $2, $3, '{evil}', '[{"priority":1,"roles":["ROLE_VIEWER"]}]' FROM tenants WHERE is_root`,
		uuid.Must(uuid.NewV7()), e.op.Issuer(), jwksURL); err != nil {
		t.Fatal(err)
	}
	res, err = e.public.ExchangeToken(ctx, &authv1.ExchangeTokenRequest{Tenant: "root", Method: "evil", Token: mint(t, key, e.op.Issuer(), "evil", alice.ID)})
	if err != nil {
		t.Fatal(err)
	}
	e.wantNotOwner(t, res.GetLogin(), owner)
}

// nonOwnerAdmin is the AuthService of a service account that is admin, not owner, of the root
// tenant.
func (e *env) nonOwnerAdmin(t *testing.T) authv1connect.AuthServiceClient {
	t.Helper()
	c := e.api.IAM(e.api.AdminKey)
	p, err := c.CreatePrincipal(ctx, &iamv1.CreatePrincipalRequest{Kind: iamv1.PrincipalKind_PRINCIPAL_KIND_SERVICE_ACCOUNT, Name: "mallory"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.CreateRoleBinding(ctx, &iamv1.CreateRoleBindingRequest{PrincipalId: p.GetPrincipal().GetId(), Role: iamv1.Role_ROLE_ADMIN}); err != nil {
		t.Fatal(err)
	}
	k, err := c.CreateApiKey(ctx, &iamv1.CreateApiKeyRequest{PrincipalId: p.GetPrincipal().GetId(), Name: "mallory"})
	if err != nil {
		t.Fatal(err)
	}
	return authv1connect.NewAuthServiceClient(e.api.HTTPClient(k.GetKey()), e.api.URL)
}

// wantNotOwner checks that a login is not the owner principal's and holds no owner role.
func (e *env) wantNotOwner(t *testing.T, login *authv1.Login, owner string) {
	t.Helper()
	who, err := e.api.IAM(login.GetSessionToken()).WhoAmI(ctx, &iamv1.WhoAmIRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if who.GetPrincipal().GetId() == owner || slices.Contains(who.GetRoles(), iamv1.Role_ROLE_OWNER) {
		t.Fatalf("signed in as %v with roles %s: the owner", who.GetPrincipal(), roles(who))
	}
}

// serveKeys serves a new RSA key's JWKS on loopback and returns the key and the JWKS URL.
func serveKeys(t *testing.T) (*rsa.PrivateKey, string) {
	t.Helper()
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	jwks, err := json.Marshal(jose.JSONWebKeySet{Keys: []jose.JSONWebKey{{Key: &key.PublicKey, KeyID: "evil", Algorithm: "RS256", Use: "sig"}}})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(jwks)
	}))
	t.Cleanup(srv.Close)
	return key, srv.URL + "/keys"
}

// mint signs a token with key for any issuer, audience and subject.
func mint(t *testing.T, key *rsa.PrivateKey, issuer, audience, subject string) string {
	t.Helper()
	signer, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.RS256, Key: jose.JSONWebKey{Key: key, KeyID: "evil"}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	payload, err := json.Marshal(map[string]any{"iss": issuer, "aud": audience, "sub": subject, "iat": now.Unix(), "exp": now.Add(time.Hour).Unix()})
	if err != nil {
		t.Fatal(err)
	}
	sig, err := signer.Sign(payload)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := sig.CompactSerialize()
	if err != nil {
		t.Fatal(err)
	}
	return raw
}
