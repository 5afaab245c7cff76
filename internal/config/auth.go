package config

import "time"

// Auth configures sign-in through identity providers (auth.*; issue 23): the lifetimes of the
// sessions a sign-in starts and of the tokens the CLI and machines get, and how the providers
// are reached.
type Auth struct {
	// Sessions bound the sessions of the dashboard and the CLI.
	Sessions AuthSessions `yaml:"sessions"`
	// TokenTTL bounds a session started by auth/exchangeToken (it also ends when the exchanged
	// token does). Default 1h, from 1m to 24h.
	TokenTTL time.Duration `yaml:"tokenTTL"`
	// JWKSCooldown is the least time between two fetches of a provider's keys on an unknown key
	// id, so tokens with bogus key ids cannot make the API fetch in a loop. Default 5m, from 1s
	// to 1h.
	JWKSCooldown time.Duration `yaml:"jwksCooldown"`
	// AllowPrivateIssuers lets auth methods' issuer and JWKS URLs be plain http and name
	// loopback, link-local and private addresses (a provider inside the deployment's network,
	// or a test's). Off by default.
	AllowPrivateIssuers bool `yaml:"allowPrivateIssuers"`
}

// AuthSessions bound sessions: one ends IdleTimeout after its last use or AbsoluteTimeout after
// it started, whichever comes first.
type AuthSessions struct {
	// IdleTimeout ends a session unused for this long. Default 12h, from 1m to 720h.
	IdleTimeout time.Duration `yaml:"idleTimeout"`
	// AbsoluteTimeout ends a session this long after its sign-in, however used. Default 168h,
	// from auth.sessions.idleTimeout to 2160h.
	AbsoluteTimeout time.Duration `yaml:"absoluteTimeout"`
}

// Bounds of auth.*.
const (
	minSessionIdle     = time.Minute
	maxSessionIdle     = 30 * 24 * time.Hour
	maxSessionAbsolute = 90 * 24 * time.Hour
	minTokenTTL        = time.Minute
	maxTokenTTL        = 24 * time.Hour
	minJWKSCooldown    = time.Second
	maxJWKSCooldown    = time.Hour
)

func defaultAuth() Auth {
	return Auth{
		Sessions:     AuthSessions{IdleTimeout: 12 * time.Hour, AbsoluteTimeout: 7 * 24 * time.Hour},
		TokenTTL:     time.Hour,
		JWKSCooldown: 5 * time.Minute,
	}
}

func (c *Config) checkAuth(ps *problems) {
	a := c.Auth
	idle := a.Sessions.IdleTimeout
	if idle < minSessionIdle || idle > maxSessionIdle {
		ps.add("auth.sessions.idleTimeout", "must be from %s to %s, got %s", minSessionIdle, maxSessionIdle, idle)
	}
	if abs := a.Sessions.AbsoluteTimeout; abs < idle || abs > maxSessionAbsolute {
		ps.add("auth.sessions.absoluteTimeout", "must be from auth.sessions.idleTimeout (%s) to %s, got %s", idle, maxSessionAbsolute, abs)
	}
	if a.TokenTTL < minTokenTTL || a.TokenTTL > maxTokenTTL {
		ps.add("auth.tokenTTL", "must be from %s to %s, got %s", minTokenTTL, maxTokenTTL, a.TokenTTL)
	}
	if a.JWKSCooldown < minJWKSCooldown || a.JWKSCooldown > maxJWKSCooldown {
		ps.add("auth.jwksCooldown", "must be from %s to %s, got %s", minJWKSCooldown, maxJWKSCooldown, a.JWKSCooldown)
	}
}
