package provision

import (
	"fmt"
	"time"

	"github.com/better-compute/better-compute/module"
)

// OrphansConfig is the module's orphans section: whether the orphan sweep removes the provider
// resources of this deployment that no machine names, and its pace. A zero value takes its
// default (defaultOrphans): report only.
type OrphansConfig struct {
	// Remove makes the sweep delete, at their provider, orphans older than MinAge; when false it
	// only reports them (an event each, and the doctor check).
	Remove bool `yaml:"remove"`
	// MinAge is how long an orphan must have been seen (or exist, where a provider says when it
	// made it) before the sweep removes it, so a resource a person is still tagging by hand, or
	// one of a process that still runs after its claim expired, is given time.
	MinAge time.Duration `yaml:"minAge"`
	// Interval is how often the sweep lists each class's provider.
	Interval time.Duration `yaml:"interval"`
}

// defaultOrphans is the section's defaults.
var defaultOrphans = OrphansConfig{MinAge: 15 * time.Minute, Interval: 10 * time.Minute}

// The section's bounds.
const (
	minOrphanAge      = time.Minute
	maxOrphanAge      = 7 * 24 * time.Hour
	minOrphanInterval = 30 * time.Second
	maxOrphanInterval = 24 * time.Hour
)

// withDefaults fills the zero durations with the defaults.
func (c OrphansConfig) withDefaults() OrphansConfig {
	if c.MinAge == 0 {
		c.MinAge = defaultOrphans.MinAge
	}
	if c.Interval == 0 {
		c.Interval = defaultOrphans.Interval
	}
	return c
}

func (c OrphansConfig) validate() []error {
	c = c.withDefaults()
	var errs []error
	bad := func(key, msg string) {
		errs = append(errs, &module.FieldError{Key: "orphans." + key, Message: msg})
	}
	if c.MinAge < minOrphanAge || c.MinAge > maxOrphanAge {
		bad("minAge", fmt.Sprintf("must be %s to %s", minOrphanAge, maxOrphanAge))
	}
	if c.Interval < minOrphanInterval || c.Interval > maxOrphanInterval {
		bad("interval", fmt.Sprintf("must be %s to %s", minOrphanInterval, maxOrphanInterval))
	}
	return errs
}
