package sso

import (
	"context"
	"crypto/subtle"
	"fmt"
	"slices"
	"time"
)

// Leeway is the clock skew allowed between the provider and this server when checking exp, nbf
// and iat.
const Leeway = time.Minute

// VerifyIDToken verifies an OpenID Connect ID token of an OIDC method: signed (with one of
// Algorithms) by a key of the issuer's key set, iss equal to the method's issuer, aud naming the
// client id (and azp, when the token has several audiences and names one, equal to it), exp
// present and not passed, iat present and not in the future, nbf honoured (all within Leeway),
// sub present, and nonce equal to the one the sign-in sent (empty for flows without one, such as
// the device flow: then the token must carry none).
//
// go-oidc's IDTokenVerifier is not used because its errors do not say why a token was refused
// (they flatten the key set's errors into text) and it allows no leeway on exp; the KeySet that
// checks signatures implements its oidc.KeySet all the same.
func (c *Client) VerifyIDToken(ctx context.Context, m Method, raw, nonce string) (Claims, error) {
	if m.Kind != KindOIDC {
		return nil, fmt.Errorf("%w: not an OIDC method", ErrMethod)
	}
	if m.Issuer == "" || m.ClientID == "" {
		return nil, fmt.Errorf("%w: an OIDC method needs an issuer and a client id", ErrMethod)
	}
	p, err := c.discovery.Provider(ctx, m.Issuer)
	if err != nil {
		return nil, err
	}
	claims, err := c.verifySigned(ctx, c.KeySet(p.JWKSURI), raw)
	if err != nil {
		return nil, err
	}
	if iss := claims.Issuer(); iss != m.Issuer {
		return nil, fmt.Errorf("%w: %q, want %q", ErrWrongIssuer, iss, m.Issuer)
	}
	aud := claims.Strings("aud")
	if !slices.Contains(aud, m.ClientID) {
		return nil, fmt.Errorf("%w: %q does not name the client %q", ErrWrongAudience, aud, m.ClientID)
	}
	if azp := claims.String("azp"); len(aud) > 1 && azp != "" && azp != m.ClientID {
		return nil, fmt.Errorf("%w: authorized party %q is not the client %q", ErrWrongAudience, azp, m.ClientID)
	}
	if err := c.checkTimes(claims, true); err != nil {
		return nil, err
	}
	if got := claims.String("nonce"); subtle.ConstantTimeCompare([]byte(got), []byte(nonce)) != 1 {
		return nil, ErrNonceMismatch
	}
	if claims.Subject() == "" {
		return nil, fmt.Errorf("%w: sub", ErrMissingClaim)
	}
	return claims, nil
}

// VerifyJWT verifies a token of a JWT method: signed (with one of Algorithms) by a key from the
// method's JWKS URL or else its issuer's discovery document, iss equal to the method's issuer
// (which it must have: a method that checked no iss would take any token its keys signed as any
// issuer's, and its identities are linked by issuer and subject), aud naming one of the method's audiences, exp present and not passed, nbf and
// iat (when present) not in the future, all within Leeway, and sub present.
func (c *Client) VerifyJWT(ctx context.Context, m Method, raw string) (Claims, error) {
	if m.Kind != KindJWT {
		return nil, fmt.Errorf("%w: not a JWT method", ErrMethod)
	}
	if len(m.Audiences) == 0 {
		return nil, fmt.Errorf("%w: a JWT method needs at least one audience", ErrMethod)
	}
	if m.Issuer == "" {
		return nil, fmt.Errorf("%w: a JWT method needs an issuer", ErrMethod)
	}
	jwksURL := m.JWKSURL
	if jwksURL == "" {
		p, err := c.discovery.Provider(ctx, m.Issuer)
		if err != nil {
			return nil, err
		}
		jwksURL = p.JWKSURI
	}
	claims, err := c.verifySigned(ctx, c.KeySet(jwksURL), raw)
	if err != nil {
		return nil, err
	}
	if iss := claims.Issuer(); iss != m.Issuer {
		return nil, fmt.Errorf("%w: %q, want %q", ErrWrongIssuer, iss, m.Issuer)
	}
	aud := claims.Strings("aud")
	if !slices.ContainsFunc(m.Audiences, func(a string) bool { return slices.Contains(aud, a) }) {
		return nil, fmt.Errorf("%w: %q names none of %q", ErrWrongAudience, aud, m.Audiences)
	}
	if err := c.checkTimes(claims, false); err != nil {
		return nil, err
	}
	if claims.Subject() == "" {
		return nil, fmt.Errorf("%w: sub", ErrMissingClaim)
	}
	return claims, nil
}

// verifySigned checks raw's signature with ks and decodes its claims.
func (c *Client) verifySigned(ctx context.Context, ks *KeySet, raw string) (Claims, error) {
	payload, err := ks.VerifySignature(ctx, raw)
	if err != nil {
		return nil, err
	}
	return decodeClaims(payload)
}

// checkTimes checks exp (required), nbf and iat (required when needIAT) against the clock, with
// Leeway.
func (c *Client) checkTimes(claims Claims, needIAT bool) error {
	now := c.opts.Now()
	exp, ok, err := claims.Time("exp")
	if err != nil {
		return err
	}
	if !ok {
		return fmt.Errorf("%w: exp", ErrMissingClaim)
	}
	if !now.Before(exp.Add(Leeway)) {
		return fmt.Errorf("%w at %s", ErrExpired, exp.UTC().Format(time.RFC3339))
	}
	nbf, ok, err := claims.Time("nbf")
	if err != nil {
		return err
	}
	if ok && now.Add(Leeway).Before(nbf) {
		return fmt.Errorf("%w before %s", ErrNotYetValid, nbf.UTC().Format(time.RFC3339))
	}
	iat, ok, err := claims.Time("iat")
	if err != nil {
		return err
	}
	if !ok && needIAT {
		return fmt.Errorf("%w: iat", ErrMissingClaim)
	}
	if ok && now.Add(Leeway).Before(iat) {
		return fmt.Errorf("%w: issued in the future, at %s", ErrNotYetValid, iat.UTC().Format(time.RFC3339))
	}
	return nil
}
