// Package sso_test signs in through a real OpenID provider (the zitadel example server, see
// internal/oidctest) against the real API: the dashboard's browser flow, the CLI's code flow,
// a machine's token exchange, and what each must refuse.
package sso_test

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/json"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/go-jose/go-jose/v4"
	"golang.org/x/oauth2"

	authv1 "github.com/better-compute/better-compute/gen/go/bettercompute/auth/v1"
	"github.com/better-compute/better-compute/gen/go/bettercompute/auth/v1/authv1connect"
	iamv1 "github.com/better-compute/better-compute/gen/go/bettercompute/iam/v1"
	"github.com/better-compute/better-compute/gen/go/bettercompute/iam/v1/iamv1connect"
	"github.com/better-compute/better-compute/internal/dbtest"
	"github.com/better-compute/better-compute/internal/oidctest"
	"github.com/better-compute/better-compute/internal/poll"
	"github.com/better-compute/better-compute/server"
	"github.com/better-compute/better-compute/server/servertest"
)

func TestMain(m *testing.M) { dbtest.Main(m) }

var ctx = context.Background()

// The provider's people: Alice is an admin by her name and a viewer by her email's domain; Bob
// a viewer; Carol matches no rule; Dave an operator through the device method (TestDeviceSignIn).
var (
	alice = oidctest.User{ID: "id-alice", Username: "alice", Password: "alice-pw", FirstName: "Alice", LastName: "Admin", Email: "alice@corp.example"}
	bob   = oidctest.User{ID: "id-bob", Username: "bob", Password: "bob-pw", FirstName: "Bob", LastName: "Builder", Email: "bob@corp.example"}
	carol = oidctest.User{ID: "id-carol", Username: "carol", Password: "carol-pw", FirstName: "Carol", LastName: "Outsider", Email: "carol@elsewhere.example"}
	// Dave signs in through the device flow, whose subject at this provider is the username and
	// which only a user whose ID is their username can complete (see internal/oidctest).
	dave = oidctest.User{ID: "dave", Username: "dave", Password: "dave-pw", FirstName: "Dave", LastName: "Device", Email: "dave@corp.example"}
)

// env is the API and a provider, with an OIDC auth method "corp" of the root tenant.
type env struct {
	api *servertest.Env
	op  *oidctest.Provider
	// cliRedirect is the loopback redirect URI registered for the CLI's flow.
	cliRedirect string
	admin       authv1connect.AuthServiceClient
	public      authv1connect.AuthServiceClient
}

func newEnv(t *testing.T, configure func(*server.Options)) *env {
	t.Helper()
	return startEnv(t, oidctest.Options{}, configure)
}

