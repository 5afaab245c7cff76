// Package standard is the modules the released better-compute binary compiles in: the events
// module (NATS) and the provision module with its simulated, metal and vps providers. A custom
// build lists these and its own (compute.StandardModules).
package standard

import (
	"github.com/better-compute/better-compute/internal/modules/events"
	"github.com/better-compute/better-compute/internal/modules/provision"
	"github.com/better-compute/better-compute/internal/provision/metal"
	"github.com/better-compute/better-compute/internal/provision/simprovider"
	"github.com/better-compute/better-compute/internal/provision/vps"
	"github.com/better-compute/better-compute/module"
)

// Modules are the standard modules, in the order the binary lists them. Each call returns a
// fresh slice.
func Modules() []module.Info {
	return []module.Info{events.Info(), provision.Info(provision.Providers{
		simprovider.Kind: simprovider.Default().Factory,
		metal.Kind:       metal.Factory,
		vps.Kind:         vps.Factory,
	})}
}
