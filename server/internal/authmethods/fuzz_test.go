package authmethods_test

import (
	"context"
	"strings"
	"testing"
	"unicode/utf8"

	"connectrpc.com/connect"

	authv1 "github.com/better-compute/better-compute/gen/go/bettercompute/auth/v1"
	iamv1 "github.com/better-compute/better-compute/gen/go/bettercompute/iam/v1"
	"github.com/better-compute/better-compute/internal/auth"
	"github.com/better-compute/better-compute/internal/dbtest"
	"github.com/better-compute/better-compute/server"
	"github.com/better-compute/better-compute/server/servertest"
)

// FuzzCreateAuthMethod sends authMethods/create (then update and delete of what it made) with
// arbitrary fields, as the root owner of a deployment that allows private issuers: whatever the
// input, the answer is a result or a Connect error of the caller's making, never an internal
// error or a panic. The seeds run under plain `go test`; `go test -fuzz FuzzCreateAuthMethod
// ./server/internal/authmethods` explores.
func FuzzCreateAuthMethod(f *testing.F) {
	env := servertest.Start(f, dbtest.Pool(f), func(o *server.Options) { o.Auth.AllowPrivateIssuers = true })
	root, err := auth.EnsureRootTenant(context.Background(), env.Pool)
	if err != nil {
		f.Fatal(err)
	}
	rootID := root.ID.String()
	type seed struct {
		name, issuer, jwks, clientID, secret, audience, redirect, scope, claim, value, tenant string
		kind, role, priority                                                                  int32
	}
	jwtKind, oidcKind := int32(authv1.AuthMethodKind_AUTH_METHOD_KIND_JWT), int32(authv1.AuthMethodKind_AUTH_METHOD_KIND_OIDC)
	viewer := int32(iamv1.Role_ROLE_VIEWER)
	for _, s := range []seed{
		{name: "ci", issuer: "https://ci.example.com", audience: "bc", kind: jwtKind, role: viewer},
		{name: "ci", issuer: "https://ci.example.com", jwks: "https://keys.example.com/jwks", audience: "bc", kind: jwtKind, role: viewer},
		{name: "ci", jwks: "https://keys.example.com/jwks", audience: "bc", kind: jwtKind, role: viewer},
		{name: "ci", issuer: "http://127.0.0.1:1/", jwks: "http://[::1]:1/keys", audience: "bc", kind: jwtKind, role: viewer, tenant: rootID},
		{name: "sso", issuer: "https://idp.example.com", clientID: "c", secret: "s", redirect: "http://127.0.0.1/callback", kind: oidcKind, role: viewer},
		{name: "sso", issuer: "https://idp.example.com", clientID: "c", secret: "s", redirect: "https://x.example/cb", scope: "groups", claim: "groups", value: "ops", kind: oidcKind, role: viewer},
		{name: "sso", issuer: "https://idp.example.com", clientID: "\x00", secret: "\x00", redirect: "https://x.example/cb", kind: oidcKind, role: viewer},
		{name: "ci", issuer: "https://ci.example.com", audience: "a\x00", claim: "sub", value: "\x00", kind: jwtKind, role: viewer},
		{name: "sso", issuer: "https://idp.example.com/\x00", clientID: "\x00", secret: "s", redirect: "https://x.example/cb#f", kind: oidcKind, role: viewer},
		{name: "x", issuer: "https://u:p@idp.example.com", audience: "\u00e9", kind: jwtKind, role: int32(iamv1.Role_ROLE_OWNER)},
		{name: "x", issuer: "https://idp.example.com?a=1", audience: "bc", kind: jwtKind, role: 99, priority: -1},
		{name: "x", issuer: "ftp://idp.example.com", audience: "bc", kind: 7, role: viewer},
		{name: "x", issuer: "https://idp.example.com", audience: "bc", kind: jwtKind, role: viewer, tenant: "00000000-0000-0000-0000-000000000000"},
		{name: "x", issuer: "https://idp.example.com", audience: "bc", kind: jwtKind, role: viewer, tenant: "not-a-uuid", claim: "a..b", value: ""},
		{name: "Bad Name", issuer: "https://" + strings.Repeat("a", 3000) + ".example", audience: strings.Repeat("b", 300), kind: jwtKind},
		{name: "", kind: 0},
	} {
		f.Add(s.name, s.issuer, s.jwks, s.clientID, s.secret, s.audience, s.redirect, s.scope, s.claim, s.value, s.tenant, s.kind, s.role, s.priority)
	}
	c := client(env, env.AdminKey)
	f.Fuzz(func(t *testing.T, name, issuer, jwks, clientID, secret, audience, redirect, scope, claim, value, tenant string, kind, role, priority int32) {
		for _, s := range []string{name, issuer, jwks, clientID, secret, audience, redirect, scope, claim, value, tenant} {
			if !utf8.ValidString(s) {
				t.Skip("protobuf strings are UTF-8: the client cannot send it (FuzzJSONRoutes sends such bodies)")
			}
		}
		m := &authv1.AuthMethod{
			Name: name, Kind: authv1.AuthMethodKind(kind), Issuer: issuer, JwksUrl: jwks, ClientId: clientID, ClientSecret: secret,
			ClaimPaths: &authv1.ClaimPaths{Groups: claim},
			Rules:      []*authv1.BindingRule{{Priority: priority, Roles: []iamv1.Role{iamv1.Role(role)}, TenantId: tenant}},
		}
		if audience != "" {
			m.Audiences = []string{audience}
		}
		if redirect != "" {
			m.RedirectUris = []string{redirect}
		}
		if scope != "" {
			m.Scopes = []string{scope}
		}
		if claim != "" {
			m.Rules[0].Selectors = []*authv1.ClaimSelector{{Claim: claim, Values: []string{value}}}
		}
		ctx := t.Context()
		_, err := c.CreateAuthMethod(ctx, &authv1.CreateAuthMethodRequest{AuthMethod: m})
		callerError(t, "create", err)
		if err != nil {
			return
		}
		_, err = c.UpdateAuthMethod(ctx, &authv1.UpdateAuthMethodRequest{AuthMethod: m})
		callerError(t, "update", err)
		_, err = c.DeleteAuthMethod(ctx, &authv1.DeleteAuthMethodRequest{Name: name})
		callerError(t, "delete", err)
	})
}

// callerError fails on an error that is not of the caller's making.
func callerError(t *testing.T, what string, err error) {
	t.Helper()
	if err == nil {
		return
	}
	switch connect.CodeOf(err) {
	case connect.CodeInternal, connect.CodeUnknown, connect.CodeDataLoss, connect.CodeUnimplemented:
		t.Fatalf("%s: %v", what, err)
	}
}
