// Package provision is the provision module: machines that the control plane creates, boots,
// joins and destroys through providers, and the machine classes that say which provider makes
// them and with what parameters and credentials.
//
// A machine's lifecycle is requested → provisioning → booting → joined → ready, and, once its
// deletion is asked for, deleting → draining → destroying → gone; failed (with a reason) ends it
// where a provider refuses for good. The lifecycle controller (a reconciler of kind
// "provision.machine", keyed by machine id) moves one machine a step at a time and records each
// step in the database before it acts on the provider where that matters: the join token it mints
// for the machine is stored (sealed) before the provider is asked to create the machine, and the
// provider's Create is idempotent by the machine's id, so a controller killed at any point and a
// new one continuing make each machine once and leave nothing at the provider that no machine
// names.
//
// Providers come from the binary, not from configuration: the binary's main hands Info the
// factories it has, by kind (Providers), and the module's configuration enables some of them
// (providers: [sim]). The metal and vps modules contribute their factories the same way.
package provision

import (
	"io/fs"
	"maps"
	"slices"

	"github.com/better-compute/better-compute/internal/modules/provision/migrations"
	"github.com/better-compute/better-compute/internal/provision"
	"github.com/better-compute/better-compute/internal/reconcile"
	"github.com/better-compute/better-compute/module"
)

// Name is the module's name in configuration and checks.
const Name = "provision"

// Providers are the provider factories a binary has, by kind ("sim", "redfish", "ec2"): the
// kinds a deployment can enable in the module's configuration and name in its classes.
type Providers map[string]provision.Factory

// Info registers the module in a binary with the provider factories it has. A binary passes
// every factory it compiles in, for example
//
//	provision.Info(provision.Providers{simprovider.Kind: cloud.Factory, metal.Kind: metal.Factory})
//
// and each deployment enables the kinds it uses.
func Info(providers Providers) module.Info {
	providers = maps.Clone(providers)
	return module.Info{Name: Name, New: func() module.Module { return New(providers) }}
}

// Module is an instance of the provision module.
type Module struct {
	cfg       Config
	providers Providers
}

var (
	_ module.Configurable   = (*Module)(nil)
	_ module.Migrator       = (*Module)(nil)
	_ module.WorkerProvider = (*Module)(nil)
	_ module.APIProvider    = (*Module)(nil)
)

// New returns an unconfigured module with the binary's providers, with DefaultConfig.
func New(providers Providers) *Module { return &Module{cfg: DefaultConfig(), providers: providers} }

// Name is Name.
func (m *Module) Name() string { return Name }

// Config is the configuration to decode the module's section into.
func (m *Module) Config() any { return &m.cfg }

// Validate checks the decoded configuration against the binary's providers.
func (m *Module) Validate() error { return m.cfg.Validate(slices.Sorted(maps.Keys(m.providers))) }

// Migrations are the module's: provision_classes, provision_machines, provision_machine_steps,
// the autoscaling tables, boot tickets and provision_orphans.
func (m *Module) Migrations() fs.FS { return migrations.FS }

// Services is ProvisionModuleService.
func (m *Module) Services() []module.Service { return m.services() }

// Workers are the lifecycle controller, the autoscaler and the orphan sweep, in the controllers
// role.
func (m *Module) Workers(w module.Worker) (module.Workers, error) {
	c, err := NewController(ControllerOptions{
		Pool: w.Pool, Logger: w.Logger, Secret: w.Secret, Config: m.cfg, Providers: m.enabled(),
		GatewayEndpoint: w.GatewayEndpoint, APIURL: w.APIURL,
	})
	if err != nil {
		return module.Workers{}, err
	}
	s, err := NewOrphanSweeper(OrphanSweeperOptions{
		Pool: w.Pool, Logger: w.Logger, Secret: w.Secret, Config: m.cfg, Providers: m.enabled(),
	})
	if err != nil {
		return module.Workers{}, err
	}
	out := module.Workers{PowerCycle: c.PowerCycleNode, Replace: c.ReplaceNode}
	for _, r := range []reconcile.Registration{c.Registration(), NewAutoscaler(w.Pool, w.Logger, m.cfg).Registration(), s.Registration()} {
		out.Reconcilers = append(out.Reconcilers, module.Reconciliation{
			Reconciler: r.Reconciler, Role: r.Role, Concurrency: r.Concurrency, Timeout: r.Timeout,
			Resync: r.Resync, ResyncEvery: r.ResyncEvery,
		})
	}
	return out, nil
}

// enabled are the factories of the kinds the configuration enables.
func (m *Module) enabled() Providers {
	out := Providers{}
	for _, k := range m.cfg.Providers {
		if f, ok := m.providers[k]; ok {
			out[k] = f
		}
	}
	return out
}