// startEnv is newEnv with a provider started with opts (its redirect URIs and users are the
// env's).
func startEnv(t *testing.T, opts oidctest.Options, configure func(*server.Options)) *env {
	t.Helper()
	api := servertest.Start(t, dbtest.Pool(t), func(o *server.Options) {
		o.Auth.AllowPrivateIssuers = true
		o.Auth.JWKSCooldown = 200 * time.Millisecond
		if configure != nil {
			configure(o)
		}
	})
	e := &env{api: api, cliRedirect: "http://127.0.0.1:" + strconv.Itoa(freePort(t)) + "/callback"}
	opts.RedirectURIs = []string{api.URL + "/auth/callback", e.cliRedirect}
	opts.Users = []oidctest.User{alice, bob, carol, dave}
	e.op = oidctest.Start(t, opts)
	e.admin = authv1connect.NewAuthServiceClient(api.HTTPClient(api.AdminKey), api.URL)
	e.public = authv1connect.NewAuthServiceClient(http.DefaultClient, api.URL)
	_, err := e.admin.CreateAuthMethod(ctx, &authv1.CreateAuthMethodRequest{AuthMethod: &authv1.AuthMethod{
		Name: "corp", DisplayName: "Corp SSO", Kind: authv1.AuthMethodKind_AUTH_METHOD_KIND_OIDC,
		Issuer: e.op.Issuer(), ClientId: e.op.ClientID(), ClientSecret: e.op.ClientSecret(),
		RedirectUris: []string{api.URL + "/auth/callback", e.cliRedirect},
		Rules: []*authv1.BindingRule{
			{Priority: 10, Selectors: []*authv1.ClaimSelector{{Claim: "name", Values: []string{"Alice Admin"}}}, Roles: []iamv1.Role{iamv1.Role_ROLE_ADMIN}},
			{Priority: 20, Selectors: []*authv1.ClaimSelector{{Claim: "email", Values: []string{"alice@corp.example", "bob@corp.example"}}}, Roles: []iamv1.Role{iamv1.Role_ROLE_VIEWER}},
		},
	}})
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// browser is a browser's cookie jar on the API.
type browser struct {
	t      *testing.T
	e      *env
	client *http.Client
}

func (e *env) browser(t *testing.T) *browser {
	t.Helper()
	jar, err := cookiejar.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	return &browser{t: t, e: e, client: &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
}

// start starts the dashboard's sign-in as its page does (POST with X-Better-Compute) and returns
// where it sends the browser (the provider).
func (b *browser) start() string {
	b.t.Helper()
	form := url.Values{"tenant": {"root"}, "method": {"corp"}, "return": {"/dashboard/#/nodes"}}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, b.e.api.URL+"/auth/login", strings.NewReader(form.Encode()))
	if err != nil {
		b.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("X-Better-Compute", "1")
	res, err := b.client.Do(req)
	if err != nil {
		b.t.Fatal(err)
	}
	defer res.Body.Close()
	var start struct {
		AuthorizationURL string `json:"authorizationUrl"`
	}
	if res.StatusCode != http.StatusOK {
		b.t.Fatalf("POST /auth/login: %s", res.Status)
	}
	if err := json.NewDecoder(res.Body).Decode(&start); err != nil {
		b.t.Fatalf("POST /auth/login: %v", err)
	}
	return start.AuthorizationURL
}

// answer is what the API's callback answered.
type answer struct {
	StatusCode int
	Location   string
	Cookies    []*http.Cookie
	Status     string
}

// callback follows the provider's redirect back to the API and returns the answer.
func (b *browser) callback(to *url.URL) answer {
	b.t.Helper()
	res, err := b.client.Get(to.String())
	if err != nil {
		b.t.Fatal(err)
	}
	defer res.Body.Close()
	return answer{StatusCode: res.StatusCode, Location: res.Header.Get("Location"), Cookies: res.Cookies(), Status: res.Status}
}

// signIn runs the whole browser flow for user and returns the callback's answer.
func (b *browser) signIn(user oidctest.User) answer {
	b.t.Helper()
	return b.callback(b.e.op.Login(b.t, b.start(), user.Username, user.Password))
}

// whoAmI calls iam/whoAmI with the browser's cookies and, when header, X-Better-Compute.
func (b *browser) whoAmI(header bool) (*iamv1.WhoAmIResponse, error) {
	hc := &http.Client{Jar: b.client.Jar, Transport: clientHeader{set: header}}
	return iamv1connect.NewIamServiceClient(hc, b.e.api.URL).WhoAmI(ctx, &iamv1.WhoAmIRequest{})
}

// clientHeader adds X-Better-Compute when set, as the dashboard does on every call.
type clientHeader struct{ set bool }

func (h clientHeader) RoundTrip(r *http.Request) (*http.Response, error) {
	if h.set {
		r = r.Clone(r.Context())
		r.Header.Set("X-Better-Compute", "1")
	}
	return http.DefaultTransport.RoundTrip(r)
}

func roles(r *iamv1.WhoAmIResponse) string {
	var s []string
	for _, x := range r.GetRoles() {
		s = append(s, x.String())
	}
	return strings.Join(s, ",")
}

// principalsOf counts the principals of a provider's subject.
func (e *env) principalsOf(t *testing.T, subject string) int {
	t.Helper()
	var n int
	if err := e.api.Pool.QueryRow(ctx, "SELECT count(*) FROM principals WHERE name LIKE '%:' || $1", subject).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// TestBrowserSignIn: the dashboard's code flow signs Alice in; iam/whoAmI with the session
// cookie (and X-Better-Compute, without which the cookie is not accepted) shows the mapped
// tenant and roles; the session returns the browser to the page it asked for. A group removed
// at the provider (her name no longer matches the admin rule) removes the role at her next
// sign-in, and a rotated signing key needs no restart.
func TestBrowserSignIn(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	b := e.browser(t)
	res := b.signIn(alice)
	if res.StatusCode != http.StatusSeeOther || res.Location != "/dashboard/#/nodes" {
		t.Fatalf("callback: %s to %q", res.Status, res.Location)
	}
	var session *http.Cookie
	for _, c := range res.Cookies {
		if c.Name == "bc_session" {
			session = c
		}
	}
	if session == nil || !session.HttpOnly || session.SameSite != http.SameSiteLaxMode || session.Secure {
		t.Fatalf("session cookie %+v (want HttpOnly, SameSite=Lax, not Secure over http)", session)
	}
	me, err := b.whoAmI(true)
	if err != nil {
		t.Fatal(err)
	}
	if me.GetPrincipal().GetName() != "corp:id-alice" || me.GetTenant().GetName() != "root" || roles(me) != "ROLE_ADMIN,ROLE_VIEWER" || me.GetApiKeyId() != "" {
		t.Errorf("whoAmI: %v, roles %s", me, roles(me))
	}
	if _, err := b.whoAmI(false); connect.CodeOf(err) != connect.CodeUnauthenticated {
		t.Errorf("the cookie without X-Better-Compute: %v, want unauthenticated", err)
	}

	// The provider changes Alice's name and its signing key.
	renamed := alice
	renamed.LastName = "Engineer"
	e.op.SetUsers([]oidctest.User{renamed, bob, carol})
	e.op.Restart()
	// Within the JWKS cool-down (200 ms here) the new key id is refused without a fetch; after
	// it, the new key is fetched and the sign-in succeeds, with no restart of the API.
	b2 := e.browser(t)
	poll.Until(t, 10*time.Second, "a sign-in with the provider's new key", func() bool {
		return b2.signIn(renamed).StatusCode == http.StatusSeeOther
	})
	me, err = b2.whoAmI(true)
	if err != nil {
		t.Fatal(err)
	}
	if me.GetPrincipal().GetName() != "corp:id-alice" || roles(me) != "ROLE_VIEWER" {
		t.Errorf("after the admin rule stopped matching: %v, roles %s (want the same principal, viewer only)", me.GetPrincipal(), roles(me))
	}
	// The first session is Alice's too: its roles are the principal's, viewer now.
	if me, err := b.whoAmI(true); err != nil || roles(me) != "ROLE_VIEWER" {
		t.Errorf("the first session after the change: %v, %v", roles(me), err)
	}
}

// TestBrowserSignInRefusals: a tampered state, a replayed code, a nonce mismatch and a sign-in
// no rule matches are refused; the last creates no principal.
func TestBrowserSignInRefusals(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)

	t.Run("tampered state", func(t *testing.T) {
		t.Parallel()
		b := e.browser(t)
		to := e.op.Login(t, b.start(), alice.Username, alice.Password)
		q := to.Query()
		q.Set("state", q.Get("state")+"x")
		to.RawQuery = q.Encode()
		if res := b.callback(to); res.StatusCode != http.StatusForbidden {
			t.Errorf("tampered state: %s", res.Status)
		}
	})
	t.Run("replayed code", func(t *testing.T) {
		t.Parallel()
		b := e.browser(t)
		to := e.op.Login(t, b.start(), alice.Username, alice.Password)
		if res := b.callback(to); res.StatusCode != http.StatusSeeOther {
			t.Fatalf("first use: %s", res.Status)
		}
		// The same redirect again, from the same browser (its login cookie restored, and the
		// session the first use started dropped: a live one refuses any sign-in).
		b.client.Jar.SetCookies(to, []*http.Cookie{{Name: "bc_login", Value: to.Query().Get("state"), Path: "/api/auth/"}})
		b.client.Jar.SetCookies(to, []*http.Cookie{{Name: "bc_session", Path: "/", MaxAge: -1}})
		if res := b.callback(to); res.StatusCode != http.StatusForbidden {
			t.Errorf("replayed code: %s", res.Status)
		}
	})
	t.Run("nonce mismatch", func(t *testing.T) {
		t.Parallel()
		b := e.browser(t)
		authURL := b.start()
		u, err := url.Parse(authURL)
		if err != nil {
			t.Fatal(err)
		}
		state := sha256.Sum256([]byte(u.Query().Get("state")))
		if _, err := e.api.Pool.Exec(ctx, "UPDATE auth_flows SET nonce = 'not-the-nonce' WHERE state_hash = $1", state[:]); err != nil {
			t.Fatal(err)
		}
		if res := b.callback(e.op.Login(t, authURL, alice.Username, alice.Password)); res.StatusCode != http.StatusUnauthorized {
			t.Errorf("nonce mismatch: %s", res.Status)
		}
	})
	t.Run("no rule matches", func(t *testing.T) {
		t.Parallel()
		b := e.browser(t)
		if res := b.signIn(carol); res.StatusCode != http.StatusForbidden {
			t.Errorf("carol: %s", res.Status)
		}
		if n := e.principalsOf(t, carol.ID); n != 0 {
			t.Errorf("a refused sign-in created %d principals", n)
		}
	})
}

// TestCLISignIn: the CLI's flow (auth/startLogin with a loopback redirect, the user at the
// provider, auth/completeLogin with the code) gives a bearer token that iam/whoAmI accepts;
// completing twice is refused.
func TestCLISignIn(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	start, err := e.public.StartLogin(ctx, &authv1.StartLoginRequest{Tenant: "root", Method: "corp", RedirectUri: e.cliRedirect})
	if err != nil {
		t.Fatal(err)
	}
	to := e.op.Login(t, start.GetAuthorizationUrl(), bob.Username, bob.Password)
	if to.Query().Get("state") != start.GetState() {
		t.Fatalf("the provider returned state %q", to.Query().Get("state"))
	}
	done, err := e.public.CompleteLogin(ctx, &authv1.CompleteLoginRequest{State: start.GetState(), Code: to.Query().Get("code")})
	if err != nil {
		t.Fatal(err)
	}
	me, err := e.api.IAM(done.GetLogin().GetSessionToken()).WhoAmI(ctx, &iamv1.WhoAmIRequest{})
	if err != nil || me.GetPrincipal().GetName() != "corp:id-bob" || roles(me) != "ROLE_VIEWER" {
		t.Fatalf("whoAmI with the CLI's token: %v, %v", me, err)
	}
	_, err = e.public.CompleteLogin(ctx, &authv1.CompleteLoginRequest{State: start.GetState(), Code: to.Query().Get("code")})
	if connect.CodeOf(err) != connect.CodePermissionDenied {
		t.Errorf("completing twice: %v", err)
	}
	// A redirect URI that is not the method's is refused before anything starts.
	_, err = e.public.StartLogin(ctx, &authv1.StartLoginRequest{Tenant: "root", Method: "corp", RedirectUri: "https://evil.example/callback"})
	if connect.CodeOf(err) != connect.CodeInvalidArgument {
		t.Errorf("a foreign redirect URI: %v", err)
	}
	// Signing out ends the session.
	out, err := authv1connect.NewAuthServiceClient(e.api.HTTPClient(done.GetLogin().GetSessionToken()), e.api.URL).SignOut(ctx, &authv1.SignOutRequest{})
	if err != nil || !out.GetEnded() {
		t.Fatalf("signOut: %v, %v", out, err)
	}
	if _, err := e.api.IAM(done.GetLogin().GetSessionToken()).WhoAmI(ctx, &iamv1.WhoAmIRequest{}); connect.CodeOf(err) != connect.CodeUnauthenticated {
		t.Errorf("whoAmI after signOut: %v", err)
	}
}

// idToken signs user in at the provider as a relying party of its own would (code flow with
// PKCE through the CLI's redirect URI) and returns the provider's ID token: a real token of the
// provider, for the JWT methods' tests.
func (e *env) idToken(t *testing.T, user oidctest.User) string {
	t.Helper()
	var doc struct {
		Authorization string `json:"authorization_endpoint"`
		Token         string `json:"token_endpoint"`
	}
	res, err := http.Get(e.op.Issuer() + ".well-known/openid-configuration")
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	if err := json.NewDecoder(res.Body).Decode(&doc); err != nil {
		t.Fatal(err)
	}
	cfg := &oauth2.Config{
		ClientID: e.op.ClientID(), ClientSecret: e.op.ClientSecret(), RedirectURL: e.cliRedirect, Scopes: []string{"openid"},
		Endpoint: oauth2.Endpoint{AuthURL: doc.Authorization, TokenURL: doc.Token},
	}
	verifier := oauth2.GenerateVerifier()
	to := e.op.Login(t, cfg.AuthCodeURL("state-1", oauth2.S256ChallengeOption(verifier)), user.Username, user.Password)
	tok, err := cfg.Exchange(ctx, to.Query().Get("code"), oauth2.VerifierOption(verifier))
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := tok.Extra("id_token").(string)
	if raw == "" {
		t.Fatal("the provider returned no id_token")
	}
	return raw
}

// jwtMethod adds a JWT method of the root tenant that maps the provider's tokens for audience
// to an operator, for Bob's subject only.
func (e *env) jwtMethod(t *testing.T, name, audience string) {
	t.Helper()
	_, err := e.admin.CreateAuthMethod(ctx, &authv1.CreateAuthMethodRequest{AuthMethod: &authv1.AuthMethod{
		Name: name, Kind: authv1.AuthMethodKind_AUTH_METHOD_KIND_JWT, Issuer: e.op.Issuer(), Audiences: []string{audience},
		Rules: []*authv1.BindingRule{{Priority: 1, Selectors: []*authv1.ClaimSelector{{Claim: "sub", Values: []string{bob.ID}}}, Roles: []iamv1.Role{iamv1.Role_ROLE_OPERATOR}}},
	}})
	if err != nil {
		t.Fatal(err)
	}
}

// keyFetches counts the provider's answers to its JWKS endpoint, from its request log.
func (e *env) keyFetches() int { return strings.Count(e.op.Log(), "/keys") }

// TestTokenExchange: a machine's JWT (here an ID token of the real provider) is exchanged for
// a session through a JWT method: mapped by its rules, ending with the token. A token for
// another audience, an expired one and one no rule matches are refused, and a flood of tokens
// with unknown key ids makes at most one JWKS fetch per cool-down.
func TestTokenExchange(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(o *server.Options) { o.Auth.JWKSCooldown = time.Minute })
	e.jwtMethod(t, "ci", e.op.ClientID())
	e.jwtMethod(t, "ci-api", "api")
	token := e.idToken(t, bob)

	res, err := e.public.ExchangeToken(ctx, &authv1.ExchangeTokenRequest{Tenant: "root", Method: "ci", Token: token})
	if err != nil {
		t.Fatal(err)
	}
	if exp := res.GetLogin().GetExpireTime().AsTime(); exp.After(time.Now().Add(time.Hour + time.Minute)) {
		t.Errorf("the session ends at %v, after the token lifetime's bound", exp)
	}
	me, err := e.api.IAM(res.GetLogin().GetSessionToken()).WhoAmI(ctx, &iamv1.WhoAmIRequest{})
	if err != nil || me.GetPrincipal().GetName() != "ci:id-bob" || roles(me) != "ROLE_OPERATOR" {
		t.Fatalf("whoAmI with the exchanged token: %v, %v", me, err)
	}

	_, err = e.public.ExchangeToken(ctx, &authv1.ExchangeTokenRequest{Tenant: "root", Method: "ci-api", Token: token})
	if connect.CodeOf(err) != connect.CodeUnauthenticated || !strings.Contains(err.Error(), "another audience") {
		t.Errorf("wrong audience: %v", err)
	}
	_, err = e.public.ExchangeToken(ctx, &authv1.ExchangeTokenRequest{Tenant: "root", Method: "ci", Token: e.idToken(t, carol)})
	if n := e.principalsOf(t, carol.ID); connect.CodeOf(err) != connect.CodePermissionDenied || n != 0 {
		t.Errorf("a token no rule matches: %v (%d principals)", err, n)
	}

	// Two hours later, by the API's clock, the token has expired.
	later := servertest.Start(t, e.api.Pool, func(o *server.Options) {
		o.Auth.AllowPrivateIssuers = true
		o.Auth.Now = func() time.Time { return time.Now().Add(2 * time.Hour) }
	})
	_, err = authv1connect.NewAuthServiceClient(http.DefaultClient, later.URL).ExchangeToken(ctx, &authv1.ExchangeTokenRequest{Tenant: "root", Method: "ci", Token: token})
	if connect.CodeOf(err) != connect.CodeUnauthenticated || !strings.Contains(err.Error(), "expired") {
		t.Errorf("an expired token: %v", err)
	}

	// Tokens signed by keys the provider never had: refused, and within the cool-down no fetch.
	fetches := e.keyFetches()
	if fetches == 0 {
		t.Fatalf("the provider's log shows no JWKS fetch for the first exchange: the count is broken\n%s", e.op.Log())
	}
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 50 {
		forged := forge(t, key, "kid-"+strconv.Itoa(i), e.op.Issuer(), e.op.ClientID())
		_, err := e.public.ExchangeToken(ctx, &authv1.ExchangeTokenRequest{Tenant: "root", Method: "ci", Token: forged})
		if connect.CodeOf(err) != connect.CodeUnauthenticated {
			t.Fatalf("forged token %d: %v", i, err)
		}
	}
	if n := e.keyFetches() - fetches; n > 1 {
		t.Errorf("50 tokens with unknown key ids made %d JWKS fetches within one cool-down", n)
	}
}

// forge signs a token for issuer and audience, claiming Bob's subject, with a key of its own.
func forge(t *testing.T, key *rsa.PrivateKey, kid, issuer, audience string) string {
	t.Helper()
	signer, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.RS256, Key: jose.JSONWebKey{Key: key, KeyID: kid}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	payload, err := json.Marshal(map[string]any{"iss": issuer, "aud": audience, "sub": bob.ID, "iat": now.Unix(), "exp": now.Add(time.Hour).Unix()})
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

// TestDeviceSignIn: the device flow (auth/startDeviceLogin, the user approving at the provider,
// auth/pollDeviceLogin) through a method of the provider's device client: pending until Dave
// approves, then a login whose token iam/whoAmI accepts; the spent handle is refused.
func TestDeviceSignIn(t *testing.T) {
	t.Parallel()
	e := startEnv(t, oidctest.Options{Device: true}, nil)
	_, err := e.admin.CreateAuthMethod(ctx, &authv1.CreateAuthMethodRequest{AuthMethod: &authv1.AuthMethod{
		Name: "corp-device", DisplayName: "Corp SSO (device)", Kind: authv1.AuthMethodKind_AUTH_METHOD_KIND_OIDC,
		Issuer: e.op.Issuer(), ClientId: e.op.DeviceClientID(), ClientSecret: e.op.DeviceClientSecret(),
		// Required of an OIDC method; the provider's device client has none and never redirects.
		RedirectUris: []string{e.api.URL + "/auth/callback", e.cliRedirect},
		// The provider completes a device flow with the username entered, so the subject is
		// Dave's username (here also his ID, which the provider needs to issue the tokens).
		Rules: []*authv1.BindingRule{
			{Priority: 10, Selectors: []*authv1.ClaimSelector{{Claim: "sub", Values: []string{dave.Username}}}, Roles: []iamv1.Role{iamv1.Role_ROLE_OPERATOR}},
		},
	}})
	if err != nil {
		t.Fatal(err)
	}
	methods, err := e.public.ListLoginMethods(ctx, &authv1.ListLoginMethodsRequest{Tenant: "root"})
	if err != nil {
		t.Fatal(err)
	}
	var listed bool
	for _, m := range methods.GetMethods() {
		if m.GetName() == "corp-device" {
			listed = m.GetDeviceFlow()
		}
	}
	if !listed {
		t.Fatalf("auth/loginMethods: %v, want corp-device with the device flow", methods.GetMethods())
	}

	start, err := e.public.StartDeviceLogin(ctx, &authv1.StartDeviceLoginRequest{Tenant: "root", Method: "corp-device"})
	if err != nil {
		t.Fatal(err)
	}
	if start.GetHandle() == "" || start.GetUserCode() == "" || start.GetVerificationUri() == "" {
		t.Fatalf("startDeviceLogin: %v", start)
	}
	pending, err := e.public.PollDeviceLogin(ctx, &authv1.PollDeviceLoginRequest{Handle: start.GetHandle()})
	if err != nil || !pending.GetPending() || pending.GetLogin() != nil {
		t.Fatalf("poll before approval: %v, %v (want pending)", pending, err)
	}

	e.op.ApproveDevice(t, start.GetVerificationUri(), start.GetUserCode(), dave.Username, dave.Password)
	done, err := e.public.PollDeviceLogin(ctx, &authv1.PollDeviceLoginRequest{Handle: start.GetHandle()})
	if err != nil || done.GetPending() || done.GetLogin().GetSessionToken() == "" {
		t.Fatalf("poll after approval: %v, %v\n%s", done, err, e.op.Log())
	}
	me, err := e.api.IAM(done.GetLogin().GetSessionToken()).WhoAmI(ctx, &iamv1.WhoAmIRequest{})
	if err != nil || me.GetPrincipal().GetName() != "corp-device:dave" || me.GetTenant().GetName() != "root" || roles(me) != "ROLE_OPERATOR" {
		t.Fatalf("whoAmI with the device's token: %v, roles %s, %v", me, roles(me), err)
	}
	if _, err := e.public.PollDeviceLogin(ctx, &authv1.PollDeviceLoginRequest{Handle: start.GetHandle()}); connect.CodeOf(err) != connect.CodePermissionDenied {
		t.Errorf("a second poll with the spent handle: %v, want permission_denied", err)
	}
}
