package capacity_test

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
	"github.com/better-compute/better-compute/internal/capacity"
	"github.com/better-compute/better-compute/internal/capacity/capacitytest"
	"github.com/better-compute/better-compute/internal/dbtest"
	"github.com/better-compute/better-compute/server/servertest"
	"github.com/better-compute/better-compute/workers/internal/placer"
	"github.com/better-compute/better-compute/workers/internal/placer/placertest"
)

// These tests run the API with the capacity placer (and the metering job) behind it: what a
// tenant sees of placement, extension and usage.
func TestMain(m *testing.M) { dbtest.Main(m) }

var ctx = context.Background()

func pools(env *servertest.Env) poolsv1connect.PoolsServiceClient {
	return poolsv1connect.NewPoolsServiceClient(env.HTTPClient(env.AdminKey), env.URL)
}

func leases(env *servertest.Env) leasesv1connect.LeasesServiceClient {
	return leasesv1connect.NewLeasesServiceClient(env.HTTPClient(env.AdminKey), env.URL)
}

// fleet makes nodes of the root tenant and a pool selecting them through the API.
func fleet(t testing.TB, env *servertest.Env, nodes, gpus int) string {
	t.Helper()
	tenant := capacitytest.RootTenant(t, env.Pool)
	capacitytest.Nodes(t, env.Pool, tenant, nodes, capacitytest.NodeSpec{GPUs: gpus, Model: "H100", CPUs: 64, MemoryBytes: 256 << 30, Labels: map[string]string{"gpu": "h100"}})
	res, err := pools(env).Create(ctx, &poolsv1.CreateRequest{Name: "h100", NodeSelector: map[string]string{"gpu": "h100"}})
	if err != nil {
		t.Fatal(err)
	}
	return res.GetPool().GetId()
}

func hour() *durationpb.Duration { return durationpb.New(time.Hour) }

// wantField checks an error's code and that its message names field.
func wantField(t *testing.T, err error, code connect.Code, field string) {
	t.Helper()
	if connect.CodeOf(err) != code || !strings.Contains(err.Error(), ": "+field+":") {
		t.Fatalf("error %v, want %v naming %s", err, code, field)
	}
}

