// Package reservations implements bettercompute.reservations.v1.ReservationsService: a pool of
// the caller's tenant held for a time window. The exclusion constraint reservations_no_overlap
// (EXCLUDE USING gist (pool_id WITH =, during WITH &&)) makes a second reservation of a pool
// overlapping an active one fail in the database; it is reported as FailedPrecondition.
//
// A reservation holds the whole pool rather than some of its devices: the database can then
// refuse double booking with one constraint and no device has to be picked in advance (nodes
// fail and join between booking and window). Finer reservations are made by reserving a pool
// that selects fewer nodes: pools may share nodes, and the placer keeps leases off a node that
// any pool's reservation covers, unless they are leases of that reservation.
package reservations

import (
	"context"
	"errors"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/better-compute/better-compute/gen/db"
	reservationsv1 "github.com/better-compute/better-compute/gen/go/bettercompute/reservations/v1"
	"github.com/better-compute/better-compute/gen/go/bettercompute/reservations/v1/reservationsv1connect"
	"github.com/better-compute/better-compute/internal/admission"
	"github.com/better-compute/better-compute/internal/apierr"
	"github.com/better-compute/better-compute/internal/auth"
	"github.com/better-compute/better-compute/internal/capacity"
	"github.com/better-compute/better-compute/internal/event"
	"github.com/better-compute/better-compute/internal/page"
)

// Limits of a reservation.
const (
	MaxWindow         = 366 * 24 * time.Hour
	maxDescriptionLen = 500
)

// Service answers ReservationsService calls.
type Service struct {
	pool  *pgxpool.Pool
	admit *admission.Admitter
}

var _ reservationsv1connect.ReservationsServiceHandler = (*Service)(nil)

// New returns the service.
func New(pool *pgxpool.Pool, admit *admission.Admitter) *Service {
	return &Service{pool: pool, admit: admit}
}

// Create reserves a pool for a window.
func (s *Service) Create(ctx context.Context, req *reservationsv1.CreateRequest) (*reservationsv1.CreateResponse, error) {
	// Every bad field of the three is reported, not only the first.
	poolID, poolErr := apierr.ParseID("pool_id", req.GetPoolId())
	if err := apierr.Join(poolErr, requiredTime("start_time", req.GetStartTime()), requiredTime("end_time", req.GetEndTime())); err != nil {
		return nil, err
	}
	start, end := req.GetStartTime().AsTime().Truncate(time.Microsecond), req.GetEndTime().AsTime().Truncate(time.Microsecond)
	switch {
	case !end.After(start):
		return nil, apierr.InvalidArgument("end_time", "must be after start_time")
	case end.Sub(start) > MaxWindow:
		return nil, apierr.InvalidArgument("end_time", "the window must be at most %v", MaxWindow)
	case !end.After(time.Now()):
		return nil, apierr.InvalidArgument("end_time", "must be in the future")
	case len(req.GetDescription()) > maxDescriptionLen:
		return nil, apierr.InvalidArgument("description", "must be at most %d characters", maxDescriptionLen)
	}
	p := auth.Caller(ctx)
	return admission.Do(ctx, s.admit, req, func(ctx context.Context, tx *admission.Tx) (*reservationsv1.CreateResponse, error) {
		if _, err := tx.Q.GetPool(ctx, db.GetPoolParams{TenantID: p.TenantID, ID: poolID}); err != nil {
			if errors.Is(err, pgx.ErrNoRows) {
				return nil, apierr.FailedPreconditionField("pool_id", "the tenant has no pool %s", poolID)
			}
			return nil, err
		}
		id := uuid.Must(uuid.NewV7())
		row, err := tx.Q.CreateReservation(ctx, db.CreateReservationParams{
			ID: id, TenantID: p.TenantID, PoolID: poolID, StartsAt: start, EndsAt: end, Description: req.GetDescription(),
		})
		var pgErr *pgconn.PgError
		if errors.As(err, &pgErr) && pgErr.Code == "23P01" {
			return nil, apierr.FailedPreconditionField("start_time", "pool %s is already reserved during part of [%s, %s) (%s)", poolID,
				start.UTC().Format(time.RFC3339), end.UTC().Format(time.RFC3339), pgErr.ConstraintName)
		}
		if err != nil {
			return nil, err
		}
		tx.Target("reservation", id)
		r := toProto(db.GetReservationRow(row))
		if err := tx.Emit(p.TenantID, event.ReservationCreated{ReservationChange: eventData(db.GetReservationRow(row))}); err != nil {
			return nil, err
		}
		if err := capacity.EnqueuePlacer(ctx, tx.Q, poolID); err != nil {
			return nil, err
		}
		tx.Wake(capacity.PlacerKind)
		return &reservationsv1.CreateResponse{Reservation: r}, nil
	})
}

// requiredTime checks a timestamp field that must be set.
func requiredTime(field string, ts *timestamppb.Timestamp) error {
	if ts == nil {
		return apierr.InvalidArgument(field, "is required")
	}
	if err := ts.CheckValid(); err != nil {
		return apierr.InvalidArgument(field, "%v", err)
	}
	return nil
}

