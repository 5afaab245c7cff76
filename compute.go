// Package compute is Better Compute as a library: a deployment of the control plane built from a
// Config, inside a program of your own. It gives the API as an http.Handler to mount under any
// prefix of your server, beside routes of your own (checked against the API's, see Route); the
// gateway and the worker roles, started in your process (Start); the schema (Migrate); and the
// checks of `better-compute doctor` (Doctor). The modules a deployment can enable are the ones
// the program compiles in (Config.Modules; package module says how to write one).
//
// The better-compute binary is this package too: its main is
//
//	func main() { compute.Main(compute.StandardModules()...) }
//
// and a custom build with a module of your own is the same line with it added.
package compute

import (
	"os"

	"github.com/better-compute/better-compute/internal/cli"
	"github.com/better-compute/better-compute/internal/config"
	"github.com/better-compute/better-compute/internal/modules/standard"
	"github.com/better-compute/better-compute/module"
)

// Main runs the better-compute command line (serve, dev, migrate, doctor, the API's commands,
// …) with modules compiled in, and exits the process: 0 on success, non-zero with the reason on
// standard error otherwise. Every module's methods get commands, as the core's do.
func Main(modules ...module.Info) {
	cli.Main(modules)
	os.Exit(0)
}

// StandardModules are the modules the released binary compiles in: events (NATS) and provision
// (with its simulated, metal and vps providers).
func StandardModules() []module.Info { return standard.Modules() }

// The roles Start runs.
const (
	// RoleAPI builds the API: served by Handler, or on Config.Listen.
	RoleAPI = config.RoleAPI
	// RoleGateway serves daemon sessions (config gateway.listen) and the internal control API.
	RoleGateway = config.RoleGateway
	// RoleControllers runs the reconcilers (node control, workflows, the modules').
	RoleControllers = config.RoleControllers
	// RoleScheduler runs the placer and the other scheduler reconcilers.
	RoleScheduler = config.RoleScheduler
	// RoleSinks delivers the outbox to webhooks and the modules' sinks.
	RoleSinks = config.RoleSinks
	// RoleIAM runs IAM background jobs (key and session expiry).
	RoleIAM = config.RoleIAM
)

// Roles are every role, in the order Start runs them.
func Roles() []string { return config.Roles() }
