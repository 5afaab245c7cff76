package daemon

import (
	"errors"
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"slices"
	"sync"

	"github.com/better-compute/better-compute/internal/command"
)

// fakeFailTypes are the command types whose failure a FakeDaemon can inject, and FailTypes'
// default.
var fakeFailTypes = []string{command.Upgrade, command.Reboot, command.Configure, command.Exec}

// Validate checks the options a FakeDaemon refuses to start with: a FailRate outside 0 to 1,
// FailTypes other than upgrade, reboot, configure and exec, a negative RebootDowntime, and a bad
// tunnel allow list. The simulator and dev check their flags with it before starting machines.
func (o FakeOptions) Validate() error {
	if !(o.FailRate >= 0 && o.FailRate <= 1) {
		return fmt.Errorf("the fail rate must be between 0 and 1, got %v", o.FailRate)
	}
	for _, t := range o.FailTypes {
		if !slices.Contains(fakeFailTypes, t) {
			return fmt.Errorf("cannot inject failures of %q commands: only of %v", t, fakeFailTypes)
		}
	}
	if o.RebootDowntime < 0 {
		return errors.New("the reboot downtime must not be negative")
	}
	return ValidateTunnelPorts(o.TunnelPorts)
}

// failer draws which commands a FakeDaemon fails: each command of its types, on a daemon
// FailNodes picks, fails with probability rate, from a random source seeded with the seed and the
// hostname, so that the same commands in the same order fail the same way.
type failer struct {
	rate     float64
	types    []string
	hostname string
	pick     func(hostname string) bool

	mu sync.Mutex
	r  *rand.Rand
}

func newFailer(opts FakeOptions, hostname string) *failer {
	types := opts.FailTypes
	if len(types) == 0 {
		types = fakeFailTypes
	}
	h := fnv.New64a()
	_, _ = h.Write([]byte(hostname))
	return &failer{
		rate: opts.FailRate, types: slices.Clone(types), hostname: hostname, pick: opts.FailNodes,
		r: rand.New(rand.NewPCG(opts.Seed, h.Sum64())),
	}
}

// fails reports whether this command of type typ is to fail.
func (fl *failer) fails(typ string) bool {
	if fl.rate <= 0 || !slices.Contains(fl.types, typ) {
		return false
	}
	if fl.pick != nil && !fl.pick(fl.hostname) {
		return false
	}
	fl.mu.Lock()
	defer fl.mu.Unlock()
	return fl.r.Float64() < fl.rate
}
