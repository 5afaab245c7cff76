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
	// Flows bound the sign-ins in progress, which anyone may start.
	Flows AuthFlows `yaml:"flows"`
}

// AuthFlows bound the unfinished sign-ins (the dashboard's, auth/startLogin's and
// auth/startDeviceLogin's flows) anonymous callers can make the API hold: an unfinished flow
// counts against both caps for CountedFor after its start.
type AuthFlows struct {
	// PerAddress bounds one client address's unfinished flows (an IPv6 client per /64), over
	// every method. Default 20, from 1 to 10000.
	PerAddress int `yaml:"perAddress"`
	// PerMethod bounds one auth method's unfinished flows. Default 10000, from 1 to 1000000.
	PerMethod int `yaml:"perMethod"`
	// CountedFor is how long an unfinished flow counts against the caps; it stays usable for
	// its ten minutes. Default 2m, from 10s to 10m.
	CountedFor time.Duration `yaml:"countedFor"`
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
	maxFlowsPerAddress = 10_000
	maxFlowsPerMethod  = 1_000_000
	minFlowsCountedFor = 10 * time.Second
	maxFlowsCountedFor = 10 * time.Minute
)

func defaultAuth() Auth {
	return Auth{
		Sessions:     AuthSessions{IdleTimeout: 12 * time.Hour, AbsoluteTimeout: 7 * 24 * time.Hour},
		TokenTTL:     time.Hour,
		JWKSCooldown: 5 * time.Minute,
		Flows:        AuthFlows{PerAddress: 20, PerMethod: 10_000, CountedFor: 2 * time.Minute},
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
	if f := a.Flows; f.PerAddress < 1 || f.PerAddress > maxFlowsPerAddress {
		ps.add("auth.flows.perAddress", "must be from 1 to %d, got %d", maxFlowsPerAddress, f.PerAddress)
	}
	if f := a.Flows; f.PerMethod < 1 || f.PerMethod > maxFlowsPerMethod {
		ps.add("auth.flows.perMethod", "must be from 1 to %d, got %d", maxFlowsPerMethod, f.PerMethod)
	}
	if f := a.Flows; f.CountedFor < minFlowsCountedFor || f.CountedFor > maxFlowsCountedFor {
		ps.add("auth.flows.countedFor", "must be from %s to %s, got %s", minFlowsCountedFor, maxFlowsCountedFor, f.CountedFor)
	}
}
