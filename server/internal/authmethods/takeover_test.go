package authmethods_test

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
	"github.com/better-compute/better-compute/internal/dbtest"
	"github.com/better-compute/better-compute/server"
	"github.com/better-compute/better-compute/server/servertest"
)

// idp is an identity provider of the tests: an RSA key whose JWKS it serves on loopback at
// {URL}/keys. Its issuer is its URL.
type idp struct {
	URL string
	key *rsa.PrivateKey
}

func newIdP(t *testing.T) *idp {
	t.Helper()
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	p := &idp{key: key}
	jwks, err := json.Marshal(jose.JSONWebKeySet{Keys: []jose.JSONWebKey{{Key: &key.PublicKey, KeyID: "k1", Algorithm: "RS256", Use: "sig"}}})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/keys" {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(jwks)
	}))
	t.Cleanup(srv.Close)
	p.URL = srv.URL
	return p
}

// keys is the provider's JWKS URL.
func (p *idp) keys() string { return p.URL + "/keys" }

// mint signs a token with the provider's key, for any issuer, audience and subject.
func (p *idp) mint(t *testing.T, issuer, audience, subject string) string {
	t.Helper()
	signer, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.RS256, Key: jose.JSONWebKey{Key: p.key, KeyID: "k1"}}, nil)
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

// jwtMethod is a JWT method of issuer with keys at jwksURL for audience, making every subject a
// viewer of tenant (empty: the method's own).
func jwtMethod(name, issuer, jwksURL, audience, tenant string) *authv1.AuthMethod {
	return &authv1.AuthMethod{
		Name: name, Kind: authv1.AuthMethodKind_AUTH_METHOD_KIND_JWT, Issuer: issuer, JwksUrl: jwksURL, Audiences: []string{audience},
		Rules: []*authv1.BindingRule{{Priority: 1, Roles: []iamv1.Role{iamv1.Role_ROLE_VIEWER}, TenantId: tenant}},
	}
}

// privateEnv is an API that lets issuers be loopback http URLs (auth.allowPrivateIssuers).
func privateEnv(t *testing.T) *servertest.Env {
	t.Helper()
	return servertest.Start(t, dbtest.Pool(t), func(o *server.Options) { o.Auth.AllowPrivateIssuers = true })
}

// exchange signs in through a JWT method of tenant and returns the login.
func exchange(t *testing.T, env *servertest.Env, tenant, method, token string) (*authv1.Login, error) {
	t.Helper()
	res, err := authv1connect.NewAuthServiceClient(http.DefaultClient, env.URL).ExchangeToken(t.Context(),
		&authv1.ExchangeTokenRequest{Tenant: tenant, Method: method, Token: token})
	return res.GetLogin(), err
}

// makeOwner binds owner to a principal, as an owner of its tenant (key).
func makeOwner(t *testing.T, env *servertest.Env, key, principal string) {
	t.Helper()
	if _, err := env.IAM(key).CreateRoleBinding(t.Context(), &iamv1.CreateRoleBindingRequest{PrincipalId: principal, Role: iamv1.Role_ROLE_OWNER}); err != nil {
		t.Fatal(err)
	}
}

// nonOwnerAdmin is a key of a new service account that is admin, not owner, of the tenant of
// ownerKey.
func nonOwnerAdmin(t *testing.T, env *servertest.Env, ownerKey, name string) string {
	t.Helper()
	ctx := t.Context()
	c := env.IAM(ownerKey)
	p, err := c.CreatePrincipal(ctx, &iamv1.CreatePrincipalRequest{Kind: iamv1.PrincipalKind_PRINCIPAL_KIND_SERVICE_ACCOUNT, Name: name})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.CreateRoleBinding(ctx, &iamv1.CreateRoleBindingRequest{PrincipalId: p.GetPrincipal().GetId(), Role: iamv1.Role_ROLE_ADMIN}); err != nil {
		t.Fatal(err)
	}
	k, err := c.CreateApiKey(ctx, &iamv1.CreateApiKeyRequest{PrincipalId: p.GetPrincipal().GetId(), Name: name})
	if err != nil {
		t.Fatal(err)
	}
	return k.GetKey()
}

