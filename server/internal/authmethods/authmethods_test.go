package authmethods_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"connectrpc.com/connect"
	"github.com/google/uuid"

	authv1 "github.com/better-compute/better-compute/gen/go/bettercompute/auth/v1"
	"github.com/better-compute/better-compute/gen/go/bettercompute/auth/v1/authv1connect"
	iamv1 "github.com/better-compute/better-compute/gen/go/bettercompute/iam/v1"
	"github.com/better-compute/better-compute/internal/auth"
	"github.com/better-compute/better-compute/internal/dbtest"
	"github.com/better-compute/better-compute/server"
	"github.com/better-compute/better-compute/server/internal/authmethods"
	"github.com/better-compute/better-compute/server/servertest"
)

func TestMain(m *testing.M) { dbtest.Main(m) }

func wantCode(t *testing.T, err error, code connect.Code) {
	t.Helper()
	if connect.CodeOf(err) != code {
		t.Fatalf("error = %v, want code %v", err, code)
	}
}

// wantField checks that err is InvalidArgument naming field.
func wantField(t *testing.T, err error, field string) {
	t.Helper()
	wantCode(t, err, connect.CodeInvalidArgument)
	if !strings.Contains(err.Error(), field) {
		t.Fatalf("error %v, want it to name %s", err, field)
	}
}

func client(env *servertest.Env, key string) authv1connect.AuthServiceClient {
	return authv1connect.NewAuthServiceClient(env.HTTPClient(key), env.URL)
}

func oidc(name string) *authv1.AuthMethod {
	return &authv1.AuthMethod{
		Name: name, DisplayName: "Okta", Kind: authv1.AuthMethodKind_AUTH_METHOD_KIND_OIDC,
		Issuer: "https://idp.example.com", ClientId: "client-1", ClientSecret: "very-secret-value",
		RedirectUris: []string{"https://compute.example.com/api/auth/callback", "http://127.0.0.1/callback"},
		Rules: []*authv1.BindingRule{
			{Priority: 20, Roles: []iamv1.Role{iamv1.Role_ROLE_VIEWER}},
			{Priority: 10, Selectors: []*authv1.ClaimSelector{{Claim: "groups", Values: []string{"platform"}}}, Roles: []iamv1.Role{iamv1.Role_ROLE_ADMIN}},
		},
	}
}

func jwt(name string) *authv1.AuthMethod {
	return &authv1.AuthMethod{
		Name: name, Kind: authv1.AuthMethodKind_AUTH_METHOD_KIND_JWT,
		Issuer: "https://token.actions.githubusercontent.com", Audiences: []string{"better-compute"},
	}
}

