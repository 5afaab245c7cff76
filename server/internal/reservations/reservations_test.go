package reservations_test

import (
	"context"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/google/uuid"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	leasesv1 "github.com/better-compute/better-compute/gen/go/bettercompute/leases/v1"
	"github.com/better-compute/better-compute/gen/go/bettercompute/leases/v1/leasesv1connect"
	poolsv1 "github.com/better-compute/better-compute/gen/go/bettercompute/pools/v1"
	"github.com/better-compute/better-compute/gen/go/bettercompute/pools/v1/poolsv1connect"
	reservationsv1 "github.com/better-compute/better-compute/gen/go/bettercompute/reservations/v1"
	"github.com/better-compute/better-compute/gen/go/bettercompute/reservations/v1/reservationsv1connect"
	"github.com/better-compute/better-compute/internal/capacity/capacitytest"
	"github.com/better-compute/better-compute/internal/dbtest"
	"github.com/better-compute/better-compute/server/servertest"
)

func TestMain(m *testing.M) { dbtest.Main(m) }

var ctx = context.Background()

func setup(t *testing.T) (*servertest.Env, reservationsv1connect.ReservationsServiceClient, string) {
	t.Helper()
	env := servertest.New(t)
	tenant := capacitytest.RootTenant(t, env.Pool)
	capacitytest.Nodes(t, env.Pool, tenant, 2, capacitytest.NodeSpec{GPUs: 8, Model: "H100", Labels: map[string]string{"gpu": "h100"}})
	p, err := poolsv1connect.NewPoolsServiceClient(env.HTTPClient(env.AdminKey), env.URL).Create(ctx,
		&poolsv1.CreateRequest{Name: "h100", NodeSelector: map[string]string{"gpu": "h100"}})
	if err != nil {
		t.Fatal(err)
	}
	return env, reservationsv1connect.NewReservationsServiceClient(env.HTTPClient(env.AdminKey), env.URL), p.GetPool().GetId()
}

func window(pool string, from, to time.Time) *reservationsv1.CreateRequest {
	return &reservationsv1.CreateRequest{PoolId: pool, StartTime: timestamppb.New(from), EndTime: timestamppb.New(to)}
}

func wantField(t *testing.T, err error, code connect.Code, field string) {
	t.Helper()
	if connect.CodeOf(err) != code || !strings.Contains(err.Error(), ": "+field+":") {
		t.Fatalf("error %v, want %v naming %s", err, code, field)
	}
}

