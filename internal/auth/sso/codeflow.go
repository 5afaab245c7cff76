package sso

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"

	"github.com/coreos/go-oidc/v3/oidc"
	"golang.org/x/oauth2"
)

// DefaultScopes are asked for besides openid when a method names none.
var DefaultScopes = []string{oidc.ScopeProfile, oidc.ScopeEmail}

// Scopes returns what an authorization request asks for: openid, then scopes (DefaultScopes
// when empty), each once.
func Scopes(scopes []string) []string {
	if len(scopes) == 0 {
		scopes = DefaultScopes
	}
	out := []string{oidc.ScopeOpenID}
	for _, s := range scopes {
		if s != "" && !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	return out
}

// oauthConfig describes a client of p to oauth2, with the client authentication p's token
// endpoint takes: HTTP Basic (client_secret_basic) unless it offers only client_secret_post;
// a client without a secret (a public client) sends its id in the form.
func oauthConfig(p *Provider, clientID, clientSecret, redirectURI string, scopes []string) *oauth2.Config {
	style := oauth2.AuthStyleInHeader
	m := p.TokenEndpointAuthMethods
	if clientSecret == "" ||
		(len(m) > 0 && !slices.Contains(m, "client_secret_basic") && slices.Contains(m, "client_secret_post")) {
		style = oauth2.AuthStyleInParams
	}
	return &oauth2.Config{
		ClientID:     clientID,
		ClientSecret: clientSecret,
		RedirectURL:  redirectURI,
		Scopes:       Scopes(scopes),
		Endpoint: oauth2.Endpoint{
			AuthURL:       p.AuthorizationEndpoint,
			TokenURL:      p.TokenEndpoint,
			DeviceAuthURL: p.DeviceAuthorizationEndpoint,
			AuthStyle:     style,
		},
	}
}

// AuthorizationURL returns where to send the browser to sign in at p: an authorization code
// request (response_type=code) for clientID with redirectURI, the scopes (see Scopes), state,
// nonce, and the PKCE S256 challenge.
func AuthorizationURL(p *Provider, clientID, redirectURI string, scopes []string, state, nonce, challenge string) string {
	return oauthConfig(p, clientID, "", redirectURI, scopes).AuthCodeURL(state,
		oidc.Nonce(nonce),
		oauth2.SetAuthURLParam("code_challenge", challenge),
		oauth2.SetAuthURLParam("code_challenge_method", "S256"),
	)
}

// Exchange redeems an authorization code at p's token endpoint, with the PKCE verifier, and
// returns the ID token (still to be checked with VerifyIDToken) and the access token (for
// UserInfo). A code the provider refuses (used, expired, or with a wrong verifier) gives
// ErrRefused.
func (c *Client) Exchange(ctx context.Context, p *Provider, clientID, clientSecret, redirectURI, code, verifier string) (idToken, accessToken string, err error) {
	if p.TokenEndpoint == "" {
		return "", "", fmt.Errorf("%w: %s has no token endpoint", ErrProvider, p.Issuer)
	}
	cfg := oauthConfig(p, clientID, clientSecret, redirectURI, nil)
	tok, err := cfg.Exchange(oidc.ClientContext(ctx, c.http), code, oauth2.VerifierOption(verifier))
	if err != nil {
		return "", "", fmt.Errorf("code exchange at %s: %w", p.Issuer, tokenError(err))
	}
	idToken, _ = tok.Extra("id_token").(string)
	if idToken == "" {
		return "", "", fmt.Errorf("%w: code exchange at %s: no id_token in the answer", ErrProvider, p.Issuer)
	}
	return idToken, tok.AccessToken, nil
}

// tokenError classifies an error of oauth2: an OAuth error answer is ErrRefused, anything else
// (unreachable, malformed answer) ErrProvider.
func tokenError(err error) error {
	var re *oauth2.RetrieveError
	if errors.As(err, &re) {
		return fmt.Errorf("%w: %s %s", ErrRefused, re.ErrorCode, re.ErrorDescription)
	}
	return fmt.Errorf("%w: %w", ErrProvider, err)
}

// UserInfo fetches the claims p's userinfo endpoint gives for an access token. Its subject must
// be compared with the verified ID token's before its claims are trusted (OpenID Connect Core
// 5.3.2); MergeUserInfo does that.
func (c *Client) UserInfo(ctx context.Context, p *Provider, accessToken string) (Claims, error) {
	if p.UserinfoEndpoint == "" {
		return nil, fmt.Errorf("%w: %s has no userinfo endpoint", ErrNotSupported, p.Issuer)
	}
	var raw json.RawMessage
	if err := getJSON(ctx, c.http, p.UserinfoEndpoint, accessToken, &raw); err != nil {
		return nil, fmt.Errorf("%w: userinfo: %w", ErrProvider, err)
	}
	claims, err := decodeClaims(raw)
	if err != nil {
		return nil, fmt.Errorf("%w: userinfo: %w", ErrProvider, err)
	}
	return claims, nil
}

// MergeUserInfo returns the ID token's claims completed with the userinfo answer's (the ID
// token's win where both have a claim); the userinfo answer must be about the same subject.
func MergeUserInfo(idClaims, userInfo Claims) (Claims, error) {
	if userInfo.Subject() != idClaims.Subject() {
		return nil, fmt.Errorf("%w: userinfo is about subject %q, the ID token about %q", ErrProvider, userInfo.Subject(), idClaims.Subject())
	}
	out := make(Claims, len(idClaims)+len(userInfo))
	maps.Copy(out, userInfo)
	maps.Copy(out, idClaims)
	return out, nil
}
