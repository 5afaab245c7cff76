package sso

import (
	"errors"

	"github.com/better-compute/better-compute/internal/webhook"
)

// The reasons a token or a provider is refused. Errors returned by this package wrap one of them
// (with errors.Is) and add context meant for logs; Reason gives the part fit for the caller.
var (
	ErrMalformed            = errors.New("the token is malformed")
	ErrUnsupportedAlgorithm = errors.New("the token is signed with an algorithm that is not accepted")
	ErrUnknownKey           = errors.New("the token is signed with an unknown key")
	ErrBadSignature         = errors.New("the token's signature does not verify")
	ErrKeysUnavailable      = errors.New("the identity provider's signing keys are unavailable")
	ErrWrongIssuer          = errors.New("the token was issued by another issuer")
	ErrWrongAudience        = errors.New("the token is meant for another audience")
	ErrExpired              = errors.New("the token has expired")
	ErrNotYetValid          = errors.New("the token is not valid yet")
	ErrNonceMismatch        = errors.New("the token's nonce does not match the sign-in's")
	ErrMissingClaim         = errors.New("the token lacks a required claim")
	ErrProvider             = errors.New("the identity provider is unavailable or misconfigured")
	ErrRefused              = errors.New("the identity provider refused the request")
	ErrNotSupported         = errors.New("the identity provider does not offer this")
	ErrMethod               = errors.New("the auth method is incomplete")
)

// reasons are the errors Reason may name, most specific first.
var reasons = []error{
	ErrMalformed, ErrUnsupportedAlgorithm, ErrUnknownKey, ErrBadSignature, ErrKeysUnavailable,
	ErrWrongIssuer, ErrWrongAudience, ErrExpired, ErrNotYetValid, ErrNonceMismatch, ErrMissingClaim,
	ErrRefused, ErrNotSupported, ErrMethod, webhook.ErrPrivateAddress, ErrProvider,
}

// Reason returns the message of the sentinel error that err wraps, to tell a caller why a sign-in
// failed without the URLs, claims and provider answers that the full error carries; it returns
// "" when err wraps none (an unexpected error, to be reported as internal).
func Reason(err error) string {
	for _, r := range reasons {
		if errors.Is(err, r) {
			return r.Error()
		}
	}
	return ""
}
