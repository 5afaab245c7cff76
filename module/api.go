package module

import (
	"context"
	"log/slog"
	"net/http"

	"connectrpc.com/connect"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/better-compute/better-compute/internal/admission"
	"github.com/better-compute/better-compute/internal/auth"
	"github.com/better-compute/better-compute/internal/metrics"
)

// APIProvider is a module with API services. Their proto packages are
// bettercompute.modules.<module>.v<n>, and every method carries the same
// (bettercompute.api.v1.method) options as the core's: its permission, whether it changes
// state, its short route. A method without them is refused when the API starts.
type APIProvider interface {
	Module
	Services() []Service
}

// Service is one Connect service of a module.
type Service struct {
	// File is the proto file that defines the service (its generated File_… descriptor); its
	// methods enter the API's registry, the CLI, the OpenAPI document and the reference.
	File protoreflect.FileDescriptor
	// Mount builds the service's handler (the generated New…Handler with opts, which carry the
	// API's guard: authentication, permissions, rate limits, audit of refusals, size limits).
	Mount func(deps ServiceDeps, opts ...connect.HandlerOption) (path string, h http.Handler, err error)
}

// ServiceDeps are what a module's service is built with.
type ServiceDeps struct {
	Pool *pgxpool.Pool
	// Admitter runs changes as the core's do (see Admit).
	Admitter *Admitter
	Logger   *slog.Logger
	Metrics  *Metrics
	// Secret is the deployment secret, for a module that seals what it stores (with a purpose
	// of its own).
	Secret string
}

// Admitter runs a method's change in one transaction with its audit row, its outbox events and
// its idempotent response.
type Admitter = admission.Admitter

// Tx is the transaction Admit runs a change in: DB() for the module's own queries, Target to
// name the object the audit row is about, Wake to have the reconcilers of a kind it enqueued
// keys for (Enqueue) woken once it commits, AfterCommit for other work that must wait for the
// commit. Neither runs when the change fails or a retried call replays its response.
type Tx = admission.Tx

// Metrics is the process's metrics registry (served at /metrics): a module registers its own
// counters and gauges there, named bc_<module>_….
type Metrics = metrics.Registry

// Admit runs fn, the change of the calling method, in one transaction with the method's audit
// row and, for a call with an idempotency key, its stored response: a retried call gets the
// first call's response and changes nothing again (nor wakes anything: see Tx). req is the
// method's request, for the idempotency check.
func Admit[Res proto.Message](ctx context.Context, a *Admitter, req proto.Message, fn func(context.Context, *Tx) (Res, error)) (Res, error) {
	return admission.Do(ctx, a, req, fn)
}

// Caller is who calls a method, as the API's guard authenticated them.
type Caller struct {
	// ID is the principal: a user or a service account.
	ID uuid.UUID
	// TenantID is the tenant the call acts for: every query a handler runs for the call is
	// scoped to it.
	TenantID uuid.UUID
	// RootTenant is true for the deployment's operators.
	RootTenant bool
}

// CallerOf returns the caller of the method ctx serves; false outside an authenticated call (a
// public method's).
func CallerOf(ctx context.Context) (Caller, bool) {
	p := auth.Caller(ctx)
	if p == nil {
		return Caller{}, false
	}
	return Caller{ID: p.ID, TenantID: p.TenantID, RootTenant: p.RootTenant}, true
}
