package sso

import (
	authv1 "github.com/better-compute/better-compute/gen/go/bettercompute/auth/v1"
)

// Kind is how a Method verifies tokens.
type Kind int

// The kinds of Method.
const (
	// KindOIDC: ID tokens from an OpenID provider's code or device flow (VerifyIDToken).
	KindOIDC Kind = iota + 1
	// KindJWT: tokens a platform signed for a machine, such as CI workload identity (VerifyJWT).
	KindJWT
)

// Method is what verifying a token of an auth method needs; the API maps the stored method
// into it.
type Method struct {
	Kind Kind
	// Issuer is the provider's issuer URL, always required and always checked against the
	// token's iss.
	Issuer string
	// ClientID is the OIDC client: ID tokens must name it in aud.
	ClientID string
	// JWKSURL is where a JWT method's keys are when not in the issuer's discovery document.
	JWKSURL string
	// Audiences are the audiences a JWT method's tokens must name one of.
	Audiences []string
	// ClaimPaths say where groups, email and name are.
	ClaimPaths ClaimPaths
}

// ClaimPaths say where a method's tokens carry groups, email and name, as dot paths into the
// claims; empty means the claim of that name.
type ClaimPaths struct {
	Groups string
	Email  string
	Name   string
}

// ClaimPathsFromProto converts the API's claim paths.
func ClaimPathsFromProto(p *authv1.ClaimPaths) ClaimPaths {
	return ClaimPaths{Groups: p.GetGroups(), Email: p.GetEmail(), Name: p.GetName()}
}

// Resolve maps a selector's claim to a path: "groups", "email" and "name" to the method's paths
// for them (those names by default), any other claim to itself.
func (p ClaimPaths) Resolve(claim string) string {
	pick := func(path string) string {
		if path == "" {
			return claim
		}
		return path
	}
	switch claim {
	case "groups":
		return pick(p.Groups)
	case "email":
		return pick(p.Email)
	case "name":
		return pick(p.Name)
	}
	return claim
}