func TestCreateListUpdateDelete(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	env := servertest.New(t)
	c := client(env, env.AdminKey)

	created, err := c.CreateAuthMethod(ctx, &authv1.CreateAuthMethodRequest{AuthMethod: oidc("okta")})
	if err != nil {
		t.Fatal(err)
	}
	m := created.GetAuthMethod()
	if m.GetId() == "" || m.GetClientSecret() != "" || m.GetClaimPaths().GetGroups() != "groups" ||
		len(m.GetRules()) != 2 || m.GetRules()[0].GetPriority() != 10 {
		t.Fatalf("created %v: want an id, no secret, default claim paths, rules by priority", m)
	}
	// The secret is sealed, bound to the method.
	var sealed []byte
	if err := env.Pool.QueryRow(ctx, "SELECT client_secret_sealed FROM auth_methods WHERE id = $1", m.GetId()).Scan(&sealed); err != nil {
		t.Fatal(err)
	}
	sealer, err := auth.NewClientSecretSealer(servertest.Secret)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(sealed), "very-secret-value") {
		t.Fatal("the client secret is stored in the clear")
	}
	if s, err := auth.OpenClientSecret(sealer, uuid.MustParse(m.GetId()), sealed); err != nil || s != "very-secret-value" {
		t.Fatalf("open: %q %v", s, err)
	}
	_, err = c.CreateAuthMethod(ctx, &authv1.CreateAuthMethodRequest{AuthMethod: oidc("okta")})
	wantCode(t, err, connect.CodeAlreadyExists)
	if _, err := c.CreateAuthMethod(ctx, &authv1.CreateAuthMethodRequest{AuthMethod: jwt("ci")}); err != nil {
		t.Fatal(err)
	}

	list, err := c.ListAuthMethods(ctx, &authv1.ListAuthMethodsRequest{})
	if err != nil || len(list.GetAuthMethods()) != 2 || list.GetAuthMethods()[0].GetName() != "ci" || list.GetAuthMethods()[1].GetClientSecret() != "" {
		t.Fatalf("list %v %v", list, err)
	}

	// An update without a secret keeps the stored one.
	upd := oidc("okta")
	upd.ClientSecret, upd.DisplayName, upd.Rules = "", "Okta SSO", nil
	updated, err := c.UpdateAuthMethod(ctx, &authv1.UpdateAuthMethodRequest{AuthMethod: upd})
	if err != nil || updated.GetAuthMethod().GetDisplayName() != "Okta SSO" || len(updated.GetAuthMethod().GetRules()) != 0 {
		t.Fatalf("update %v %v", updated, err)
	}
	var again []byte
	if err := env.Pool.QueryRow(ctx, "SELECT client_secret_sealed FROM auth_methods WHERE id = $1", m.GetId()).Scan(&again); err != nil {
		t.Fatal(err)
	}
	if s, err := auth.OpenClientSecret(sealer, uuid.MustParse(m.GetId()), again); err != nil || s != "very-secret-value" {
		t.Fatalf("secret after update: %q %v", s, err)
	}
	_, err = c.UpdateAuthMethod(ctx, &authv1.UpdateAuthMethodRequest{AuthMethod: oidc("nope")})
	wantCode(t, err, connect.CodeNotFound)

	// Sessions the method started end with it.
	root := rootTenant(t, env)
	p, err := auth.SignIn(ctx, env.Pool, auth.SignInParams{
		Method: auth.SignInMethod{ID: uuid.MustParse(m.GetId()), TenantID: root, Name: "okta"},
		Issuer: "https://idp.example.com", Subject: "u1", Roles: []auth.Role{auth.RoleViewer},
	})
	if err != nil {
		t.Fatal(err)
	}
	methodID := uuid.MustParse(m.GetId())
	for range 2 {
		if _, err := auth.StartSession(ctx, env.Pool, auth.SessionLifetimes{}, auth.SessionParams{
			TenantID: p.TenantID, PrincipalID: p.ID, AuthMethodID: &methodID, Kind: auth.SessionCLI,
		}); err != nil {
			t.Fatal(err)
		}
	}
	deleted, err := c.DeleteAuthMethod(ctx, &authv1.DeleteAuthMethodRequest{Name: "okta"})
	if err != nil || deleted.GetSessionsEnded() != 2 {
		t.Fatalf("delete %v %v, want 2 sessions ended", deleted, err)
	}
	_, err = c.DeleteAuthMethod(ctx, &authv1.DeleteAuthMethodRequest{Name: "okta"})
	wantCode(t, err, connect.CodeNotFound)
}

func rootTenant(t *testing.T, env *servertest.Env) uuid.UUID {
	t.Helper()
	root, err := auth.EnsureRootTenant(t.Context(), env.Pool)
	if err != nil {
		t.Fatal(err)
	}
	return root.ID
}

