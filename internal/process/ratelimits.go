package process

import (
	"github.com/better-compute/better-compute/internal/config"
	"github.com/better-compute/better-compute/internal/guard"
	"github.com/better-compute/better-compute/internal/quota"
	"github.com/better-compute/better-compute/internal/ratelimit"
)

// rateLimits turns the configuration's rateLimits into the API guard's.
func rateLimits(c config.RateLimits) guard.RateLimits {
	t := c.Tenant
	return guard.RateLimits{
		PerAddress:         ratelimit.Limit{Rate: c.PerAddress.Rate, Burst: c.PerAddress.Burst},
		PerKey:             ratelimit.Limit{Rate: c.PerKey.Rate, Burst: c.PerKey.Burst},
		MaxBuckets:         c.MaxBuckets,
		TrustedProxies:     c.Proxies(),
		ExpensivePerTenant: c.ExpensiveCallsPerTenant,
		Tenant: quota.Limits{
			Nodes: t.Nodes, JoinTokens: t.JoinTokens, Pools: t.Pools, Principals: t.Principals,
			APIKeys: t.APIKeys, Webhooks: t.Webhooks, CommandsPerMinute: t.CommandsPerMinute,
			PendingLeases: t.PendingLeases,
			Workflows:     t.Workflows,
		},
	}
}
