// Package hello is an example of a Better Compute module written outside the repository's main
// module, with only the public API (packages module and compute): it adds a method
// (greetings/create, greetings/list), a migration (the hello_greetings table) and a reconciler
// that writes each greeting. Its command line is the five-line main in cmd/better-compute.
package hello

import (
	"io/fs"

	"github.com/better-compute/better-compute/examples/hello/migrations"
	"github.com/better-compute/better-compute/module"
)

// Name is the module's name in configuration: modules: [hello].
const Name = "hello"

// Kind is the reconciler's queue: one key per greeting to write.
const Kind = "hello.greeting"

// Info registers the module in a program.
func Info() module.Info {
	return module.Info{Name: Name, New: func() module.Module { return &Module{} }}
}

// Module is one deployment's hello module. It takes no configuration.
type Module struct{}

var (
	_ module.APIProvider    = (*Module)(nil)
	_ module.Migrator       = (*Module)(nil)
	_ module.WorkerProvider = (*Module)(nil)
)

// Name is Name.
func (*Module) Name() string { return Name }

// Migrations are the module's schema.
func (*Module) Migrations() fs.FS { return migrations.FS }

// Services are the module's API: HelloService.
func (*Module) Services() []module.Service { return []module.Service{service()} }

// Workers are the module's reconciler, in the controllers role.
func (*Module) Workers(w module.Worker) (module.Workers, error) {
	return module.Workers{Reconcilers: []module.Reconciliation{{Reconciler: &writer{pool: w.Pool, log: w.Logger}}}}, nil
}
