// Command better-compute is the control plane: one binary, every role, started from one
// configuration. The work is done by the library packages; this only maps flags to them.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/better-compute/better-compute/internal/module"
	"github.com/better-compute/better-compute/internal/modules/events"
)

// modules are the modules compiled into this binary, which a configuration's modules key may
// enable. A module is in the binary exactly when this list names it.
var modules = module.Registry{events.Info()}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := newRootCommand().ExecuteContext(ctx)
	stop()
	if err != nil {
		// One line, whatever the error: drivers report each address tried on a line of its own.
		fmt.Fprintln(os.Stderr, "better-compute:", strings.Join(strings.Fields(err.Error()), " "))
		code := 1
		if ee := (*exitError)(nil); errors.As(err, &ee) {
			code = ee.code
		}
		os.Exit(code)
	}
}
