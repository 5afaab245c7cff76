package events

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"connectrpc.com/connect"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"google.golang.org/protobuf/types/known/timestamppb"

	eventsmodulev1 "github.com/better-compute/better-compute/gen/go/bettercompute/modules/events/v1"
	"github.com/better-compute/better-compute/gen/go/bettercompute/modules/events/v1/eventsmodulev1connect"
	eventsdb "github.com/better-compute/better-compute/gen/modules/events/db"
	"github.com/better-compute/better-compute/internal/auth"
	"github.com/better-compute/better-compute/internal/webhook"
	"github.com/better-compute/better-compute/module"
)

// service answers EventsModuleService calls.
type service struct {
	pool *pgxpool.Pool
	cfg  *Config
}

var _ eventsmodulev1connect.EventsModuleServiceHandler = (*service)(nil)

// services is the module's API: EventsModuleService, guarded like the core's.
func (m *Module) services() []module.Service {
	return []module.Service{{
		File: eventsmodulev1.File_bettercompute_modules_events_v1_events_proto,
		Mount: func(deps module.ServiceDeps, opts ...connect.HandlerOption) (string, http.Handler, error) {
			path, h := eventsmodulev1connect.NewEventsModuleServiceHandler(&service{pool: deps.Pool, cfg: &m.cfg}, opts...)
			return path, h, nil
		},
	}}
}

// GetStatus returns the stream, the caller tenant's subject filter, the servers without
// credentials and the newest of the tenant's events the sink has gone past; to the operator (a
// principal of the root tenant) also the sink's deployment-wide state, which tells every tenant's
// event volume and so is not shown to other tenants.
func (s *service) GetStatus(ctx context.Context, _ *eventsmodulev1.GetStatusRequest) (*eventsmodulev1.GetStatusResponse, error) {
	caller := auth.Caller(ctx)
	tenant := caller.TenantID
	res := &eventsmodulev1.GetStatusResponse{
		Stream:        s.cfg.Stream,
		SubjectFilter: s.cfg.SubjectPrefix + "." + tenant.String() + ".>",
		Servers:       s.cfg.Servers(),
	}
	q := eventsdb.New(s.pool)
	passed, err := q.TenantPassed(ctx, eventsdb.TenantPassedParams{TenantID: tenant, Sink: SinkName})
	if err != nil {
		return nil, fmt.Errorf("read the sink's cursor: %w", err)
	}
	if passed > 0 {
		res.LastEventId = webhook.EventID(passed)
	}
	if !caller.RootTenant {
		return res, nil
	}
	st, err := q.GetNatsStatus(ctx, SinkName)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
	case err != nil:
		return nil, fmt.Errorf("read the sink's status: %w", err)
	default:
		res.Published, res.LastError, res.UpdateTime = st.Published, st.LastError, timestamppb.New(st.UpdatedAt)
	}
	return res, nil
}