func TestOverlappingReservationsFail(t *testing.T) {
	t.Parallel()
	env, c, pool := setup(t)
	t0 := time.Now().Add(24 * time.Hour).Truncate(time.Hour)
	first, err := c.Create(ctx, window(pool, t0, t0.Add(4*time.Hour)))
	if err != nil {
		t.Fatal(err)
	}
	if r := first.GetReservation(); r.GetState() != reservationsv1.ReservationState_RESERVATION_STATE_ACTIVE || !r.GetStartTime().AsTime().Equal(t0) {
		t.Fatalf("reservation %v", r)
	}
	// Overlapping at either end, or inside: refused by the exclusion constraint.
	for _, w := range [][2]time.Time{
		{t0.Add(-time.Hour), t0.Add(time.Minute)}, {t0.Add(3 * time.Hour), t0.Add(5 * time.Hour)}, {t0.Add(time.Hour), t0.Add(2 * time.Hour)},
	} {
		_, err := c.Create(ctx, window(pool, w[0], w[1]))
		wantField(t, err, connect.CodeFailedPrecondition, "start_time")
		if !strings.Contains(err.Error(), "reservations_no_overlap") {
			t.Errorf("error %v does not name the constraint", err)
		}
	}
	// Adjacent windows do not overlap ([start, end)).
	if _, err := c.Create(ctx, window(pool, t0.Add(4*time.Hour), t0.Add(5*time.Hour))); err != nil {
		t.Fatal(err)
	}
	// Concurrent overlapping creates: exactly one wins.
	t1 := t0.Add(48 * time.Hour)
	var wg sync.WaitGroup
	var won, lost atomic.Int32
	for i := range 8 {
		wg.Go(func() {
			_, err := c.Create(ctx, window(pool, t1.Add(time.Duration(i)*time.Minute), t1.Add(time.Hour)))
			switch {
			case err == nil:
				won.Add(1)
			case connect.CodeOf(err) == connect.CodeFailedPrecondition:
				lost.Add(1)
			default:
				t.Errorf("create: %v", err)
			}
		})
	}
	wg.Wait()
	if won.Load() != 1 || lost.Load() != 7 {
		t.Fatalf("%d won, %d lost; want 1 and 7", won.Load(), lost.Load())
	}
	// Cancelled reservations free their window.
	if _, err := c.Cancel(ctx, &reservationsv1.CancelRequest{Id: first.GetReservation().GetId()}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Create(ctx, window(pool, t0.Add(time.Hour), t0.Add(2*time.Hour))); err != nil {
		t.Fatalf("the cancelled window: %v", err)
	}
	list, err := c.List(ctx, &reservationsv1.ListRequest{PoolId: pool})
	if err != nil || len(list.GetReservations()) != 3 {
		t.Fatalf("active reservations %v, %v; want 3", list, err)
	}
	all, err := c.List(ctx, &reservationsv1.ListRequest{IncludeCancelled: true})
	if err != nil || len(all.GetReservations()) != 4 {
		t.Fatalf("all reservations %v, %v; want 4", all, err)
	}
	var n int
	if err := env.Pool.QueryRow(ctx, `SELECT count(*) FROM outbox WHERE type LIKE 'reservation.%'`).Scan(&n); err != nil || n != 5 {
		t.Errorf("%d reservation events (%v), want 5", n, err)
	}
}

func TestReservationBadInputAndLeases(t *testing.T) {
	t.Parallel()
	env, c, pool := setup(t)
	now := time.Now()
	_, err := c.Create(ctx, window(pool, now.Add(2*time.Hour), now.Add(time.Hour)))
	wantField(t, err, connect.CodeInvalidArgument, "end_time")
	_, err = c.Create(ctx, window(pool, now.Add(-2*time.Hour), now.Add(-time.Hour)))
	wantField(t, err, connect.CodeInvalidArgument, "end_time")
	_, err = c.Create(ctx, &reservationsv1.CreateRequest{PoolId: pool, EndTime: timestamppb.New(now.Add(time.Hour))})
	wantField(t, err, connect.CodeInvalidArgument, "start_time")
	_, err = c.Create(ctx, window(uuid.NewString(), now.Add(time.Hour), now.Add(2*time.Hour)))
	wantField(t, err, connect.CodeFailedPrecondition, "pool_id")
	var n int
	if err := env.Pool.QueryRow(ctx, `SELECT count(*) FROM reservations`).Scan(&n); err != nil || n != 0 {
		t.Fatalf("%d reservations after refused calls", n)
	}

	// A lease of a reservation; cancelling the reservation fails it while pending.
	r, err := c.Create(ctx, window(pool, now.Add(time.Hour), now.Add(3*time.Hour)))
	if err != nil {
		t.Fatal(err)
	}
	lc := leasesv1connect.NewLeasesServiceClient(env.HTTPClient(env.AdminKey), env.URL)
	l, err := lc.Create(ctx, &leasesv1.CreateRequest{PoolId: pool, Gpus: 8, Duration: durationpb.New(time.Hour), ReservationId: r.GetReservation().GetId()})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Cancel(ctx, &reservationsv1.CancelRequest{Id: r.GetReservation().GetId()}); err != nil {
		t.Fatal(err)
	}
	got, err := lc.Get(ctx, &leasesv1.GetRequest{Id: l.GetLease().GetId()})
	if err != nil || got.GetLease().GetState() != leasesv1.LeaseState_LEASE_STATE_FAILED || got.GetLease().GetReason() != "the lease's reservation was cancelled" {
		t.Fatalf("lease after cancel: %v, %v", got, err)
	}
	_, err = lc.Create(ctx, &leasesv1.CreateRequest{PoolId: pool, Gpus: 1, Duration: durationpb.New(time.Hour), ReservationId: r.GetReservation().GetId()})
	wantField(t, err, connect.CodeFailedPrecondition, "reservation_id")
	// Cancelling again changes nothing.
	again, err := c.Cancel(ctx, &reservationsv1.CancelRequest{Id: r.GetReservation().GetId()})
	if err != nil || again.GetReservation().GetState() != reservationsv1.ReservationState_RESERVATION_STATE_CANCELLED {
		t.Fatalf("second cancel: %v, %v", again, err)
	}
}