func TestValidation(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	env := servertest.New(t)
	c := client(env, env.AdminKey)
	for _, tc := range []struct {
		field  string
		change func(m *authv1.AuthMethod)
	}{
		{"auth_method.name", func(m *authv1.AuthMethod) { m.Name = "Okta" }},
		{"auth_method.name", func(m *authv1.AuthMethod) { m.Name = strings.Repeat("a", 33) }},
		{"auth_method.kind", func(m *authv1.AuthMethod) { m.Kind = authv1.AuthMethodKind_AUTH_METHOD_KIND_UNSPECIFIED }},
		{"auth_method.issuer", func(m *authv1.AuthMethod) { m.Issuer = "http://idp.example.com" }},
		{"auth_method.issuer", func(m *authv1.AuthMethod) { m.Issuer = "https://127.0.0.1/" }},
		{"auth_method.issuer", func(m *authv1.AuthMethod) { m.Issuer = "https://idp.example.com/?x=1" }},
		{"auth_method.client_id", func(m *authv1.AuthMethod) { m.ClientId = "" }},
		{"auth_method.client_secret", func(m *authv1.AuthMethod) { m.ClientSecret = "" }},
		{"auth_method.redirect_uris[1]", func(m *authv1.AuthMethod) { m.RedirectUris[1] = "/callback" }},
		{"auth_method.redirect_uris", func(m *authv1.AuthMethod) {
			for i := range 17 {
				m.RedirectUris = append(m.RedirectUris, fmt.Sprintf("https://a.example.com/%d", i))
			}
		}},
		{"auth_method.scopes[0]", func(m *authv1.AuthMethod) { m.Scopes = []string{strings.Repeat("s", 129)} }},
		{"auth_method.scopes", func(m *authv1.AuthMethod) { m.Scopes = make([]string, 33) }},
		{"auth_method.claim_paths.groups", func(m *authv1.AuthMethod) { m.ClaimPaths = &authv1.ClaimPaths{Groups: "a..b"} }},
		{"auth_method.rules[1].priority", func(m *authv1.AuthMethod) { m.Rules[1].Priority = 20 }},
		{"auth_method.rules[0].roles[0]", func(m *authv1.AuthMethod) { m.Rules[0].Roles = []iamv1.Role{iamv1.Role_ROLE_OWNER} }},
		{"auth_method.rules[1].selectors[0].values", func(m *authv1.AuthMethod) { m.Rules[1].Selectors[0].Values = nil }},
		{"auth_method.rules[0].tenant_id", func(m *authv1.AuthMethod) { m.Rules[0].TenantId = "nope" }},
		{"auth_method.rules[0].tenant_id", func(m *authv1.AuthMethod) { m.Rules[0].TenantId = uuid.NewString() }},
	} {
		m := oidc("okta")
		tc.change(m)
		_, err := c.CreateAuthMethod(ctx, &authv1.CreateAuthMethodRequest{AuthMethod: m})
		wantField(t, err, tc.field)
	}
	for _, tc := range []struct {
		field  string
		change func(m *authv1.AuthMethod)
	}{
		{"auth_method.audiences", func(m *authv1.AuthMethod) { m.Audiences = nil }},
		{"auth_method.issuer", func(m *authv1.AuthMethod) { m.Issuer = "" }},
		{"auth_method.jwks_url", func(m *authv1.AuthMethod) { m.JwksUrl = "ftp://keys.example.com" }},
		{"auth_method.client_secret", func(m *authv1.AuthMethod) { m.ClientSecret = "x" }},
	} {
		m := jwt("ci")
		tc.change(m)
		_, err := c.CreateAuthMethod(ctx, &authv1.CreateAuthMethodRequest{AuthMethod: m})
		wantField(t, err, tc.field)
	}
	// A JWT method with a JWKS URL names its issuer too.
	m := jwt("ci")
	m.Issuer, m.JwksUrl = "", "https://keys.example.com/jwks.json"
	_, err := c.CreateAuthMethod(ctx, &authv1.CreateAuthMethodRequest{AuthMethod: m})
	wantField(t, err, "auth_method.issuer")
	m.Issuer = "https://ci.example.com"
	if _, err := c.CreateAuthMethod(ctx, &authv1.CreateAuthMethodRequest{AuthMethod: m}); err != nil {
		t.Fatal(err)
	}
}

func TestPrivateIssuersWhenAllowed(t *testing.T) {
	t.Parallel()
	env := servertest.Start(t, dbtest.Pool(t), func(o *server.Options) { o.Auth.AllowPrivateIssuers = true })
	m := oidc("local")
	m.Issuer = "http://127.0.0.1:5556/dex"
	if _, err := client(env, env.AdminKey).CreateAuthMethod(t.Context(), &authv1.CreateAuthMethodRequest{AuthMethod: m}); err != nil {
		t.Fatal(err)
	}
}

