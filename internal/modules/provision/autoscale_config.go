package provision

import (
	"fmt"
	"time"

	"github.com/better-compute/better-compute/module"
)

// AutoscalingConfig is the module's autoscaling section: per-tenant limits and the autoscaler's
// pace. A zero value takes its default (defaultAutoscaling).
type AutoscalingConfig struct {
	// MaxPoolsPerTenant caps how many of a tenant's pools may autoscale.
	MaxPoolsPerTenant int `yaml:"maxPoolsPerTenant"`
	// MaxMachinesPerPool caps a pool's max. A tenant's machines stay under maxMachinesPerTenant
	// too, scaled or not.
	MaxMachinesPerPool int `yaml:"maxMachinesPerPool"`
	// Interval is how often the autoscaler looks at each scaled pool: the delay between a lease
	// becoming unschedulable (after its scale-up delay) and the machines asked for, at most.
	Interval time.Duration `yaml:"interval"`
}

// defaultAutoscaling is the section's defaults.
var defaultAutoscaling = AutoscalingConfig{MaxPoolsPerTenant: 20, MaxMachinesPerPool: 100, Interval: 5 * time.Second}

// withDefaults fills the zero values with the defaults.
func (c AutoscalingConfig) withDefaults() AutoscalingConfig {
	if c.MaxPoolsPerTenant == 0 {
		c.MaxPoolsPerTenant = defaultAutoscaling.MaxPoolsPerTenant
	}
	if c.MaxMachinesPerPool == 0 {
		c.MaxMachinesPerPool = defaultAutoscaling.MaxMachinesPerPool
	}
	if c.Interval == 0 {
		c.Interval = defaultAutoscaling.Interval
	}
	return c
}

func (c AutoscalingConfig) validate() []error {
	c = c.withDefaults()
	var errs []error
	bad := func(key, msg string) {
		errs = append(errs, &module.FieldError{Key: "autoscaling." + key, Message: msg})
	}
	if c.MaxPoolsPerTenant < 1 || c.MaxPoolsPerTenant > 10000 {
		bad("maxPoolsPerTenant", "must be 1 to 10000")
	}
	if c.MaxMachinesPerPool < 1 || c.MaxMachinesPerPool > 10000 {
		bad("maxMachinesPerPool", "must be 1 to 10000")
	}
	if c.Interval < 100*time.Millisecond || c.Interval > 5*time.Minute {
		bad("interval", fmt.Sprintf("must be %s to %s", 100*time.Millisecond, 5*time.Minute))
	}
	return errs
}
