package moduleset

import (
	"context"
	"fmt"
	"log/slog"
	"strings"

	"github.com/google/uuid"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/better-compute/better-compute/internal/doctor"
	"github.com/better-compute/better-compute/internal/locks"
	"github.com/better-compute/better-compute/internal/migrate"
	"github.com/better-compute/better-compute/internal/reconcile"
	"github.com/better-compute/better-compute/internal/sinks"
	"github.com/better-compute/better-compute/module"
)

// Set is the enabled modules of a process, configured, in the configuration's order.
type Set []module.Module

// Names lists the enabled modules.
func (s Set) Names() []string {
	out := make([]string, len(s))
	for i, m := range s {
		out[i] = m.Name()
	}
	return out
}

// Migrations are the enabled modules' migrations, for migrate.ApplyAll.
func (s Set) Migrations() []migrate.ModuleMigrations {
	var out []migrate.ModuleMigrations
	for _, m := range s {
		if mm, ok := m.(module.Migrator); ok {
			out = append(out, migrate.ModuleMigrations{Name: m.Name(), FS: mm.Migrations()})
		}
	}
	return out
}

// Services are the enabled modules' API services, for server.Options.Services.
func (s Set) Services() []module.Service {
	var out []module.Service
	for _, m := range s {
		if ap, ok := m.(module.APIProvider); ok {
			out = append(out, ap.Services()...)
		}
	}
	return out
}

// Files are the proto files of the enabled modules' services, for doctor's registry check.
func (s Set) Files() []protoreflect.FileDescriptor {
	var out []protoreflect.FileDescriptor
	for _, svc := range s.Services() {
		out = append(out, svc.File)
	}
	return out
}

// Workers are the enabled modules' worker parts, in the forms the worker roles run.
type Workers struct {
	Reconcilers []reconcile.Registration
	// Jobs by role, each named module:<module>:<job>.
	Jobs  map[string][]locks.Job
	Sinks []sinks.Sink
	// PowerCycle asks each module that can power-cycle a node's machine, in order, until one
	// did (module.Workers.PowerCycle); nil when none can.
	PowerCycle func(ctx context.Context, node uuid.UUID) (bool, error)
	// Replace asks each module that can replace a node's machine, in order, until one did
	// (module.Workers.Replace); nil when none can.
	Replace func(ctx context.Context, node uuid.UUID) (bool, error)
}

// Workers collects the enabled modules' worker parts. A sink whose name does not start with its
// module's name and a colon is refused, so no module can take another's (or a webhook's) cursor.
func (s Set) Workers(w module.Worker) (Workers, error) {
	all := Workers{Jobs: map[string][]locks.Job{}}
	var cyclers, replacers []func(context.Context, uuid.UUID) (bool, error)
	if w.Logger == nil {
		w.Logger = slog.New(slog.DiscardHandler)
	}
	for _, m := range s {
		wp, ok := m.(module.WorkerProvider)
		if !ok {
			continue
		}
		mw, err := wp.Workers(module.Worker{
			Pool: w.Pool, Logger: w.Logger.With("module", m.Name()), Metrics: w.Metrics,
			Secret: w.Secret, GatewayEndpoint: w.GatewayEndpoint, APIURL: w.APIURL,
		})
		if err != nil {
			return Workers{}, fmt.Errorf("module %s: %w", m.Name(), err)
		}
		for _, r := range mw.Reconcilers {
			all.Reconcilers = append(all.Reconcilers, reconcile.Registration{
				Reconciler: r.Reconciler, Role: r.Role, Concurrency: r.Concurrency, Timeout: r.Timeout,
				Resync: r.Resync, ResyncEvery: r.ResyncEvery,
			})
		}
		for role, jobs := range mw.Jobs {
			for _, j := range jobs {
				all.Jobs[role] = append(all.Jobs[role], locks.Job{
					Name: "module:" + m.Name() + ":" + j.Name, TTL: j.TTL,
					Run: func(ctx context.Context, _ locks.Lock) error { return j.Run(ctx) },
				})
			}
		}
		for _, sk := range mw.Sinks {
			if !strings.HasPrefix(sk.Name(), m.Name()+":") {
				return Workers{}, fmt.Errorf("module %s: sink %q must be named %s:<name>", m.Name(), sk.Name(), m.Name())
			}
			all.Sinks = append(all.Sinks, sk)
		}
		if mw.PowerCycle != nil {
			cyclers = append(cyclers, mw.PowerCycle)
		}
		if mw.Replace != nil {
			replacers = append(replacers, mw.Replace)
		}
	}
	all.PowerCycle, all.Replace = firstOf(cyclers), firstOf(replacers)
	return all, nil
}

// firstOf asks each of fs in turn until one did the work or failed; nil when fs is empty.
func firstOf(fs []func(context.Context, uuid.UUID) (bool, error)) func(context.Context, uuid.UUID) (bool, error) {
	if len(fs) == 0 {
		return nil
	}
	return func(ctx context.Context, node uuid.UUID) (bool, error) {
		for _, f := range fs {
			if done, err := f(ctx, node); done || err != nil {
				return done, err
			}
		}
		return false, nil
	}
}

// Checks are the enabled modules' doctor checks, named module.<module>.<check>.
func (s Set) Checks(deps module.CheckDeps) []doctor.Check {
	var out []doctor.Check
	for _, m := range s {
		c, ok := m.(module.Checker)
		if !ok {
			continue
		}
		for _, ch := range c.Checks(deps) {
			out = append(out, doctor.Check{Name: "module." + m.Name() + "." + ch.Name, Run: ch.Run})
		}
	}
	return out
}