func count(t testing.TB, env *servertest.Env, sql string, args ...any) int {
	t.Helper()
	var n int
	if err := env.Pool.QueryRow(ctx, sql, args...).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

func TestLeaseLifecycle(t *testing.T) {
	t.Parallel()
	env := servertest.New(t)
	poolID := fleet(t, env, 2, 4)
	c := leases(env)
	created, err := c.Create(ctx, &leasesv1.CreateRequest{PoolId: poolID, Gpus: 4, Duration: hour()})
	if err != nil {
		t.Fatal(err)
	}
	l := created.GetLease()
	if l.GetState() != leasesv1.LeaseState_LEASE_STATE_PENDING || l.GetGpuModel() != "H100" || l.GetDuration().AsDuration() != time.Hour {
		t.Fatalf("created %v", l)
	}
	placertest.Run(t, env.Pool, placer.Options{})
	var got *leasesv1.Lease
	capacitytest.Eventually(t, 10*time.Second, "the lease is placed", func() bool {
		res, err := c.Get(ctx, &leasesv1.GetRequest{Id: l.GetId()})
		if err != nil {
			t.Fatal(err)
		}
		got = res.GetLease()
		return got.GetState() == leasesv1.LeaseState_LEASE_STATE_PLACED
	})
	if len(got.GetAllocations()) != 4 || got.GetPlaceTime() == nil ||
		!got.GetEndTime().AsTime().Equal(got.GetPlaceTime().AsTime().Add(time.Hour)) {
		t.Fatalf("placed lease %v", got)
	}
	node := got.GetAllocations()[0].GetNodeId()
	for i, a := range got.GetAllocations() {
		if a.GetNodeId() != node || a.GetGpuIndex() != int32(i) || a.GetGpuModel() != "H100" || a.GetGpuUuid() == "" || a.GetEndTime() != nil {
			t.Errorf("allocation %d: %v", i, a)
		}
	}
	ext, err := c.Extend(ctx, &leasesv1.ExtendRequest{Id: l.GetId(), By: durationpb.New(30 * time.Minute)})
	if err != nil {
		t.Fatal(err)
	}
	if d := ext.GetLease().GetEndTime().AsTime().Sub(got.GetEndTime().AsTime()); d != 30*time.Minute || ext.GetLease().GetDuration().AsDuration() != 90*time.Minute {
		t.Fatalf("extended by %v: %v", d, ext.GetLease())
	}
	rel, err := c.Release(ctx, &leasesv1.ReleaseRequest{Id: l.GetId()})
	if err != nil {
		t.Fatal(err)
	}
	if rel.GetLease().GetState() != leasesv1.LeaseState_LEASE_STATE_RELEASED || rel.GetLease().GetAllocations()[0].GetEndTime() == nil {
		t.Fatalf("released %v", rel.GetLease())
	}
	// Releasing again changes nothing; extending an ended lease is refused.
	if again, err := c.Release(ctx, &leasesv1.ReleaseRequest{Id: l.GetId()}); err != nil || !again.GetLease().GetEndTime().AsTime().Equal(rel.GetLease().GetEndTime().AsTime()) {
		t.Fatalf("second release: %v, %v", again, err)
	}
	_, err = c.Extend(ctx, &leasesv1.ExtendRequest{Id: l.GetId(), By: hour()})
	if connect.CodeOf(err) != connect.CodeFailedPrecondition {
		t.Fatalf("extend after release: %v", err)
	}
	if n := count(t, env, `SELECT count(*) FROM allocations WHERE ended_at IS NULL`); n != 0 {
		t.Fatalf("%d allocations still held after release", n)
	}
	var types []string
	rows, err := env.Pool.Query(ctx, `SELECT type FROM outbox WHERE subject = $1 ORDER BY id`, "lease/"+l.GetId())
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var s string
		_ = rows.Scan(&s)
		types = append(types, s)
	}
	if strings.Join(types, " ") != "lease.created lease.placed lease.extended lease.released" {
		t.Errorf("events %v", types)
	}
	// List by pool and state.
	list, err := c.List(ctx, &leasesv1.ListRequest{PoolId: poolID, State: leasesv1.LeaseState_LEASE_STATE_RELEASED})
	if err != nil || len(list.GetLeases()) != 1 {
		t.Fatalf("list: %v, %v", list, err)
	}
	list, err = c.List(ctx, &leasesv1.ListRequest{State: leasesv1.LeaseState_LEASE_STATE_PENDING})
	if err != nil || len(list.GetLeases()) != 0 {
		t.Fatalf("list pending: %v, %v", list, err)
	}
}

// TestConcurrentCreatesNeverOvercommit runs many leases/create calls at once against a small
// pool while the placer places them and other calls release leases, and checks the database:
// no device is ever held twice.
func TestConcurrentCreatesNeverOvercommit(t *testing.T) {
	t.Parallel()
	env := servertest.New(t)
	poolID := fleet(t, env, 2, 4) // 8 GPUs
	c := leases(env)
	rt := placertest.Run(t, env.Pool, placer.Options{})
	var (
		wg       sync.WaitGroup
		created  atomic.Int32
		released atomic.Int32
		stop     = make(chan struct{})
	)
	// The API of this test server has no waker: poke the placer as one would.
	wg.Go(func() {
		for {
			select {
			case <-stop:
				return
			case <-time.After(5 * time.Millisecond):
				rt.Poke(capacity.PlacerKind)
			}
		}
	})
	var creators sync.WaitGroup
	for w := range 8 {
		creators.Go(func() {
			// Until the releases have churned capacity for a while.
			for i := 0; i < 200 && (i < 6 || released.Load() < 20); i++ {
				if _, err := c.Create(ctx, &leasesv1.CreateRequest{PoolId: poolID, Gpus: int32(1 + (w+i)%3), Duration: hour()}); err != nil {
					t.Errorf("create: %v", err)
					return
				}
				if created.Add(1)%10 == 0 {
					capacitytest.AssertNoOvercommit(t, env.Pool)
				}
				time.Sleep(2 * time.Millisecond)
			}
		})
	}
	// Meanwhile release placed leases, so capacity churns.
	wg.Go(func() {
		for {
			select {
			case <-stop:
				return
			default:
			}
			var id uuid.UUID
			if err := env.Pool.QueryRow(ctx, `SELECT id FROM pool_leases WHERE state = 'placed' ORDER BY random() LIMIT 1`).Scan(&id); err == nil {
				if _, err := c.Release(ctx, &leasesv1.ReleaseRequest{Id: id.String()}); err != nil {
					t.Errorf("release: %v", err)
				}
				released.Add(1)
			}
			time.Sleep(2 * time.Millisecond)
		}
	})
	creators.Wait()
	close(stop)
	wg.Wait()
	rt.Poke(capacity.PlacerKind)
	// The placer fills the pool as far as the pending leases allow.
	capacitytest.Eventually(t, 30*time.Second, "the placer settles", func() bool {
		held := capacitytest.AssertNoOvercommit(t, env.Pool)
		var minPending int
		if err := env.Pool.QueryRow(ctx, `SELECT COALESCE(min(gpus), 99) FROM pool_leases WHERE state = 'pending'`).Scan(&minPending); err != nil {
			t.Fatal(err)
		}
		return held == 8 || 8-held < minPending
	})
	held := capacitytest.AssertNoOvercommit(t, env.Pool)
	t.Logf("%d creates, %d releases; %d of 8 GPUs held at the end", created.Load(), released.Load(), held)
	if n := count(t, env, `SELECT count(*) FROM pool_leases WHERE state = 'placed' AND id NOT IN (SELECT lease_id FROM allocations WHERE ended_at IS NULL)`); n != 0 {
		t.Fatalf("%d placed leases hold nothing", n)
	}
	if n := count(t, env, `SELECT count(*) FROM allocations a JOIN pool_leases l ON l.id = a.lease_id WHERE a.ended_at IS NULL AND l.state NOT IN ('placed', 'at_risk')`); n != 0 {
		t.Fatalf("%d allocations held by ended leases", n)
	}
}

