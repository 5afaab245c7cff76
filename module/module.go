// Package module is how Better Compute is extended: a module is a Go package compiled into the
// binary (or into a program that embeds the control plane) and registered there explicitly — no
// init() side effects: the program's main lists its modules — then enabled per deployment by
// configuration:
//
//	modules:
//	  - events                 # a name alone: the module's defaults
//	  - name: events           # or a name and its configuration section
//	    config: {url: nats://nats:4222}
//
// A module contributes what it implements, each an optional interface of the value Info.New
// returns, as Caddy's modules do:
//
//   - [Configurable]: its configuration section, decoded strictly (unknown keys, wrong types and
//     unset ${NAME} references are errors) and validated, errors naming modules[i].config.<key>;
//   - [Migrator]: schema migrations, tracked per module and applied after the core's, with the
//     core's checksums;
//   - [APIProvider]: API services, whose methods enter the one method registry with permissions,
//     tenant scoping, audit and idempotency exactly like the core's (a module that is not enabled
//     has no routes); handlers find their caller with [CallerOf] and change state with [Admit];
//   - [WorkerProvider]: reconcilers and singleton jobs for the worker roles, and event sinks for
//     the sinks role, each dispatched under its own lease (a panic in any of them is recovered,
//     reported and retried, never fatal);
//   - [Checker]: doctor checks, reported as module.<name>.<check>, in the way Nomad fingerprints a
//     driver: reachable, configured as expected, keeping up.
//
// This package is the whole contract between the core and a module: it names no role. The
// program that assembles a deployment (package compute) hands a module's contributions to the
// roles as plain values.
package module

import (
	"io/fs"
)

// Info registers a module in a program.
type Info struct {
	// Name is the module's name in configuration, checks and metrics: lower-case letters, digits
	// and '-', at most 32.
	Name string
	// New returns a new, unconfigured instance; each process that enables the module makes one.
	New func() Module
}

// Module is an instance of a module. What it contributes is the optional interfaces of this
// package that it implements.
type Module interface {
	// Name is Info.Name.
	Name() string
}

// Configurable is a module with a configuration section.
type Configurable interface {
	Module
	// Config returns a pointer to the module's configuration struct (yaml tags, defaults set), for
	// its section to decode into.
	Config() any
	// Validate checks the decoded configuration. Problems that name a key are *FieldError (the
	// key relative to the section, for example "tls.caFile"); errors.Join combines several.
	Validate() error
}

// FieldError is a problem with one key of a module's configuration section.
type FieldError struct {
	Key, Message string
}

func (e *FieldError) Error() string { return e.Key + ": " + e.Message }

// Migrator is a module with schema migrations: files NNNN_name.sql at the root of the FS,
// applied after the core's, in version order, tracked per module. An applied migration is never
// edited: its checksum is kept, and a changed file is refused at start.
type Migrator interface {
	Module
	Migrations() fs.FS
}
