package sso

import (
	"crypto/rand"
	"encoding/base64"

	"golang.org/x/oauth2"
)

// randomBytes is the entropy of states, nonces and PKCE verifiers.
const randomBytes = 32

// NewPKCE returns a fresh PKCE code verifier (RFC 7636: 32 random bytes, base64url) and its S256
// challenge. The challenge goes into the authorization URL; the verifier stays with the sign-in
// and goes to Exchange.
func NewPKCE() (verifier, challenge string) {
	verifier = oauth2.GenerateVerifier()
	return verifier, PKCEChallenge(verifier)
}

// PKCEChallenge returns the S256 code challenge of a verifier: base64url(SHA-256(verifier)).
func PKCEChallenge(verifier string) string {
	return oauth2.S256ChallengeFromVerifier(verifier)
}

// NewState returns a fresh state for an authorization request: 32 random bytes, base64url.
func NewState() string { return randomString() }

// NewNonce returns a fresh nonce for an authorization request, which the ID token must carry
// back: 32 random bytes, base64url.
func NewNonce() string { return randomString() }

func randomString() string {
	b := make([]byte, randomBytes)
	_, _ = rand.Read(b) // crypto/rand.Read never fails; it crashes the program instead
	return base64.RawURLEncoding.EncodeToString(b)
}