func TestRuleTenants(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	env := servertest.New(t)
	c := client(env, env.AdminKey)
	child, err := env.IAM(env.AdminKey).CreateTenant(ctx, &iamv1.CreateTenantRequest{Name: "research"})
	if err != nil {
		t.Fatal(err)
	}
	other, err := env.IAM(env.AdminKey).CreateTenant(ctx, &iamv1.CreateTenantRequest{Name: "other"})
	if err != nil {
		t.Fatal(err)
	}
	// The root tenant's methods may send principals to tenants below it.
	m := oidc("okta")
	m.Rules[0].TenantId = child.GetTenant().GetId()
	if _, err := c.CreateAuthMethod(ctx, &authv1.CreateAuthMethodRequest{AuthMethod: m}); err != nil {
		t.Fatal(err)
	}
	// Another tenant's may name only itself.
	cc := client(env, child.GetOwnerApiKey())
	m = oidc("okta")
	m.Rules[0].TenantId = child.GetTenant().GetId()
	if _, err := cc.CreateAuthMethod(ctx, &authv1.CreateAuthMethodRequest{AuthMethod: m}); err != nil {
		t.Fatal(err)
	}
	m = oidc("okta2")
	m.Rules[0].TenantId = other.GetTenant().GetId()
	_, err = cc.CreateAuthMethod(ctx, &authv1.CreateAuthMethodRequest{AuthMethod: m})
	wantField(t, err, "auth_method.rules[0].tenant_id")
	// Each tenant sees its own methods only.
	list, err := cc.ListAuthMethods(ctx, &authv1.ListAuthMethodsRequest{})
	if err != nil || len(list.GetAuthMethods()) != 1 || list.GetAuthMethods()[0].GetTenantId() != child.GetTenant().GetId() {
		t.Fatalf("child's list %v %v", list, err)
	}
	_, err = cc.DeleteAuthMethod(ctx, &authv1.DeleteAuthMethodRequest{Name: "okta2"})
	wantCode(t, err, connect.CodeNotFound)
}

func TestCap(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	env := servertest.New(t)
	c := client(env, env.AdminKey)
	for i := range 16 {
		if _, err := c.CreateAuthMethod(ctx, &authv1.CreateAuthMethodRequest{AuthMethod: jwt(fmt.Sprintf("ci-%d", i))}); err != nil {
			t.Fatal(err)
		}
	}
	_, err := c.CreateAuthMethod(ctx, &authv1.CreateAuthMethodRequest{AuthMethod: jwt("ci-16")})
	wantCode(t, err, connect.CodeResourceExhausted)
	if !strings.Contains(err.Error(), "authMethods") {
		t.Fatalf("error %v, want it to name the cap", err)
	}
}

func TestLoginMethods(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	env := servertest.New(t)
	c := client(env, env.AdminKey)
	for _, m := range []*authv1.AuthMethod{oidc("okta"), jwt("ci")} {
		if _, err := c.CreateAuthMethod(ctx, &authv1.CreateAuthMethodRequest{AuthMethod: m}); err != nil {
			t.Fatal(err)
		}
	}
	// Public: no key, no X-Better-Compute header.
	anon := authv1connect.NewAuthServiceClient(http.DefaultClient, env.URL)
	for _, tenant := range []string{"root", rootTenant(t, env).String()} {
		res, err := anon.ListLoginMethods(ctx, &authv1.ListLoginMethodsRequest{Tenant: tenant})
		if err != nil || len(res.GetMethods()) != 1 || res.GetMethods()[0].GetName() != "okta" || res.GetMethods()[0].GetDisplayName() != "Okta" {
			t.Fatalf("login methods of %s: %v %v, want okta only", tenant, res, err)
		}
	}
	for _, tenant := range []string{"nope", uuid.NewString()} {
		res, err := anon.ListLoginMethods(ctx, &authv1.ListLoginMethodsRequest{Tenant: tenant})
		if err != nil || len(res.GetMethods()) != 0 {
			t.Fatalf("unknown tenant %s: %v %v, want none", tenant, res, err)
		}
	}
	_, err := anon.ListLoginMethods(ctx, &authv1.ListLoginMethodsRequest{})
	wantField(t, err, "tenant")
	// A sign-in names a method of the kind it is: a JWT method takes no code flow, an OIDC one
	// exchanges no token, and both are refused as if they did not exist.
	_, err = anon.StartLogin(ctx, &authv1.StartLoginRequest{Tenant: "root", Method: "ci", RedirectUri: "http://127.0.0.1/callback"})
	wantCode(t, err, connect.CodeNotFound)
	_, err = anon.ExchangeToken(ctx, &authv1.ExchangeTokenRequest{Tenant: "root", Method: "okta", Token: "x.y.z"})
	wantCode(t, err, connect.CodeNotFound)
	_, err = anon.StartLogin(ctx, &authv1.StartLoginRequest{Tenant: "root", Method: "okta", RedirectUri: "https://evil.example/cb"})
	wantField(t, err, "redirect_uri")
}

