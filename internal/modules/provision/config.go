package provision

import (
	"errors"
	"fmt"
	"net"
	"slices"
	"strings"
	"time"

	"github.com/better-compute/better-compute/module"
)

// Config is the module's configuration section.
type Config struct {
	// Providers are the provider kinds this deployment enables, among those the binary has;
	// classes may name only these.
	Providers []string `yaml:"providers"`
	// GatewayEndpoint is where provisioned machines' daemons dial in (host:port); the
	// deployment's gateway.publicEndpoint when empty.
	GatewayEndpoint string `yaml:"gatewayEndpoint"`
	// BootTimeout is how long a machine may boot before its node must have joined; past it the
	// machine fails (deleting it destroys it at the provider). Its join token expires then too.
	BootTimeout time.Duration `yaml:"bootTimeout"`
	// MaxMachinesPerTenant caps a tenant's machines that are not gone.
	MaxMachinesPerTenant int `yaml:"maxMachinesPerTenant"`
	// PollInterval is how often the controller looks again at a machine waiting for its node
	// (to join, become ready, drain).
	PollInterval time.Duration `yaml:"pollInterval"`
	// Autoscaling bounds and paces autoscaling pools.
	Autoscaling AutoscalingConfig `yaml:"autoscaling"`
	// AllowPrivateEndpoints lets classes' provider endpoints (Redfish service roots, an EC2
	// endpoint) be, or resolve to, loopback, link-local, private and other non-public
	// addresses: for BMCs on the deployment's own network, or emulators in tests. Off, such
	// endpoints are refused when a class is made and when a connection is dialled.
	AllowPrivateEndpoints bool `yaml:"allowPrivateEndpoints"`
	// Orphans says whether and how often the orphan sweep removes provider resources of this
	// deployment that no machine names.
	Orphans OrphansConfig `yaml:"orphans"`
}

// DefaultConfig is the configuration before the section is decoded: no provider enabled.
func DefaultConfig() Config {
	return Config{
		BootTimeout: 30 * time.Minute, MaxMachinesPerTenant: 100, PollInterval: 2 * time.Second,
		Autoscaling: defaultAutoscaling, Orphans: defaultOrphans,
	}
}

// Validate checks the section against the provider kinds the binary has; each problem is a
// *module.FieldError naming its key.
func (c *Config) Validate(have []string) error {
	var errs []error
	bad := func(key, format string, args ...any) {
		errs = append(errs, &module.FieldError{Key: key, Message: fmt.Sprintf(format, args...)})
	}
	if len(c.Providers) == 0 {
		bad("providers", "enable at least one provider kind (this binary has %s)", list(have))
	}
	for i, k := range c.Providers {
		switch {
		case !slices.Contains(have, k):
			bad(fmt.Sprintf("providers[%d]", i), "this binary has no provider %q (it has %s)", k, list(have))
		case slices.Index(c.Providers, k) != i:
			bad(fmt.Sprintf("providers[%d]", i), "%q is listed twice", k)
		}
	}
	if c.GatewayEndpoint != "" {
		if _, port, err := net.SplitHostPort(c.GatewayEndpoint); err != nil || port == "" {
			bad("gatewayEndpoint", "must be host:port, for example gateway.example.com:7443")
		}
	}
	if c.BootTimeout < time.Minute || c.BootTimeout > 24*time.Hour {
		bad("bootTimeout", "must be 1m to 24h")
	}
	if c.MaxMachinesPerTenant < 1 || c.MaxMachinesPerTenant > 100000 {
		bad("maxMachinesPerTenant", "must be 1 to 100000")
	}
	if c.PollInterval < 100*time.Millisecond || c.PollInterval > time.Minute {
		bad("pollInterval", "must be 100ms to 1m")
	}
	errs = append(errs, c.Autoscaling.validate()...)
	errs = append(errs, c.Orphans.validate()...)
	return errors.Join(errs...)
}

func list(kinds []string) string {
	if len(kinds) == 0 {
		return "none"
	}
	return strings.Join(kinds, ", ")
}
