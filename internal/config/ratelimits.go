package config

import (
	"fmt"
	"net/netip"

	"github.com/better-compute/better-compute/internal/quota"
	"github.com/better-compute/better-compute/internal/ratelimit"
)

// RateLimits bound how fast callers may call the API and how much each tenant may create.
//
// The token buckets live in the memory of each API process: with n API replicas behind a
// balancer a caller may get up to n times a rate. The tenant caps are counted in the database,
// so they hold across replicas.
type RateLimits struct {
	// PerAddress limits calls per client address (an IPv6 client per /64), before
	// authentication. Default 100 a second, bursts of 200.
	PerAddress RateBucket `yaml:"perAddress"`
	// PerKey limits calls per API key, right after authentication. Default 50 a second, bursts
	// of 100.
	PerKey RateBucket `yaml:"perKey"`
	// MaxBuckets bounds how many buckets each of the two limiters keeps; the least recently used
	// is evicted to make room. Default 100000.
	MaxBuckets int `yaml:"maxBuckets"`
	// TrustedProxies lists the reverse proxies (CIDR prefixes or addresses) whose
	// X-Forwarded-For header names the client. Default none: the client is the connection's
	// remote address. Behind an HTTP proxy that is not listed, every caller shares the proxy's
	// bucket.
	TrustedProxies []string `yaml:"trustedProxies"`
	// Tenant caps what each tenant may hold or create.
	Tenant TenantLimits `yaml:"tenant"`
	// ExpensiveCallsPerTenant bounds the calls of expensive methods (those whose cost grows with
	// the tenant's data, such as usage/export) one tenant runs at once in each API process; one
	// more is refused with resource_exhausted and Retry-After. Default 2.
	ExpensiveCallsPerTenant int `yaml:"expensiveCallsPerTenant"`
}

// RateBucket is a token bucket: Rate calls a second sustained, Burst at once.
type RateBucket struct {
	// Rate is calls a second; 0 turns the bucket off.
	Rate float64 `yaml:"rate"`
	// Burst is how many calls may come at once after a pause; at least 1 when Rate is set.
	Burst int `yaml:"burst"`
}

// TenantLimits are the per-tenant caps, the same for every tenant. A create that would pass
// one is refused with resource_exhausted naming its key.
type TenantLimits struct {
	// Nodes caps the nodes that are neither revoked nor retired; checked at join. Default 10000.
	Nodes int `yaml:"nodes"`
	// JoinTokens caps the join tokens that can still be used. Default 1000.
	JoinTokens int `yaml:"joinTokens"`
	// Pools caps the pools. Default 1000.
	Pools int `yaml:"pools"`
	// Principals caps the users and service accounts. Default 1000.
	Principals int `yaml:"principals"`
	// APIKeys caps the API keys that have not expired. Default 1000.
	APIKeys int `yaml:"apiKeys"`
	// Webhooks caps the webhooks. Default 20.
	Webhooks int `yaml:"webhooks"`
	// CommandsPerMinute caps the commands created in any minute. Default 6000.
	CommandsPerMinute int `yaml:"commandsPerMinute"`
	// PendingLeases caps the leases waiting to be placed, in every pool. Default 10000.
	PendingLeases int `yaml:"pendingLeases"`
	// Workflows caps the running or paused workflows made by workflows/create. Default 16.
	Workflows int `yaml:"workflows"`
}

// Bounds of the rate limit keys.
const (
	maxRate           = 1_000_000
	minMaxBuckets     = 1_000
	maxMaxBuckets     = 1_000_000
	maxTenantLimit    = 1_000_000
	maxTrustedRanges  = 1_000
	maxExpensiveCalls = 1_000
)

// defaultRateLimits are the rate limits when neither the file nor the environment sets them.
func defaultRateLimits() RateLimits {
	return RateLimits{
		PerAddress:              RateBucket{Rate: 100, Burst: 200},
		PerKey:                  RateBucket{Rate: 50, Burst: 100},
		MaxBuckets:              100_000,
		ExpensiveCallsPerTenant: 2,
		Tenant: TenantLimits{
			Nodes:             quota.DefaultNodes,
			JoinTokens:        quota.DefaultJoinTokens,
			Pools:             quota.DefaultPools,
			Principals:        quota.DefaultPrincipals,
			APIKeys:           quota.DefaultAPIKeys,
			Webhooks:          quota.DefaultWebhooks,
			CommandsPerMinute: quota.DefaultCommandsPerMinute,
			PendingLeases:     quota.DefaultPendingLeases,
			Workflows:         quota.DefaultWorkflows,
		},
	}
}

// Proxies returns the trusted proxies as prefixes, skipping any that do not parse (which
// Validate reports).
func (r RateLimits) Proxies() []netip.Prefix {
	var out []netip.Prefix
	for _, s := range r.TrustedProxies {
		if p, err := ratelimit.ParsePrefix(s); err == nil {
			out = append(out, p)
		}
	}
	return out
}

func (c *Config) checkRateLimits(ps *problems) {
	r := c.RateLimits
	for _, kb := range []struct {
		key string
		b   RateBucket
	}{{"rateLimits.perAddress", r.PerAddress}, {"rateLimits.perKey", r.PerKey}} {
		key, b := kb.key, kb.b
		if !(b.Rate >= 0 && b.Rate <= maxRate) {
			ps.add(key+".rate", "must be from 0 (off) to %d calls a second, got %v", maxRate, b.Rate)
		}
		if b.Rate > 0 && (b.Burst < 1 || b.Burst > maxRate) {
			ps.add(key+".burst", "must be from 1 to %d when %s.rate is set, got %d", maxRate, key, b.Burst)
		}
	}
	if r.MaxBuckets < minMaxBuckets || r.MaxBuckets > maxMaxBuckets {
		ps.add("rateLimits.maxBuckets", "must be from %d to %d, got %d", minMaxBuckets, maxMaxBuckets, r.MaxBuckets)
	}
	if r.ExpensiveCallsPerTenant < 1 || r.ExpensiveCallsPerTenant > maxExpensiveCalls {
		ps.add("rateLimits.expensiveCallsPerTenant", "must be from 1 to %d, got %d", maxExpensiveCalls, r.ExpensiveCallsPerTenant)
	}
	if len(r.TrustedProxies) > maxTrustedRanges {
		ps.add("rateLimits.trustedProxies", "must list at most %d entries, got %d", maxTrustedRanges, len(r.TrustedProxies))
	}
	for i, s := range r.TrustedProxies {
		if _, err := ratelimit.ParsePrefix(s); err != nil {
			ps.add(fmt.Sprintf("rateLimits.trustedProxies[%d]", i), "must be an IP address or CIDR prefix like 10.0.0.0/8, got %q", s)
		}
	}
	t := r.Tenant
	for _, l := range []struct {
		key string
		v   int
	}{
		{"rateLimits.tenant.nodes", t.Nodes},
		{"rateLimits.tenant.joinTokens", t.JoinTokens},
		{"rateLimits.tenant.pools", t.Pools},
		{"rateLimits.tenant.principals", t.Principals},
		{"rateLimits.tenant.apiKeys", t.APIKeys},
		{"rateLimits.tenant.webhooks", t.Webhooks},
		{"rateLimits.tenant.commandsPerMinute", t.CommandsPerMinute},
		{"rateLimits.tenant.pendingLeases", t.PendingLeases},
		{"rateLimits.tenant.workflows", t.Workflows},
	} {
		if l.v < 1 || l.v > maxTenantLimit {
			ps.add(l.key, "must be from 1 to %d, got %d", maxTenantLimit, l.v)
		}
	}
}
