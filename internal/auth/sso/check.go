package sso

import (
	"context"
	"fmt"
)

// CheckOIDC reports whether p offers what an OIDC sign-in needs: an authorization and a token
// endpoint (a JWT method needs only the jwks_uri that every Provider has).
func (p *Provider) CheckOIDC() error {
	if p.AuthorizationEndpoint == "" || p.TokenEndpoint == "" {
		return fmt.Errorf("%w: %s names no authorization or token endpoint", ErrNotSupported, p.Issuer)
	}
	return nil
}

// Check fetches a method's discovery document (for OIDC, or when its keys are there rather than
// at a JWKS URL) and key set now, bypassing the caches and the key set's cool-down, for doctor
// and for validating a method when it is saved: it reports ErrMethod for a method without an
// issuer, and whether the provider answers, its document names the issuer
// (and, for OIDC, the endpoints sign-in needs), and its keys hold at least one usable signing
// key. It changes no cached state but the discovery document, which it refreshes.
func (c *Client) Check(ctx context.Context, m Method) error {
	if m.Issuer == "" {
		// A JWT method saved before issue 31 may have none: it signs nobody in (VerifyJWT).
		return fmt.Errorf("%w: no issuer, so its tokens' iss cannot be checked and nobody signs in through it; set one", ErrMethod)
	}
	jwksURL := m.JWKSURL
	if jwksURL == "" || m.Kind == KindOIDC {
		p, err := c.discovery.Refresh(ctx, m.Issuer)
		if err != nil {
			return err
		}
		if m.Kind == KindOIDC {
			if err := p.CheckOIDC(); err != nil {
				return err
			}
		}
		if jwksURL == "" {
			jwksURL = p.JWKSURI
		}
	}
	if _, err := newKeySet(jwksURL, c.http, c.opts).fetch(ctx); err != nil {
		return fmt.Errorf("%w: %w", ErrKeysUnavailable, err)
	}
	return nil
}
