package server

import (
	"time"

	"github.com/better-compute/better-compute/internal/auth"
)

// AuthOptions configure sign-in through identity providers (config auth.*).
type AuthOptions struct {
	// Sessions bound the sessions sign-ins start; the embedded IAM checks their idle timeout.
	Sessions auth.SessionLifetimes
	// TokenTTL bounds the sessions of auth/exchangeToken (config auth.tokenTTL).
	TokenTTL time.Duration
	// JWKSCooldown is the least time between fetches of a provider's keys on an unknown key id
	// (config auth.jwksCooldown).
	JWKSCooldown time.Duration
	// AllowPrivateIssuers lets auth methods' issuers and JWKS URLs be http and private
	// addresses (config auth.allowPrivateIssuers).
	AllowPrivateIssuers bool
	// Flows bound the sign-ins in progress that anonymous callers can start (config
	// auth.flows.*); zero fields take their defaults.
	Flows FlowLimits
	// Now is the clock tokens are checked against (time.Now when nil); tests move it.
	Now func() time.Time
}

// FlowLimits bound the sign-ins in progress (config auth.flows.*); zero fields take their
// defaults.
type FlowLimits struct {
	// PerAddress bounds the unfinished flows one client address (an IPv6 client per /64) has
	// started, over every method.
	PerAddress int
	// PerMethod bounds the unfinished flows of one method.
	PerMethod int
	// CountedFor is how long an unfinished flow counts against both caps; it stays usable until
	// it expires after that, so a user slow at the provider's login page still signs in.
	CountedFor time.Duration
}