// TestRedirectAllowed: a registered redirect URI matches exactly; a loopback http one whatever
// its port, never another host, scheme or path.
func TestRedirectAllowed(t *testing.T) {
	t.Parallel()
	registered := []string{"https://compute.example.com/api/auth/callback", "http://127.0.0.1/callback"}
	for uri, want := range map[string]bool{
		"https://compute.example.com/api/auth/callback":      true,
		"http://127.0.0.1/callback":                          true,
		"http://127.0.0.1:51234/callback":                    true,
		"http://127.0.0.1:51234/other":                       false,
		"http://127.0.0.1:51234/callback?x=1":                false,
		"http://localhost:51234/callback":                    false,
		"https://127.0.0.1:51234/callback":                   false,
		"https://compute.example.com:8443/api/auth/callback": false,
		"https://evil.example/api/auth/callback":             false,
		"":                                                   false,
	} {
		if got := authmethods.RedirectAllowed(registered, uri); got != want {
			t.Errorf("%q: %v, want %v", uri, got, want)
		}
	}
}

func TestSessions(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	env := servertest.New(t)
	admin := client(env, env.AdminKey)
	created, err := admin.CreateAuthMethod(ctx, &authv1.CreateAuthMethodRequest{AuthMethod: oidc("okta")})
	if err != nil {
		t.Fatal(err)
	}
	root := rootTenant(t, env)
	methodID := uuid.MustParse(created.GetAuthMethod().GetId())
	p, err := auth.SignIn(ctx, env.Pool, auth.SignInParams{
		Method: auth.SignInMethod{ID: methodID, TenantID: root, Name: "okta"},
		Issuer: "https://idp.example.com", Subject: "u1", Roles: []auth.Role{auth.RoleViewer},
	})
	if err != nil {
		t.Fatal(err)
	}
	var sessions []auth.Session
	for range 3 {
		s, err := auth.StartSession(ctx, env.Pool, auth.SessionLifetimes{}, auth.SessionParams{
			TenantID: p.TenantID, PrincipalID: p.ID, AuthMethodID: &methodID, Kind: auth.SessionCLI,
		})
		if err != nil {
			t.Fatal(err)
		}
		sessions = append(sessions, s)
	}
	// A session's bearer token calls the API; whoAmI shows no API key.
	who, err := env.IAM(sessions[0].Token).WhoAmI(ctx, &iamv1.WhoAmIRequest{})
	if err != nil || who.GetPrincipal().GetId() != p.ID.String() || who.GetApiKeyId() != "" {
		t.Fatalf("whoAmI %v %v", who, err)
	}
	// So does the cookie, with the X-Better-Compute header (which HTTPClient sends).
	cookieClient := &http.Client{Transport: cookie{token: sessions[0].Token, next: env.HTTPClient("").Transport}}
	if who, err := iamv1connectWhoAmI(ctx, cookieClient, env.URL); err != nil || who != p.ID.String() {
		t.Fatalf("whoAmI by cookie: %v %v", who, err)
	}

	// Pages, newest first.
	first, err := admin.ListSessions(ctx, &authv1.ListSessionsRequest{PageSize: 2})
	if err != nil || len(first.GetSessions()) != 2 || first.GetNextPageToken() == "" {
		t.Fatalf("first page %v %v", first, err)
	}
	if s := first.GetSessions()[0]; s.GetId() != sessions[2].ID || s.GetMethod() != "okta" || s.GetKind() != "cli" || s.GetPrincipalId() != p.ID.String() {
		t.Fatalf("newest session %v, want %s", s, sessions[2].ID)
	}
	second, err := admin.ListSessions(ctx, &authv1.ListSessionsRequest{PageSize: 2, PageToken: first.GetNextPageToken()})
	if err != nil || len(second.GetSessions()) != 1 || second.GetSessions()[0].GetId() != sessions[0].ID || second.GetNextPageToken() != "" {
		t.Fatalf("second page %v %v", second, err)
	}

	// Revoked, a session is refused and no longer listed.
	if _, err := admin.RevokeSession(ctx, &authv1.RevokeSessionRequest{Id: sessions[1].ID}); err != nil {
		t.Fatal(err)
	}
	_, err = admin.RevokeSession(ctx, &authv1.RevokeSessionRequest{Id: sessions[1].ID})
	wantCode(t, err, connect.CodeNotFound)
	_, err = admin.RevokeSession(ctx, &authv1.RevokeSessionRequest{Id: "not a session"})
	wantField(t, err, "id")
	_, err = env.IAM(sessions[1].Token).WhoAmI(ctx, &iamv1.WhoAmIRequest{})
	wantCode(t, err, connect.CodeUnauthenticated)
	all, err := admin.ListSessions(ctx, &authv1.ListSessionsRequest{})
	if err != nil || len(all.GetSessions()) != 2 {
		t.Fatalf("after revoke %v %v, want 2", all, err)
	}

	// Another tenant neither sees nor revokes them.
	child, err := env.IAM(env.AdminKey).CreateTenant(ctx, &iamv1.CreateTenantRequest{Name: "research"})
	if err != nil {
		t.Fatal(err)
	}
	cc := client(env, child.GetOwnerApiKey())
	if res, err := cc.ListSessions(ctx, &authv1.ListSessionsRequest{}); err != nil || len(res.GetSessions()) != 0 {
		t.Fatalf("child's sessions %v %v", res, err)
	}
	_, err = cc.RevokeSession(ctx, &authv1.RevokeSessionRequest{Id: sessions[0].ID})
	wantCode(t, err, connect.CodeNotFound)

	// Signing out ends the caller's session; with an API key it ends nothing.
	if res, err := admin.SignOut(ctx, &authv1.SignOutRequest{}); err != nil || res.GetEnded() {
		t.Fatalf("sign out with a key: %v %v", res, err)
	}
	if res, err := client(env, sessions[0].Token).SignOut(ctx, &authv1.SignOutRequest{}); err != nil || !res.GetEnded() {
		t.Fatalf("sign out: %v %v", res, err)
	}
	_, err = env.IAM(sessions[0].Token).WhoAmI(ctx, &iamv1.WhoAmIRequest{})
	wantCode(t, err, connect.CodeUnauthenticated)
}

