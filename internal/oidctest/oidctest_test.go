package oidctest

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/coreos/go-oidc/v3/oidc"
	"golang.org/x/oauth2"
)

// redirectURI is the relying party's callback in these tests; Login returns the redirect to it
// without requesting it, so nothing listens there.
const redirectURI = "http://localhost:9/callback"

// relyingParty is a client of p as a web application would be.
type relyingParty struct {
	provider *oidc.Provider
	config   oauth2.Config
}

func newRelyingParty(t *testing.T, p *Provider) *relyingParty {
	t.Helper()
	provider, err := oidc.NewProvider(t.Context(), p.Issuer())
	if err != nil {
		t.Fatalf("discovery: %v", err)
	}
	return &relyingParty{provider: provider, config: oauth2.Config{
		ClientID: p.ClientID(), ClientSecret: p.ClientSecret(), RedirectURL: redirectURI,
		Endpoint: provider.Endpoint(), Scopes: []string{oidc.ScopeOpenID, "profile", "email"},
	}}
}

// signIn runs the code flow with PKCE and a nonce for u and returns the tokens and the verified
// ID token.
func (rp *relyingParty) signIn(t *testing.T, p *Provider, u User) (*oauth2.Token, *oidc.IDToken) {
	t.Helper()
	verifier := oauth2.GenerateVerifier()
	state, nonce := oauth2.GenerateVerifier(), oauth2.GenerateVerifier()
	to := p.Login(t, rp.config.AuthCodeURL(state, oauth2.S256ChallengeOption(verifier), oidc.Nonce(nonce)), u.Username, u.Password)
	if got := to.Scheme + "://" + to.Host + to.Path; got != redirectURI {
		t.Fatalf("Login returned %s, want a redirect to %s", to, redirectURI)
	}
	q := to.Query()
	if q.Get("state") != state || q.Get("code") == "" {
		t.Fatalf("redirect %s: want state %q and a code", to, state)
	}
	tok, err := rp.config.Exchange(t.Context(), q.Get("code"), oauth2.VerifierOption(verifier))
	if err != nil {
		t.Fatalf("exchange the code: %v", err)
	}
	raw, _ := tok.Extra("id_token").(string)
	id, err := rp.provider.VerifierContext(t.Context(), &oidc.Config{ClientID: p.ClientID()}).Verify(t.Context(), raw)
	if err != nil {
		t.Fatalf("verify the ID token: %v", err)
	}
	if id.Nonce != nonce || id.Subject != u.ID {
		t.Fatalf("ID token nonce %q subject %q, want %q and %q", id.Nonce, id.Subject, nonce, u.ID)
	}
	return tok, id
}

// keyID is the key id the raw ID token of tok was signed with.
func keyID(t *testing.T, tok *oauth2.Token) string {
	t.Helper()
	raw, _ := tok.Extra("id_token").(string)
	kid, err := jwtKeyID(raw)
	if err != nil {
		t.Fatal(err)
	}
	return kid
}

// name is the name claim userinfo returns for tok.
func (rp *relyingParty) name(t *testing.T, tok *oauth2.Token) string {
	t.Helper()
	info, err := rp.provider.UserInfo(t.Context(), oauth2.StaticTokenSource(tok))
	if err != nil {
		t.Fatalf("userinfo: %v", err)
	}
	var claims struct {
		Name string `json:"name"`
	}
	if err := info.Claims(&claims); err != nil {
		t.Fatalf("userinfo claims: %v", err)
	}
	return claims.Name
}

func TestDiscoveryAnswersWithTheIssuer(t *testing.T) {
	t.Parallel()
	p := Start(t, Options{RedirectURIs: []string{redirectURI}})
	resp, err := http.Get(p.Issuer() + discoveryPath)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var doc struct {
		Issuer  string `json:"issuer"`
		JWKSURI string `json:"jwks_uri"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&doc); err != nil {
		t.Fatal(err)
	}
	if doc.Issuer != p.Issuer() || doc.JWKSURI == "" {
		t.Fatalf("discovery: issuer %q jwks_uri %q, want issuer %q", doc.Issuer, doc.JWKSURI, p.Issuer())
	}
}

func TestCodeFlowWithPKCESignsIn(t *testing.T) {
	t.Parallel()
	bob := User{ID: "u-bob", Username: "bob", Password: "bob-pw", FirstName: "Bob", LastName: "Builder", Email: "bob@example.com"}
	p := Start(t, Options{RedirectURIs: []string{redirectURI}, Users: []User{DefaultUser, bob}})
	rp := newRelyingParty(t, p)
	tok, _ := rp.signIn(t, p, bob)
	if got := rp.name(t, tok); got != "Bob Builder" {
		t.Fatalf("userinfo name %q, want %q", got, "Bob Builder")
	}
}

func TestCodeExchangeNeedsThePKCEVerifier(t *testing.T) {
	t.Parallel()
	p := Start(t, Options{RedirectURIs: []string{redirectURI}})
	rp := newRelyingParty(t, p)
	to := p.Login(t, rp.config.AuthCodeURL("s", oauth2.S256ChallengeOption(oauth2.GenerateVerifier())), DefaultUser.Username, DefaultUser.Password)
	if _, err := rp.config.Exchange(t.Context(), to.Query().Get("code"), oauth2.VerifierOption(oauth2.GenerateVerifier())); err == nil {
		t.Fatal("the code was exchanged with the wrong PKCE verifier")
	}
}

func TestRestartRotatesTheSigningKey(t *testing.T) {
	t.Parallel()
	p := Start(t, Options{RedirectURIs: []string{redirectURI}})
	issuer := p.Issuer()
	rp := newRelyingParty(t, p)
	before, _ := rp.signIn(t, p, DefaultUser)
	p.Restart()
	if p.Issuer() != issuer {
		t.Fatalf("issuer %q after Restart, want %q", p.Issuer(), issuer)
	}
	after, _ := rp.signIn(t, p, DefaultUser)
	if keyID(t, before) == keyID(t, after) {
		t.Fatalf("the key id %q did not change at Restart", keyID(t, after))
	}
}

func TestSetUsersTakesEffectAtRestart(t *testing.T) {
	t.Parallel()
	p := Start(t, Options{RedirectURIs: []string{redirectURI}})
	rp := newRelyingParty(t, p)
	tok, _ := rp.signIn(t, p, DefaultUser)
	if got := rp.name(t, tok); got != "Alice Example" {
		t.Fatalf("userinfo name %q, want %q", got, "Alice Example")
	}
	renamed := DefaultUser
	renamed.LastName = "Renamed"
	p.SetUsers([]User{renamed})
	p.Restart()
	tok, _ = rp.signIn(t, p, renamed)
	if got := rp.name(t, tok); got != "Alice Renamed" {
		t.Fatalf("userinfo name %q after SetUsers and Restart, want %q", got, "Alice Renamed")
	}
}

// jwtKeyID is the kid of a compact JWS's header.
func jwtKeyID(raw string) (string, error) {
	header, _, ok := strings.Cut(raw, ".")
	if !ok {
		return "", fmt.Errorf("not a JWS: %q", raw)
	}
	b, err := base64.RawURLEncoding.DecodeString(header)
	if err != nil {
		return "", fmt.Errorf("decode the JWS header: %w", err)
	}
	var h struct {
		KeyID string `json:"kid"`
	}
	if err := json.Unmarshal(b, &h); err != nil {
		return "", fmt.Errorf("parse the JWS header: %w", err)
	}
	return h.KeyID, nil
}
