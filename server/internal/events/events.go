// Package events implements bettercompute.events.v1.EventsService: reading the events of the
// caller's tenant from the outbox, where API transactions write them and from which the sinks
// role delivers them.
package events

import (
	"context"
	"fmt"
	"math"

	"github.com/jackc/pgx/v5/pgxpool"
	"google.golang.org/protobuf/types/known/structpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/better-compute/better-compute/gen/db"
	eventsv1 "github.com/better-compute/better-compute/gen/go/bettercompute/events/v1"
	"github.com/better-compute/better-compute/gen/go/bettercompute/events/v1/eventsv1connect"
	"github.com/better-compute/better-compute/internal/auth"
	"github.com/better-compute/better-compute/internal/page"
	"github.com/better-compute/better-compute/internal/webhook"
)

// Service answers EventsService calls.
type Service struct {
	pool *pgxpool.Pool
}

var _ eventsv1connect.EventsServiceHandler = (*Service)(nil)

// New returns the service.
func New(pool *pgxpool.Pool) *Service { return &Service{pool: pool} }

// List returns the tenant's events, newest first.
func (s *Service) List(ctx context.Context, req *eventsv1.ListRequest) (*eventsv1.ListResponse, error) {
	p := auth.Caller(ctx)
	size, before, err := page.Of(req.GetPageSize(), req.GetPageToken(), int64(math.MaxInt64))
	if err != nil {
		return nil, err
	}
	params := db.ListEventsParams{TenantID: p.TenantID, Before: before, Lim: size + 1}
	if t := req.GetType(); t != "" {
		params.Type = &t
	}
	if sub := req.GetSubject(); sub != "" {
		params.Subject = &sub
	}
	rows, err := db.New(s.pool).ListEvents(ctx, params)
	if err != nil {
		return nil, err
	}
	rows, next := page.Next(rows, size, func(e db.ListEventsRow) int64 { return e.ID })
	res := &eventsv1.ListResponse{NextPageToken: next}
	for _, e := range rows {
		data := &structpb.Value{}
		if err := data.UnmarshalJSON(e.Payload); err != nil {
			return nil, fmt.Errorf("event %d: decode data: %w", e.ID, err)
		}
		res.Events = append(res.Events, &eventsv1.Event{
			Id: webhook.EventID(e.ID), TenantId: e.TenantID.String(), Type: e.Type, Subject: e.Subject,
			Data: data, CreateTime: timestamppb.New(e.CreatedAt),
		})
	}
	return res, nil
}