// cookie sends the session cookie instead of a bearer token.
type cookie struct {
	token string
	next  http.RoundTripper
}

func (c cookie) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.AddCookie(&http.Cookie{Name: auth.SessionCookie, Value: c.token})
	return c.next.RoundTrip(r)
}

// iamv1connectWhoAmI calls iam/whoAmI with JSON on its short route, as the dashboard does, and
// returns the principal's id.
func iamv1connectWhoAmI(ctx context.Context, c *http.Client, url string) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url+"/iam/whoAmI", strings.NewReader("{}"))
	if err != nil {
		return "", err
	}
	req.Header.Set("Content-Type", "application/json")
	res, err := c.Do(req)
	if err != nil {
		return "", err
	}
	defer res.Body.Close()
	var body struct {
		Principal struct {
			ID string `json:"id"`
		} `json:"principal"`
	}
	if res.StatusCode != http.StatusOK {
		return "", errors.New(res.Status)
	}
	if err := jsonDecode(res, &body); err != nil {
		return "", err
	}
	return body.Principal.ID, nil
}

func jsonDecode(res *http.Response, v any) error { return json.NewDecoder(res.Body).Decode(v) }

// TestReturnPath: a sign-in lands on a path of this deployment, never on another host, however
// the path tries (protocol-relative, backslashes, tabs and newlines that browsers drop).
func TestReturnPath(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"":                      "/dashboard/",
		"/dashboard/#/nodes":    "/dashboard/#/nodes",
		"//evil.example/":       "/dashboard/",
		"/\\evil.example/":      "/dashboard/",
		"/\t/evil.example/":     "/dashboard/",
		"/\n/evil.example/":     "/dashboard/",
		"/ /evil.example":       "/dashboard/",
		"https://evil.example/": "/dashboard/",
		"dashboard":             "/dashboard/",
	} {
		if got := authmethods.ReturnPath(in); got != want {
			t.Errorf("%q: %q, want %q", in, got, want)
		}
	}
}