func TestExtendStopsAtReservations(t *testing.T) {
	t.Parallel()
	env := servertest.New(t)
	poolID := fleet(t, env, 1, 8)
	c := leases(env)
	l, err := c.Create(ctx, &leasesv1.CreateRequest{PoolId: poolID, Gpus: 2, Duration: hour()})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := placer.New(env.Pool, placer.Options{}).ReconcilePool(ctx, poolID); err != nil {
		t.Fatal(err)
	}
	// The pool is reserved from two to four hours from now.
	rc := reservationsv1connect.NewReservationsServiceClient(env.HTTPClient(env.AdminKey), env.URL)
	now := time.Now()
	if _, err := rc.Create(ctx, &reservationsv1.CreateRequest{PoolId: poolID,
		StartTime: timestamppb.New(now.Add(2 * time.Hour)), EndTime: timestamppb.New(now.Add(4 * time.Hour))}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Extend(ctx, &leasesv1.ExtendRequest{Id: l.GetLease().GetId(), By: durationpb.New(30 * time.Minute)}); err != nil {
		t.Fatalf("extend before the window: %v", err)
	}
	_, err = c.Extend(ctx, &leasesv1.ExtendRequest{Id: l.GetLease().GetId(), By: hour()})
	wantField(t, err, connect.CodeFailedPrecondition, "by")
	got, err := c.Get(ctx, &leasesv1.GetRequest{Id: l.GetLease().GetId()})
	if err != nil || got.GetLease().GetDuration().AsDuration() != 90*time.Minute {
		t.Fatalf("lease %v, %v: the refused extension changed it", got, err)
	}
	// New leases that would run into the window wait; short ones are placed.
	long, err := c.Create(ctx, &leasesv1.CreateRequest{PoolId: poolID, Gpus: 1, Duration: durationpb.New(3 * time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	short, err := c.Create(ctx, &leasesv1.CreateRequest{PoolId: poolID, Gpus: 1, Duration: hour()})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := placer.New(env.Pool, placer.Options{}).ReconcilePool(ctx, poolID); err != nil {
		t.Fatal(err)
	}
	for id, want := range map[string]leasesv1.LeaseState{long.GetLease().GetId(): leasesv1.LeaseState_LEASE_STATE_PENDING, short.GetLease().GetId(): leasesv1.LeaseState_LEASE_STATE_PLACED} {
		got, err := c.Get(ctx, &leasesv1.GetRequest{Id: id})
		if err != nil || got.GetLease().GetState() != want {
			t.Errorf("lease %v, %v; want %v", got.GetLease(), err, want)
		}
	}
}
