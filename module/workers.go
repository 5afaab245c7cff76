package module

import (
	"context"
	"encoding/json"
	"log/slog"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/better-compute/better-compute/gen/db"
	"github.com/better-compute/better-compute/internal/reconcile"
	"github.com/better-compute/better-compute/internal/webhook"
)

// WorkerProvider is a module with worker parts.
type WorkerProvider interface {
	Module
	Workers(Worker) (Workers, error)
}

// Worker is what a module's worker parts are built with.
type Worker struct {
	Pool    *pgxpool.Pool
	Logger  *slog.Logger
	Metrics *Metrics
	// Secret is the deployment secret, for a module that opens what it sealed or loads the
	// machine PKI.
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
	Reconcilers []Reconciliation
	// Jobs are singleton jobs, by role (RoleControllers, RoleScheduler, …); each runs in one
	// process of the deployment at a time, named module:<module>:<job>.
	Jobs map[string][]Job
	// Sinks receive outbox events in the sinks role; each name must start with the module's name
	// and a colon, so its cursor and lease are the module's own.
	Sinks []Sink
	// PowerCycle, when set, power-cycles the machine behind a node that no longer answers (a
	// remediation's powerCycle step), reporting false when the module has no machine behind
	// it. The remediation controller asks each module's in turn until one does it.
	PowerCycle func(ctx context.Context, node uuid.UUID) (bool, error)
	// Replace, when set, replaces the machine behind a node with a new one of its class (a
	// remediation's replace step), reporting false when the module has no machine behind it.
	Replace func(ctx context.Context, node uuid.UUID) (bool, error)
}

// Worker roles a module's parts run under.
const (
	RoleControllers = reconcile.RoleControllers
	RoleScheduler   = reconcile.RoleScheduler
	RoleSinks       = "sinks"
)

// Reconciler brings one object of a kind to its desired state. Reconcile must be idempotent: a
// key may be reconciled again after a crash, a retry or a new enqueue.
type Reconciler interface {
	// Kind names the reconciler's queue, for example "hello.greeting"; a module's kinds start
	// with its name.
	Kind() string
	// Reconcile acts on one key; a returned error retries the key later, with backoff.
	Reconcile(ctx context.Context, key string) error
}

// Reconciliation is a reconciler and how to run it.
type Reconciliation struct {
	Reconciler Reconciler
	// Role is RoleControllers (the default) or RoleScheduler.
	Role string
	// Concurrency is how many keys one worker reconciles at once; 8 by default.
	Concurrency int
	// Timeout bounds one Reconcile call; 30s by default.
	Timeout time.Duration
	// Resync, when set, lists every key of the kind, enqueued every ResyncEvery (5 minutes by
	// default), so drift is corrected even without an enqueue.
	Resync      func(ctx context.Context) ([]string, error)
	ResyncEvery time.Duration
}

// Enqueue marks keys of a reconciler's kind due, in the caller's transaction (q bound to it):
// they are reconciled once it commits. Tx.Wake(kind) in the same transaction has them
// reconciled at once rather than at the reconcilers' next poll.
func Enqueue(ctx context.Context, q *db.Queries, kind string, keys ...string) error {
	return reconcile.Enqueue(ctx, q, kind, keys...)
}

// Job is a singleton job: Run runs in one process of the deployment while it holds the job's
// lock, and its context ends when the lock is lost or the process stops. If Run returns, the
// lock is released and taken again at the next attempt (a returned error is logged).
type Job struct {
	// Name is unique within the module.
	Name string
	// TTL of the lock; 15 seconds when zero.
	TTL time.Duration
	Run func(ctx context.Context) error
}

// Sink receives outbox events: each event once it commits, in order, at least once.
type Sink interface {
	// Name identifies the sink's cursor and lease: "<module>:<name>".
	Name() string
	// Source says which events the sink receives.
	Source() Source
	// Deliver delivers one event; an error means it was not delivered, and it is retried.
	Deliver(ctx context.Context, e Event) error
}

// Source says which events a sink receives.
type Source struct {
	// Tenant limits the sink to one tenant's events; nil means every tenant's.
	Tenant *uuid.UUID
	// Types limits the sink to events of these types; empty means every type.
	Types []string
}

// Event is one outbox event, as docs/events.md describes its type and payload.
type Event struct {
	ID        int64
	TxID      int64
	TenantID  uuid.UUID
	Type      string
	Subject   string
	Payload   json.RawMessage
	CreatedAt time.Time
}

// MessageID is the event's stable id, the same on every delivery: webhook-id, and the id that
// events/list shows.
func (e Event) MessageID() string { return webhook.EventID(e.ID) }
