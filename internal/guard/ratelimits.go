package guard

import (
	"fmt"
	"net/http"
	"net/netip"
	"strconv"
	"time"

	"connectrpc.com/connect"

	"github.com/better-compute/better-compute/internal/auth"
	"github.com/better-compute/better-compute/internal/metrics"
	"github.com/better-compute/better-compute/internal/quota"
	"github.com/better-compute/better-compute/internal/ratelimit"
)

// DefaultMaxBuckets is how many token buckets each of the guard's limiters keeps when
// RateLimits.MaxBuckets is zero.
const DefaultMaxBuckets = 100_000

// RetryAfterHeader tells a caller refused by a token bucket or a per-minute cap how many whole
// seconds to wait.
const RetryAfterHeader = "Retry-After"

// RateLimits configure the guard's token buckets (in memory of this process: with n API
// replicas a caller may get n times the rate) and the tenant caps it hands to every call. The
// zero value limits nothing.
type RateLimits struct {
	// PerAddress limits calls per client address (an IPv6 client per /64), checked before
	// authentication so a flood never reaches the database.
	PerAddress ratelimit.Limit
	// PerKey limits calls per API key (per principal for credentials without a key id), checked
	// right after authentication.
	PerKey ratelimit.Limit
	// MaxBuckets bounds each limiter's buckets; DefaultMaxBuckets when zero.
	MaxBuckets int
	// TrustedProxies are the reverse proxies whose X-Forwarded-For names the client; with none,
	// the client is the connection's remote address.
	TrustedProxies []netip.Prefix
	// Tenant are the per-tenant caps the create handlers check (see package quota); zero fields
	// take their defaults.
	Tenant quota.Limits
	// ExpensivePerTenant bounds the expensive methods' calls (registry.Method.Expensive) each
	// tenant runs at once in this process; DefaultExpensiveCallsPerTenant when zero, no bound
	// when negative.
	ExpensivePerTenant int
}

// WithRateLimits installs the token buckets and tenant caps of rl.
func (g *Guard) WithRateLimits(rl RateLimits) *Guard {
	n := rl.MaxBuckets
	if n <= 0 {
		n = DefaultMaxBuckets
	}
	g.byAddress = ratelimit.New(rl.PerAddress, n)
	g.byKey = ratelimit.New(rl.PerKey, n)
	g.proxies = ratelimit.NewProxies(rl.TrustedProxies)
	g.tenantLimits = rl.Tenant
	g.expensive = nil
	switch n := rl.ExpensivePerTenant; {
	case n == 0:
		g.expensive = newTenantSlots(DefaultExpensiveCallsPerTenant)
	case n > 0:
		g.expensive = newTenantSlots(n)
	}
	return g
}

// WithRefusals makes the guard count anonymous refusals and rate-limited calls in r.
func (g *Guard) WithRefusals(r *metrics.Refusals) *Guard {
	g.refusals = r
	return g
}

// clientKey is the bucket key of the call's client address, by the trusted-proxy rules.
func (g *Guard) clientKey(h http.Header, peer connect.Peer) string {
	return ratelimit.AddressKey(g.proxies.Client(peer.Addr, h))
}

// limitAddress takes a token from the bucket of the client address key.
func (g *Guard) limitAddress(key string) error {
	if g.byAddress == nil {
		return nil
	}
	ok, wait := g.byAddress.Allow(key)
	if ok {
		return nil
	}
	g.refusals.RateLimited(metrics.BucketAddress)
	return rateLimited("client address", "rateLimits.perAddress", wait)
}

// limitKey takes a token from the bucket of the principal's API key.
func (g *Guard) limitKey(p *auth.Principal) error {
	if g.byKey == nil {
		return nil
	}
	key := "principal:" + p.ID.String()
	if p.KeyID != "" {
		key = "key:" + p.KeyID
	}
	ok, wait := g.byKey.Allow(key)
	if ok {
		return nil
	}
	g.refusals.RateLimited(metrics.BucketKey)
	return rateLimited("API key", "rateLimits.perKey", wait)
}

// rateLimited is the refusal of a call over a token bucket: ResourceExhausted with Retry-After.
func rateLimited(what, key string, wait time.Duration) error {
	secs := ratelimit.RetryAfterSeconds(wait)
	cerr := connect.NewError(connect.CodeResourceExhausted,
		fmt.Errorf("too many calls from this %s (%s); retry in %ds", what, key, secs))
	cerr.Meta().Set(RetryAfterHeader, strconv.Itoa(secs))
	return cerr
}
