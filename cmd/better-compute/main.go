// Command better-compute is the control plane: one binary, every role, started from one
// configuration. The work is done by the library packages; this only maps flags to them.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/better-compute/better-compute/internal/cli"
	"github.com/better-compute/better-compute/internal/modules/events"
	"github.com/better-compute/better-compute/internal/modules/provision"
	"github.com/better-compute/better-compute/internal/moduleset"
	"github.com/better-compute/better-compute/internal/provision/metal"
	"github.com/better-compute/better-compute/internal/provision/simprovider"
	"github.com/better-compute/better-compute/internal/provision/vps"
	"github.com/better-compute/better-compute/internal/registry"
)

// modules are the modules compiled into this binary, which a configuration's modules key may
// enable. A module is in the binary exactly when this list names it.
var modules = moduleset.Registry{events.Info(), provision.Info(provision.Providers{
	simprovider.Kind: simprovider.Default().Factory,
	metal.Kind:       metal.Factory,
	vps.Kind:         vps.Factory,
})}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := newRootCommand().ExecuteContext(ctx)
	stop()
	if err != nil {
		cli.PrintError(os.Stderr, err)
		os.Exit(cli.ExitCode(err))
	}
}

// apiRegistry is the method registry of every API this binary can serve: the core's and every
// compiled-in module's, enabled or not, so the CLI has a command for each.
func apiRegistry(infos moduleset.Registry) (*registry.Registry, error) {
	set := make(moduleset.Set, 0, len(infos))
	for _, in := range infos {
		set = append(set, in.New())
	}
	return registry.FromGlobal(set.Files()...)
}
