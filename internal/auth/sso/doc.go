// Package sso verifies what identity providers say about the people and machines that sign in
// through a tenant's auth methods, and drives the OAuth 2.0 flows that obtain it. It keeps no
// state in the database: the API maps a stored auth method into a Method, asks a Client to verify
// the provider's token, and evaluates the method's binding rules on the verified Claims.
//
//   - Egress: issuer, JWKS, token and userinfo URLs are chosen by tenants, so every request goes
//     through webhook.CheckURL and webhook.NewClient's dialer (no private addresses unless the
//     deployment allows them), with a timeout and a size limit on every answer.
//   - Discovery caches providers' discovery documents by issuer.
//   - KeySet holds a provider's signing keys and refetches them on an unknown key id at most once
//     per cool-down, so tokens with bogus key ids cannot make it fetch in a loop.
//   - Client.VerifyIDToken and Client.VerifyJWT check a token's signature and claims and say why
//     they refuse one through the sentinel errors (ErrExpired, ErrWrongAudience, ...).
//   - Evaluate and ValidateRules apply binding rules.
//   - NewPKCE, NewState, NewNonce, AuthorizationURL, Client.Exchange, Client.UserInfo,
//     Client.StartDevice and Client.PollDevice carry the authorization code and device flows.
package sso
