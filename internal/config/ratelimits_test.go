package config

import (
	"net/netip"
	"reflect"
	"slices"
	"strings"
	"testing"
)

func TestRateLimitsDefaults(t *testing.T) {
	t.Parallel()
	c, err := load(t, "", withSecret())
	if err != nil {
		t.Fatal(err)
	}
	want := RateLimits{
		PerAddress: RateBucket{Rate: 100, Burst: 200}, PerKey: RateBucket{Rate: 50, Burst: 100}, MaxBuckets: 100000, ExpensiveCallsPerTenant: 2,
		Tenant: TenantLimits{Nodes: 10000, JoinTokens: 1000, Pools: 1000, Principals: 1000, APIKeys: 1000, Webhooks: 20, CommandsPerMinute: 6000, PendingLeases: 10000, Workflows: 16},
	}
	if !reflect.DeepEqual(c.RateLimits, want) {
		t.Errorf("rateLimits = %+v, want %+v", c.RateLimits, want)
	}
}

func TestRateLimitsFromFileAndEnv(t *testing.T) {
	t.Parallel()
	c, err := load(t, "rateLimits:\n  perAddress: {rate: 2.5, burst: 5}\n  trustedProxies: [10.0.0.0/8, 192.0.2.7]\n  tenant:\n    pools: 7\n",
		withSecret("BETTER_COMPUTE_RATE_LIMITS_PER_KEY_RATE=0", "BETTER_COMPUTE_RATE_LIMITS_TENANT_API_KEYS=9",
			"BETTER_COMPUTE_RATE_LIMITS_TENANT_COMMANDS_PER_MINUTE=60"))
	if err != nil {
		t.Fatal(err)
	}
	r := c.RateLimits
	if r.PerAddress != (RateBucket{Rate: 2.5, Burst: 5}) || r.PerKey.Rate != 0 || r.Tenant.Pools != 7 || r.Tenant.APIKeys != 9 ||
		r.Tenant.CommandsPerMinute != 60 || r.Tenant.Nodes != 10000 {
		t.Errorf("rateLimits = %+v", r)
	}
	want := []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("192.0.2.7/32")}
	if got := r.Proxies(); !slices.Equal(got, want) {
		t.Errorf("Proxies() = %v, want %v", got, want)
	}
	vars := EnvVars()
	for _, name := range []string{
		"BETTER_COMPUTE_RATE_LIMITS_PER_ADDRESS_RATE", "BETTER_COMPUTE_RATE_LIMITS_PER_ADDRESS_BURST",
		"BETTER_COMPUTE_RATE_LIMITS_PER_KEY_RATE", "BETTER_COMPUTE_RATE_LIMITS_PER_KEY_BURST",
		"BETTER_COMPUTE_RATE_LIMITS_MAX_BUCKETS", "BETTER_COMPUTE_RATE_LIMITS_TRUSTED_PROXIES",
		"BETTER_COMPUTE_RATE_LIMITS_TENANT_NODES", "BETTER_COMPUTE_RATE_LIMITS_TENANT_JOIN_TOKENS",
		"BETTER_COMPUTE_RATE_LIMITS_TENANT_POOLS", "BETTER_COMPUTE_RATE_LIMITS_TENANT_PRINCIPALS",
		"BETTER_COMPUTE_RATE_LIMITS_TENANT_API_KEYS", "BETTER_COMPUTE_RATE_LIMITS_TENANT_WEBHOOKS",
		"BETTER_COMPUTE_RATE_LIMITS_TENANT_COMMANDS_PER_MINUTE", "BETTER_COMPUTE_RATE_LIMITS_EXPENSIVE_CALLS_PER_TENANT",
	} {
		if !slices.Contains(vars, name) {
			t.Errorf("EnvVars() lacks %s", name)
		}
	}
	// The redacted copy shares no memory with the original.
	red := c.Redacted()
	red.RateLimits.TrustedProxies[0] = "changed"
	if c.RateLimits.TrustedProxies[0] != "10.0.0.0/8" {
		t.Error("Redacted shares rateLimits.trustedProxies with the original")
	}
}

func TestRateLimitsValidation(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, yaml string
		env        []string
		key, want  string
	}{
		{"negative rate", "rateLimits: {perAddress: {rate: -1}}", nil, "rateLimits.perAddress.rate", "must be from 0 (off)"},
		{"rate without burst", "rateLimits: {perKey: {rate: 5, burst: 0}}", nil, "rateLimits.perKey.burst", "must be from 1"},
		{"rate not a number", "", []string{"BETTER_COMPUTE_RATE_LIMITS_PER_KEY_RATE=fast"}, "rateLimits.perKey.rate", "must be a number"},
		{"few buckets", "rateLimits: {maxBuckets: 10}", nil, "rateLimits.maxBuckets", "must be from 1000"},
		{"bad proxy", "", []string{"BETTER_COMPUTE_RATE_LIMITS_TRUSTED_PROXIES=10.0.0.0/8,proxy.internal"}, "rateLimits.trustedProxies[1]", "CIDR prefix"},
		{"no expensive calls", "rateLimits: {expensiveCallsPerTenant: 0}", nil, "rateLimits.expensiveCallsPerTenant", "must be from 1"},
		{"zero cap", "rateLimits: {tenant: {pools: 0}}", nil, "rateLimits.tenant.pools", "must be from 1"},
		{"huge cap", "", []string{"BETTER_COMPUTE_RATE_LIMITS_TENANT_COMMANDS_PER_MINUTE=2000000"}, "rateLimits.tenant.commandsPerMinute", "got 2000000"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := load(t, tc.yaml, withSecret(tc.env...))
			if err == nil {
				t.Fatal("loaded, want an error")
			}
			if keys := problemKeys(t, err); !slices.Equal(keys, []string{tc.key}) {
				t.Errorf("problem keys %q, want [%q]; error: %v", keys, tc.key, err)
			}
			if !strings.Contains(err.Error(), tc.key+": ") || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q, want it to contain %q and %q", err, tc.key+": ", tc.want)
			}
		})
	}
	// A bucket turned off needs no burst.
	if _, err := load(t, "rateLimits: {perAddress: {rate: 0, burst: 0}}", withSecret()); err != nil {
		t.Errorf("rate 0 without a burst: %v", err)
	}
}

// TestExampleDocumentsRateLimits: the example configuration's rateLimits section shows the
// defaults.
func TestExampleDocumentsRateLimits(t *testing.T) {
	t.Parallel()
	c, err := Load("../../better-compute.example.yaml", withSecret("BETTER_COMPUTE_DATABASE_URL=postgres://bc@db.internal/bc"))
	if err != nil {
		t.Fatal(err)
	}
	got, want := c.RateLimits, Default().RateLimits
	if len(got.TrustedProxies) != 0 {
		t.Errorf("example trusts proxies %q", got.TrustedProxies)
	}
	got.TrustedProxies = nil
	if !reflect.DeepEqual(got, want) {
		t.Errorf("example rateLimits %+v, defaults %+v", got, want)
	}
}
