// Package module is how Better Compute is extended at build time: a module is a Go package
// compiled into the binary and registered there explicitly (no init() side effects: the binary's
// main lists its modules), then enabled per deployment by configuration:
//
//	modules:
//	  - events                 # a name alone: the module's defaults
//	  - name: events           # or a name and its configuration section
//	    config: {url: nats://nats:4222}
//
// A module contributes what it implements, each an optional interface of the value Info.New
// returns, as Caddy's modules do:
//
//   - Configurable: its configuration section, decoded strictly (unknown keys, wrong types and
//     unset ${NAME} references are errors) and validated, errors naming modules[i].config.<key>;
//   - Migrator: schema migrations, tracked per module and applied after the core's, with the
//     core's checksums;
//   - APIProvider: API services, whose methods enter the one method registry with permissions,
//     audit and idempotency like the core's (a module that is not enabled has no routes);
//   - WorkerProvider: reconcilers and singleton jobs for the worker roles, and event sinks for the
//     sinks role, each dispatched under its own singleton:outbox-dispatch:<sink> lease (a panic in
//     any of them is recovered, reported and retried, never fatal);
//   - Checker: doctor checks, reported as module.<name>.<check>, in the way Nomad fingerprints a
//     driver: reachable, configured as expected, keeping up;
//   - and metrics, through the registry the API and worker dependencies carry.
//
// internal/process is the only place that assembles modules with the roles; the role trees
// (server, workers, gateway) take plain values and never import this
// package.
package module

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"regexp"
	"slices"
	"strings"

	"github.com/jackc/pgx/v5/pgxpool"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/better-compute/better-compute/internal/config"
	"github.com/better-compute/better-compute/internal/doctor"
	"github.com/better-compute/better-compute/internal/locks"
	"github.com/better-compute/better-compute/internal/metrics"
	"github.com/better-compute/better-compute/internal/reconcile"
	"github.com/better-compute/better-compute/internal/sinks"
	"github.com/better-compute/better-compute/server"
)

// Info registers a module in a binary.
type Info struct {
	// Name is the module's name in configuration, checks and metrics: lower-case letters, digits
	// and '-', at most 32.
	Name string
	// New returns a new, unconfigured instance; each process that enables the module makes one.
	New func() Module
}

// Module is an instance of a module. What it contributes is the optional interfaces below that it
// implements.
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
// applied after the core's, in version order, tracked per module.
type Migrator interface {
	Module
	Migrations() fs.FS
}

// APIProvider is a module with API services. Their proto packages are
// bettercompute.modules.<module>.v<n>, and their methods carry the same
// (bettercompute.api.v1.method) options as the core's.
type APIProvider interface {
	Module
	Services() []server.Service
}

// Worker is what a module's worker parts are built with.
type Worker struct {
	Pool    *pgxpool.Pool
	Logger  *slog.Logger
	Metrics *metrics.Registry
	// Secret is the deployment secret, for a module that opens what it sealed (seal.New with a
	// purpose of its own) or loads the machine PKI.
	Secret string
	// GatewayEndpoint is where daemons dial in (config gateway.publicEndpoint), empty when not
	// configured.
	GatewayEndpoint string
	// APIURL is the API's public URL with its base path (config baseURL + basePath), empty when
	// baseURL is not configured: where machines fetch what the deployment serves them.
	APIURL string
}

// Workers are a module's contributions to the worker roles.
type Workers struct {
	// Reconcilers run under the role each declares.
	Reconcilers []reconcile.Registration
	// Jobs are singleton jobs, by role (workers.RoleControllers, …).
	Jobs map[string][]locks.Job
	// Sinks receive outbox events in the sinks role; each name must start with the module's name
	// and a colon, so its cursor and lease are the module's own.
	Sinks []sinks.Sink
}

// WorkerProvider is a module with worker parts.
type WorkerProvider interface {
	Module
	Workers(Worker) (Workers, error)
}

// Checker is a module with doctor checks.
type Checker interface {
	Module
	// Checks returns the checks; each is reported as module.<name>.<check name>.
	Checks(CheckDeps) []Check
}

// CheckDeps is what a module's doctor checks are built with.
type CheckDeps struct {
	Pool *pgxpool.Pool
	// Secret is the deployment secret, for checks that open what the module sealed (a
	// provider's credentials); empty when doctor runs without a configuration.
	Secret string
}

// Check is one doctor check of a module.
type Check struct {
	// Name is the check's name within the module, for example "reachable".
	Name string
	Run  func(ctx context.Context) doctor.Finding
}

var namePattern = regexp.MustCompile(`^[a-z][a-z0-9-]{0,31}$`)

// Registry is the modules a binary has, in the order its main lists them.
type Registry []Info

// Names lists the registered modules.
func (r Registry) Names() []string {
	out := make([]string, len(r))
	for i, in := range r {
		out[i] = in.Name
	}
	return out
}

// Files are the proto files of every registered module's API services, enabled or not: what the
// CLI can call and the API reference describes. The instances made to ask are not configured.
func (r Registry) Files() []protoreflect.FileDescriptor {
	set := make(Set, len(r))
	for i, in := range r {
		set[i] = in.New()
	}
	return set.Files()
}

// Enable makes and configures the modules cfgs names, in order. Every problem is reported at
// once, each naming its key: modules[i] for a module this binary does not have,
// modules[i].config.<key> for its configuration.
func (r Registry) Enable(cfgs []config.ModuleConfig) (Set, error) {
	var (
		set  Set
		errs []error
	)
	for i, c := range cfgs {
		key := fmt.Sprintf("modules[%d]", i)
		at := slices.IndexFunc(r, func(in Info) bool { return in.Name == c.Name })
		if at < 0 {
			have := "none"
			if len(r) > 0 {
				have = strings.Join(r.Names(), ", ")
			}
			errs = append(errs, fmt.Errorf("%s: this binary has no module %q (it has %s)", key, c.Name, have))
			continue
		}
		m := r[at].New()
		if err := configure(m, c, key+".config"); err != nil {
			errs = append(errs, err)
			continue
		}
		set = append(set, m)
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("modules: %w", err)
	}
	return set, nil
}

// configure decodes and validates a module's section.
func configure(m Module, c config.ModuleConfig, key string) error {
	cm, ok := m.(Configurable)
	if !ok {
		if c.HasSection() {
			return fmt.Errorf("%s: module %s takes no configuration", key, m.Name())
		}
		return nil
	}
	if err := c.Decode(key, cm.Config()); err != nil {
		return err
	}
	err := cm.Validate()
	if err == nil {
		return nil
	}
	var errs []error
	for _, e := range flatten(err) {
		if fe, ok := errors.AsType[*FieldError](e); ok {
			errs = append(errs, fmt.Errorf("%s.%s: %s", key, fe.Key, fe.Message))
		} else {
			errs = append(errs, fmt.Errorf("%s: %w", key, e))
		}
	}
	return errors.Join(errs...)
}

// flatten undoes errors.Join.
func flatten(err error) []error {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		var out []error
		for _, e := range j.Unwrap() {
			out = append(out, flatten(e)...)
		}
		return out
	}
	return []error{err}
}

// Check that the registry's names are well formed and unique; a binary with a bad registry is a
// programming error, reported at start.
func (r Registry) Validate() error {
	seen := map[string]bool{}
	for _, in := range r {
		if !namePattern.MatchString(in.Name) || in.New == nil || seen[in.Name] {
			return fmt.Errorf("module registry: %q is not a well-formed, unique module with a constructor", in.Name)
		}
		seen[in.Name] = true
	}
	return nil
}
