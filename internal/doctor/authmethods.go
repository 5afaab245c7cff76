package doctor

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/better-compute/better-compute/gen/db"
	"github.com/better-compute/better-compute/internal/auth/sso"
)

// defaultAuthTimeout bounds checking one auth method's provider.
const defaultAuthTimeout = 5 * time.Second

// authCheckers bounds the providers checked at once.
const authCheckers = 4

// authMethods fetches every auth method's discovery document and keys, as a sign-in would
// (sso.Client.Check, bypassing the caches): a Warning "auth method <tenant>/<name>" for each
// whose provider fails, with the reason, else one OK "auth methods" finding with the count. A
// failing provider is a Warning, not an Error: API keys and the other methods keep working.
func authMethods(ctx context.Context, opts Options) []Finding {
	methods, err := db.New(opts.Pool).DoctorAuthMethods(ctx)
	if err != nil {
		return []Finding{{Check: "auth methods", Severity: Error, Cause: fmt.Sprintf("list the auth methods: %v", err)}}
	}
	if len(methods) == 0 {
		return []Finding{{Check: "auth methods", Severity: OK, Cause: "no auth method: people and machines sign in with API keys"}}
	}
	timeout := opts.AuthTimeout
	if timeout <= 0 {
		timeout = defaultAuthTimeout
	}
	client := sso.New(sso.Options{AllowPrivate: opts.AllowPrivateIssuers, Timeout: timeout})
	failures := make([]error, len(methods))
	var wg sync.WaitGroup
	sem := make(chan struct{}, authCheckers)
	for i, m := range methods {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			cctx, cancel := context.WithTimeout(ctx, timeout)
			defer cancel()
			failures[i] = client.Check(cctx, ssoMethod(m))
		})
	}
	wg.Wait()

	var out []Finding
	for i, m := range methods {
		if failures[i] == nil {
			continue
		}
		reason := sso.Reason(failures[i])
		if reason == "" {
			reason = failures[i].Error()
		}
		out = append(out, Finding{
			Check:    fmt.Sprintf("auth method %s/%s", m.TenantName, m.Name),
			Severity: Warning,
			Cause:    fmt.Sprintf("auth method %q of tenant %s (%s): %s", m.Name, m.TenantName, providerOf(m), reason),
			Fix:      "check the provider is up and reachable from the API hosts, and the method's issuer or JWKS URL (authMethods/update); until then nobody signs in through it",
		})
	}
	if len(out) > 0 {
		return out
	}
	return []Finding{{Check: "auth methods", Severity: OK,
		Cause: fmt.Sprintf("%d auth methods: their providers' discovery documents and keys answer", len(methods))}}
}

// ssoMethod is what checking a stored method's provider needs.
func ssoMethod(m db.DoctorAuthMethodsRow) sso.Method {
	kind := sso.KindOIDC
	if m.Kind == "jwt" {
		kind = sso.KindJWT
	}
	return sso.Method{Kind: kind, Issuer: m.Issuer, ClientID: m.ClientID, JWKSURL: m.JwksUrl, Audiences: m.Audiences}
}

// providerOf names where a method's provider is, for the finding.
func providerOf(m db.DoctorAuthMethodsRow) string {
	if m.Issuer != "" {
		return "issuer " + m.Issuer
	}
	return "JWKS " + m.JwksUrl
}
