// Package events is the events module: it publishes every event of the outbox to a NATS
// JetStream stream, so consumers subscribe with subjects instead of receiving webhooks.
//
// Each event goes to the subject "<subjectPrefix>.<tenant id>.<event type>", for example
// "bc.0190….node.ready", so a consumer filters by tenant and type with subjects alone
// ("bc.<tenant>.>", "bc.*.node.>"). The message's Nats-Msg-Id is the event's id ("evt_<id>",
// webhooks' webhook-id), its headers Bc-Event-Type, Bc-Event-Subject, Bc-Tenant-Id and
// Bc-Event-Time say what it is, and its body is the JSON a webhook delivery carries
// (webhook.Body). Publishing is at least once, through the core's outbox dispatcher (sink
// "events:nats", with its cursor and lease): one outbox subject's events in order, each
// acknowledged by the stream before the next; the stream drops an event published again within
// its duplicate window, so a retry or a new sinks process repeating a dead one's last batch
// stores nothing twice.
//
// The stream (subjects "<subjectPrefix>.>", on disk, maxAge, duplicateWindow, replicas) is
// created before the first publish, or checked: one holding other subjects is an error that
// says how they differ. The connection reconnects without end; while it is down publishes fail
// and are retried. Doctor checks that NATS is reachable, the stream is right and the sink keeps
// up; EventsModuleService.GetStatus tells a tenant its subject filter and the sink's state.
package events

import (
	"io/fs"

	"github.com/better-compute/better-compute/internal/modules/events/migrations"
	"github.com/better-compute/better-compute/internal/sinks"
	"github.com/better-compute/better-compute/module"
)

// Name is the module's name in configuration, checks and its sink's name.
const Name = "events"

// Info registers the module in a binary.
func Info() module.Info {
	return module.Info{Name: Name, New: func() module.Module { return New() }}
}

// Module is an instance of the events module.
type Module struct {
	cfg Config
}

var (
	_ module.Configurable   = (*Module)(nil)
	_ module.Migrator       = (*Module)(nil)
	_ module.WorkerProvider = (*Module)(nil)
	_ module.Checker        = (*Module)(nil)
	_ module.APIProvider    = (*Module)(nil)
)

// New returns an unconfigured module, with DefaultConfig.
func New() *Module { return &Module{cfg: DefaultConfig()} }

// Name is Name.
func (m *Module) Name() string { return Name }

// Config is the configuration to decode the module's section into.
func (m *Module) Config() any { return &m.cfg }

// Validate checks the decoded configuration.
func (m *Module) Validate() error { return m.cfg.Validate() }

// Migrations are the module's: events_nats_status.
func (m *Module) Migrations() fs.FS { return migrations.FS }

// Workers is the module's sink, "events:nats".
func (m *Module) Workers(w module.Worker) (module.Workers, error) {
	return module.Workers{Sinks: []sinks.Sink{newSink(m.cfg, w.Pool, w.Logger, instrumentsIn(w.Metrics))}}, nil
}

// Checks are reachable, stream and lag.
func (m *Module) Checks(d module.CheckDeps) []module.Check { return m.checks(d.Pool) }

// Services is EventsModuleService.
func (m *Module) Services() []module.Service { return m.services() }
