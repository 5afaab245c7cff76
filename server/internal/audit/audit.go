// Package audit implements bettercompute.audit.v1.AuditService: reading the audit log of the
// caller's tenant. Rows are written by the admission layer and the guard, never here.
package audit

import (
	"context"
	"math"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/better-compute/better-compute/gen/db"
	auditv1 "github.com/better-compute/better-compute/gen/go/bettercompute/audit/v1"
	"github.com/better-compute/better-compute/gen/go/bettercompute/audit/v1/auditv1connect"
	"github.com/better-compute/better-compute/internal/apierr"
	"github.com/better-compute/better-compute/internal/auth"
	"github.com/better-compute/better-compute/internal/page"
)

// Service answers AuditService calls.
type Service struct {
	pool *pgxpool.Pool
}

var _ auditv1connect.AuditServiceHandler = (*Service)(nil)

// New returns the service.
func New(pool *pgxpool.Pool) *Service { return &Service{pool: pool} }

// List returns the tenant's audit events, newest first.
func (s *Service) List(ctx context.Context, req *auditv1.ListRequest) (*auditv1.ListResponse, error) {
	p := auth.Caller(ctx)
	size, before, err := page.Of(req.GetPageSize(), req.GetPageToken(), int64(math.MaxInt64))
	if err != nil {
		return nil, err
	}
	params := db.ListAuditEventsParams{TenantID: &p.TenantID, Before: before, Lim: size + 1}
	if params.PrincipalID, err = apierr.ParseOptionalID("principal_id", req.GetPrincipalId()); err != nil {
		return nil, err
	}
	if m := req.GetMethod(); m != "" {
		params.Method = &m
	}
	if o := req.GetOutcome(); o != "" {
		params.Outcome = &o
	}
	if params.StartTime, err = optionalTime("start_time", req.GetStartTime()); err != nil {
		return nil, err
	}
	if params.EndTime, err = optionalTime("end_time", req.GetEndTime()); err != nil {
		return nil, err
	}
	rows, err := db.New(s.pool).ListAuditEvents(ctx, params)
	if err != nil {
		return nil, err
	}
	rows, next := page.Next(rows, size, func(e db.AuditEvent) int64 { return e.ID })
	res := &auditv1.ListResponse{NextPageToken: next}
	for _, e := range rows {
		ev := &auditv1.Event{
			Id: e.ID, Method: e.Method, Target: e.Target, Outcome: e.Outcome,
			RequestId: e.RequestID, CreateTime: timestamppb.New(e.CreatedAt),
		}
		if e.TenantID != nil {
			ev.TenantId = e.TenantID.String()
		}
		if e.PrincipalID != nil {
			ev.PrincipalId = e.PrincipalID.String()
		}
		res.Events = append(res.Events, ev)
	}
	return res, nil
}

func optionalTime(field string, ts *timestamppb.Timestamp) (*time.Time, error) {
	if ts == nil {
		return nil, nil
	}
	if err := ts.CheckValid(); err != nil {
		return nil, apierr.InvalidArgument(field, "%v", err)
	}
	t := ts.AsTime()
	return &t, nil
}