// Get returns a reservation of the caller's tenant.
func (s *Service) Get(ctx context.Context, req *reservationsv1.GetRequest) (*reservationsv1.GetResponse, error) {
	id, err := apierr.ParseID("id", req.GetId())
	if err != nil {
		return nil, err
	}
	row, err := db.New(s.pool).GetReservation(ctx, db.GetReservationParams{TenantID: auth.Caller(ctx).TenantID, ID: id})
	if err != nil {
		return nil, apierr.NotFoundIfNoRows(err, "reservation %s not found", id)
	}
	return &reservationsv1.GetResponse{Reservation: toProto(row)}, nil
}

// List lists the caller's tenant's reservations, oldest first.
func (s *Service) List(ctx context.Context, req *reservationsv1.ListRequest) (*reservationsv1.ListResponse, error) {
	size, after, err := page.Of(req.GetPageSize(), req.GetPageToken(), uuid.Nil)
	if err != nil {
		return nil, err
	}
	params := db.ListReservationsParams{
		TenantID: auth.Caller(ctx).TenantID, After: after, IncludeCancelled: req.GetIncludeCancelled(), Lim: size + 1,
	}
	if req.GetPoolId() != "" {
		id, err := apierr.ParseID("pool_id", req.GetPoolId())
		if err != nil {
			return nil, err
		}
		params.PoolID = &id
	}
	rows, err := db.New(s.pool).ListReservations(ctx, params)
	if err != nil {
		return nil, err
	}
	rows, next := page.Next(rows, size, func(r db.ListReservationsRow) uuid.UUID { return r.ID })
	res := &reservationsv1.ListResponse{NextPageToken: next}
	for _, r := range rows {
		res.Reservations = append(res.Reservations, toProto(db.GetReservationRow(r)))
	}
	return res, nil
}

// Cancel frees a reservation's window; its pending leases fail. Cancelling a cancelled
// reservation changes nothing.
func (s *Service) Cancel(ctx context.Context, req *reservationsv1.CancelRequest) (*reservationsv1.CancelResponse, error) {
	id, err := apierr.ParseID("id", req.GetId())
	if err != nil {
		return nil, err
	}
	p := auth.Caller(ctx)
	return admission.Do(ctx, s.admit, req, func(ctx context.Context, tx *admission.Tx) (*reservationsv1.CancelResponse, error) {
		tx.Target("reservation", id)
		row, err := tx.Q.CancelReservation(ctx, db.CancelReservationParams{TenantID: p.TenantID, ID: id})
		if errors.Is(err, pgx.ErrNoRows) {
			got, err := tx.Q.GetReservation(ctx, db.GetReservationParams{TenantID: p.TenantID, ID: id})
			if err != nil {
				return nil, apierr.NotFoundIfNoRows(err, "reservation %s not found", id)
			}
			return &reservationsv1.CancelResponse{Reservation: toProto(got)}, nil
		}
		if err != nil {
			return nil, err
		}
		r := toProto(db.GetReservationRow(row))
		if err := tx.Emit(p.TenantID, event.ReservationCancelled{ReservationChange: eventData(db.GetReservationRow(row))}); err != nil {
			return nil, err
		}
		pending, err := tx.Q.PendingReservationLeases(ctx, &id)
		if err != nil {
			return nil, err
		}
		if _, err := capacity.EndLeases(ctx, tx.Q, pending, capacity.LeaseFailed, "the lease's reservation was cancelled", nil, tx.Emit); err != nil {
			return nil, err
		}
		if err := capacity.EnqueuePlacer(ctx, tx.Q, row.PoolID); err != nil {
			return nil, err
		}
		tx.Wake(capacity.PlacerKind)
		return &reservationsv1.CancelResponse{Reservation: r}, nil
	})
}

func toProto(r db.GetReservationRow) *reservationsv1.Reservation {
	out := &reservationsv1.Reservation{
		Id: r.ID.String(), TenantId: r.TenantID.String(), PoolId: r.PoolID.String(),
		StartTime: timestamppb.New(r.StartsAt), EndTime: timestamppb.New(r.EndsAt), Description: r.Description,
		State: reservationsv1.ReservationState_RESERVATION_STATE_ACTIVE, CreateTime: timestamppb.New(r.CreatedAt),
	}
	if r.State == capacity.ReservationCancelled {
		out.State = reservationsv1.ReservationState_RESERVATION_STATE_CANCELLED
	}
	if r.CancelledAt != nil {
		out.CancelTime = timestamppb.New(*r.CancelledAt)
	}
	return out
}

// eventData is the payload of a reservation's events.
func eventData(r db.GetReservationRow) event.ReservationChange {
	return event.ReservationChange{
		ID: r.ID, PoolID: r.PoolID, StartTime: r.StartsAt.UTC(), EndTime: r.EndsAt.UTC(), State: string(r.State),
	}
}