// insertMethod stores a method as the API would, without its checks: what an admin would have
// if the issuer check were bypassed.
func insertMethod(t *testing.T, env *servertest.Env, tenant uuid.UUID, m *authv1.AuthMethod) {
	t.Helper()
	rules := `[{"priority":1,"roles":["ROLE_VIEWER"]}]`
	if tid := m.GetRules()[0].GetTenantId(); tid != "" {
		rules = `[{"priority":1,"roles":["ROLE_VIEWER"],"tenantId":"` + tid + `"}]`
	}
	if _, err := env.Pool.Exec(t.Context(), `INSERT INTO auth_methods (id, tenant_id, name, kind, issuer, jwks_url, audiences, rules)
		VALUES ($1, $2, $3, 'jwt', $4, $5, $6, $7)`, uuid.Must(uuid.NewV7()), tenant, m.GetName(), m.GetIssuer(), m.GetJwksUrl(), m.GetAudiences(), rules); err != nil {
		t.Fatal(err)
	}
}

// wantNotOwnerSession checks that a login is not the owner principal's and holds no owner role.
func wantNotOwnerSession(t *testing.T, env *servertest.Env, login *authv1.Login, owner string) {
	t.Helper()
	if login.GetPrincipal().GetId() == owner {
		t.Fatalf("the attacker's token signed in as the owner principal %s", owner)
	}
	me, err := env.IAM(login.GetSessionToken()).WhoAmI(t.Context(), &iamv1.WhoAmIRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if slices.Contains(me.GetRoles(), iamv1.Role_ROLE_OWNER) || me.GetPrincipal().GetId() == owner {
		t.Fatalf("the attacker's session is %v with roles %v: an owner", me.GetPrincipal(), me.GetRoles())
	}
}

// TestAdminCannotBecomeOwnerThroughAnotherIssuer is issue 31's attack: an admin (not an owner)
// creates a JWT method naming the issuer of the method the owner signs in with, with a JWKS
// URL of the admin's, mints a token for the owner's subject and exchanges it. The method is
// refused; and were it stored anyway, its sign-in would make a principal of its own, not the
// owner's.
func TestAdminCannotBecomeOwnerThroughAnotherIssuer(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	env := privateEnv(t)
	corp, evil := newIdP(t), newIdP(t)
	root := client(env, env.AdminKey)
	if _, err := root.CreateAuthMethod(ctx, &authv1.CreateAuthMethodRequest{AuthMethod: jwtMethod("corp", corp.URL, corp.keys(), "bc", "")}); err != nil {
		t.Fatal(err)
	}
	alice, err := exchange(t, env, "root", "corp", corp.mint(t, corp.URL, "bc", "alice"))
	if err != nil {
		t.Fatal(err)
	}
	owner := alice.GetPrincipal().GetId()
	makeOwner(t, env, env.AdminKey, owner)

	mallory := client(env, nonOwnerAdmin(t, env, env.AdminKey, "mallory"))
	_, err = mallory.CreateAuthMethod(ctx, &authv1.CreateAuthMethodRequest{AuthMethod: jwtMethod("evil", corp.URL, evil.keys(), "evil", "")})
	wantIssuerRefused(t, err)
	// The same keys under another name: allowed by the issuer check, but it could reach the
	// owner (same issuer), so only an owner may add it; and it links identities of its own.
	_, err = mallory.CreateAuthMethod(ctx, &authv1.CreateAuthMethodRequest{AuthMethod: jwtMethod("corp2", corp.URL, corp.keys(), "bc", "")})
	wantCode(t, err, connect.CodePermissionDenied)
	if _, err := root.CreateAuthMethod(ctx, &authv1.CreateAuthMethodRequest{AuthMethod: jwtMethod("corp2", corp.URL, corp.keys(), "bc", "")}); err != nil {
		t.Fatal(err)
	}
	other, err := exchange(t, env, "root", "corp2", corp.mint(t, corp.URL, "bc", "alice"))
	if err != nil {
		t.Fatal(err)
	}
	wantNotOwnerSession(t, env, other, owner)
	// Without an issuer, iss is unchecked: refused too.
	_, err = mallory.CreateAuthMethod(ctx, &authv1.CreateAuthMethodRequest{AuthMethod: jwtMethod("evil", "", evil.keys(), "evil", "")})
	wantField(t, err, "auth_method.issuer")

	// Even stored without the API's checks, the method's sign-in is not the owner's.
	insertMethod(t, env, rootTenant(t, env), jwtMethod("evil", corp.URL, evil.keys(), "evil", ""))
	login, err := exchange(t, env, "root", "evil", evil.mint(t, corp.URL, "evil", "alice"))
	if err != nil {
		t.Fatal(err)
	}
	wantNotOwnerSession(t, env, login, owner)
	// The owner still signs in as herself through her method.
	again, err := exchange(t, env, "root", "corp", corp.mint(t, corp.URL, "bc", "alice"))
	if err != nil || again.GetPrincipal().GetId() != owner {
		t.Fatalf("the owner's own sign-in: %v %v, want principal %s", again.GetPrincipal(), err, owner)
	}
}

// wantIssuerRefused checks that err refuses a method for its issuer.
func wantIssuerRefused(t *testing.T, err error) {
	t.Helper()
	if c := connect.CodeOf(err); (c != connect.CodeInvalidArgument && c != connect.CodeAlreadyExists) || !strings.Contains(err.Error(), "issuer") {
		t.Fatalf("error = %v, want the issuer refused", err)
	}
}

// TestRootAdminCannotBecomeChildOwner: the same attack by an admin of the root tenant, whose
// method's rules send the token to a child tenant whose owner signs in through the child's own
// method.
func TestRootAdminCannotBecomeChildOwner(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	env := privateEnv(t)
	corp, evil := newIdP(t), newIdP(t)
	child, err := env.IAM(env.AdminKey).CreateTenant(ctx, &iamv1.CreateTenantRequest{Name: "research"})
	if err != nil {
		t.Fatal(err)
	}
	childID := child.GetTenant().GetId()
	childOwner := child.GetOwnerApiKey()
	if _, err := client(env, childOwner).CreateAuthMethod(ctx, &authv1.CreateAuthMethodRequest{AuthMethod: jwtMethod("corp", corp.URL, corp.keys(), "bc", "")}); err != nil {
		t.Fatal(err)
	}
	bob, err := exchange(t, env, "research", "corp", corp.mint(t, corp.URL, "bc", "bob"))
	if err != nil {
		t.Fatal(err)
	}
	owner := bob.GetPrincipal().GetId()
	makeOwner(t, env, childOwner, owner)

	mallory := client(env, nonOwnerAdmin(t, env, env.AdminKey, "mallory"))
	// The child's method is in a tenant the rules name: its issuer is refused with other keys.
	_, err = mallory.CreateAuthMethod(ctx, &authv1.CreateAuthMethodRequest{AuthMethod: jwtMethod("evil", corp.URL, evil.keys(), "evil", childID)})
	wantIssuerRefused(t, err)
	// With the child's keys it could reach the child's owner: only a root owner may add it.
	_, err = mallory.CreateAuthMethod(ctx, &authv1.CreateAuthMethodRequest{AuthMethod: jwtMethod("evil", corp.URL, corp.keys(), "evil", childID)})
	wantCode(t, err, connect.CodePermissionDenied)
	// Without rules naming the child it reaches nobody there.
	if _, err := mallory.CreateAuthMethod(ctx, &authv1.CreateAuthMethodRequest{AuthMethod: jwtMethod("evil", corp.URL, evil.keys(), "evil", "")}); err != nil {
		t.Fatal(err)
	}
	// Nor may the admin then point it at the child: the update is checked as the create.
	_, err = mallory.UpdateAuthMethod(ctx, &authv1.UpdateAuthMethodRequest{AuthMethod: jwtMethod("evil", corp.URL, evil.keys(), "evil", childID)})
	wantIssuerRefused(t, err)
	if _, err := mallory.DeleteAuthMethod(ctx, &authv1.DeleteAuthMethodRequest{Name: "evil"}); err != nil {
		t.Fatal(err)
	}

	insertMethod(t, env, rootTenant(t, env), jwtMethod("evil", corp.URL, evil.keys(), "evil", childID))
	login, err := exchange(t, env, "root", "evil", evil.mint(t, corp.URL, "evil", "bob"))
	if err != nil {
		t.Fatal(err)
	}
	if login.GetTenant().GetId() != childID {
		t.Fatalf("signed in to tenant %v, want the child", login.GetTenant())
	}
	wantNotOwnerSession(t, env, login, owner)
}

// TestNonOwnerCannotChangeOwnersMethod: a method through which an owner signs in can be
// changed (its keys, issuer or rules) only by an owner: otherwise an admin would point it at
// keys of their own and sign in as the owner. Nor may an admin delete it, which would lock the
// owner out of their sign-in.
func TestNonOwnerCannotChangeOwnersMethod(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	env := privateEnv(t)
	corp, evil := newIdP(t), newIdP(t)
	root := client(env, env.AdminKey)
	for _, m := range []*authv1.AuthMethod{jwtMethod("corp", corp.URL, corp.keys(), "bc", ""), jwtMethod("ci", evil.URL, evil.keys(), "ci", "")} {
		if _, err := root.CreateAuthMethod(ctx, &authv1.CreateAuthMethodRequest{AuthMethod: m}); err != nil {
			t.Fatal(err)
		}
	}
	alice, err := exchange(t, env, "root", "corp", corp.mint(t, corp.URL, "bc", "alice"))
	if err != nil {
		t.Fatal(err)
	}
	makeOwner(t, env, env.AdminKey, alice.GetPrincipal().GetId())
	if _, err := exchange(t, env, "root", "ci", evil.mint(t, evil.URL, "ci", "runner")); err != nil {
		t.Fatal(err)
	}

	mallory := client(env, nonOwnerAdmin(t, env, env.AdminKey, "mallory"))
	for _, m := range []*authv1.AuthMethod{
		jwtMethod("corp", corp.URL, evil.keys(), "bc", ""), // its keys
		jwtMethod("corp", corp.URL, corp.keys(), "bc", ""), // even unchanged
	} {
		_, err := mallory.UpdateAuthMethod(ctx, &authv1.UpdateAuthMethodRequest{AuthMethod: m})
		wantCode(t, err, connect.CodePermissionDenied)
	}
	if _, err := exchange(t, env, "root", "corp", evil.mint(t, corp.URL, "bc", "alice")); connect.CodeOf(err) != connect.CodeUnauthenticated {
		t.Fatalf("a token of the admin's keys through the owner's method: %v, want unauthenticated", err)
	}
	// Nor may the admin delete it: the owner would lose the sign-in. The method and its
	// sessions stay.
	_, err = mallory.DeleteAuthMethod(ctx, &authv1.DeleteAuthMethodRequest{Name: "corp"})
	wantCode(t, err, connect.CodePermissionDenied)
	if _, err := exchange(t, env, "root", "corp", corp.mint(t, corp.URL, "bc", "alice")); err != nil {
		t.Fatalf("the owner's sign-in after the refused delete: %v", err)
	}
	// A method that reaches no owner is the admin's to change or delete; an owner changes either.
	if _, err := mallory.UpdateAuthMethod(ctx, &authv1.UpdateAuthMethodRequest{AuthMethod: jwtMethod("ci", evil.URL, evil.keys(), "ci2", "")}); err != nil {
		t.Fatal(err)
	}
	if _, err := root.UpdateAuthMethod(ctx, &authv1.UpdateAuthMethodRequest{AuthMethod: jwtMethod("corp", corp.URL, corp.keys(), "bc2", "")}); err != nil {
		t.Fatal(err)
	}
	if _, err := mallory.DeleteAuthMethod(ctx, &authv1.DeleteAuthMethodRequest{Name: "ci"}); err != nil {
		t.Fatal(err)
	}
}

// TestDeletedMethodsIdentitiesStayItsOwn: a method deleted and made again with the same issuer
// and keys does not adopt the principals of the one it replaces: new method, new identities.
func TestDeletedMethodsIdentitiesStayItsOwn(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	env := privateEnv(t)
	corp := newIdP(t)
	root := client(env, env.AdminKey)
	if _, err := root.CreateAuthMethod(ctx, &authv1.CreateAuthMethodRequest{AuthMethod: jwtMethod("corp", corp.URL, corp.keys(), "bc", "")}); err != nil {
		t.Fatal(err)
	}
	first, err := exchange(t, env, "root", "corp", corp.mint(t, corp.URL, "bc", "alice"))
	if err != nil {
		t.Fatal(err)
	}
	owner := first.GetPrincipal().GetId()
	makeOwner(t, env, env.AdminKey, owner)
	if _, err := root.DeleteAuthMethod(ctx, &authv1.DeleteAuthMethodRequest{Name: "corp"}); err != nil {
		t.Fatal(err)
	}
	for range 2 { // twice: the principal names "corp:alice" and its hashed form are both taken then
		if _, err := root.CreateAuthMethod(ctx, &authv1.CreateAuthMethodRequest{AuthMethod: jwtMethod("corp", corp.URL, corp.keys(), "bc", "")}); err != nil {
			t.Fatal(err)
		}
		login, err := exchange(t, env, "root", "corp", corp.mint(t, corp.URL, "bc", "alice"))
		if err != nil {
			t.Fatal(err)
		}
		wantNotOwnerSession(t, env, login, owner)
		if _, err := root.DeleteAuthMethod(ctx, &authv1.DeleteAuthMethodRequest{Name: "corp"}); err != nil {
			t.Fatal(err)
		}
	}
}
