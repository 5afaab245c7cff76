package leases_test

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

	leasesv1 "github.com/better-compute/better-compute/gen/go/bettercompute/leases/v1"
	"github.com/better-compute/better-compute/gen/go/bettercompute/leases/v1/leasesv1connect"
	poolsv1 "github.com/better-compute/better-compute/gen/go/bettercompute/pools/v1"
	"github.com/better-compute/better-compute/gen/go/bettercompute/pools/v1/poolsv1connect"
	"github.com/better-compute/better-compute/internal/capacity"
	"github.com/better-compute/better-compute/internal/capacity/capacitytest"
	"github.com/better-compute/better-compute/internal/dbtest"
	"github.com/better-compute/better-compute/server/servertest"
)

func TestMain(m *testing.M) { dbtest.Main(m) }

var ctx = context.Background()

func leases(env *servertest.Env) leasesv1connect.LeasesServiceClient {
	return leasesv1connect.NewLeasesServiceClient(env.HTTPClient(env.AdminKey), env.URL)
}

func pools(env *servertest.Env) poolsv1connect.PoolsServiceClient {
	return poolsv1connect.NewPoolsServiceClient(env.HTTPClient(env.AdminKey), env.URL)
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

func TestBadInputChangesNothing(t *testing.T) {
	t.Parallel()
	env := servertest.New(t)
	poolID := fleet(t, env, 2, 4)
	c := leases(env)
	cases := []struct {
		name  string
		req   *leasesv1.CreateRequest
		code  connect.Code
		field string
	}{
		{"more GPUs than the pool has", &leasesv1.CreateRequest{PoolId: poolID, Gpus: 9, Duration: hour()}, connect.CodeFailedPrecondition, "gpus"},
		{"negative duration", &leasesv1.CreateRequest{PoolId: poolID, Gpus: 1, Duration: durationpb.New(-time.Minute)}, connect.CodeInvalidArgument, "duration"},
		{"no duration", &leasesv1.CreateRequest{PoolId: poolID, Gpus: 1}, connect.CodeInvalidArgument, "duration"},
		{"unknown pool", &leasesv1.CreateRequest{PoolId: uuid.NewString(), Gpus: 1, Duration: hour()}, connect.CodeFailedPrecondition, "pool_id"},
		{"malformed pool", &leasesv1.CreateRequest{PoolId: "h100", Gpus: 1, Duration: hour()}, connect.CodeInvalidArgument, "pool_id"},
		{"unknown GPU model", &leasesv1.CreateRequest{PoolId: poolID, Gpus: 1, GpuModel: "B200", Duration: hour()}, connect.CodeFailedPrecondition, "gpu_model"},
		{"negative GPUs", &leasesv1.CreateRequest{PoolId: poolID, Gpus: -1, Duration: hour()}, connect.CodeInvalidArgument, "gpus"},
		{"nothing asked", &leasesv1.CreateRequest{PoolId: poolID, Duration: hour()}, connect.CodeInvalidArgument, "gpus"},
		{"GPUs and CPUs", &leasesv1.CreateRequest{PoolId: poolID, Gpus: 1, Cpus: 2, Duration: hour()}, connect.CodeInvalidArgument, "cpus"},
		{"more CPUs than a node has", &leasesv1.CreateRequest{PoolId: poolID, Cpus: 65, Duration: hour()}, connect.CodeFailedPrecondition, "cpus"},
		{"bad toleration", &leasesv1.CreateRequest{PoolId: poolID, Gpus: 1, Duration: hour(), Tolerations: []*leasesv1.Toleration{{Key: "k", Operator: "Like"}}}, connect.CodeInvalidArgument, "tolerations[0].operator"},
		{"unknown topology mode", &leasesv1.CreateRequest{PoolId: poolID, Gpus: 2, Duration: hour(), Topology: leasesv1.TopologyMode(7)}, connect.CodeInvalidArgument, "topology"},
		{"unknown reservation", &leasesv1.CreateRequest{PoolId: poolID, Gpus: 1, Duration: hour(), ReservationId: uuid.NewString()}, connect.CodeFailedPrecondition, "reservation_id"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := c.Create(ctx, tc.req)
			wantField(t, err, tc.code, tc.field)
		})
	}
	if n := count(t, env, `SELECT count(*) FROM pool_leases`); n != 0 {
		t.Fatalf("%d leases after refused calls", n)
	}
	if n := count(t, env, `SELECT count(*) FROM outbox WHERE type LIKE 'lease.%'`); n != 0 {
		t.Fatalf("%d lease events after refused calls", n)
	}
	if n := count(t, env, `SELECT count(*) FROM reconcile_queue WHERE kind = $1`, capacity.PlacerKind); n != 0 {
		t.Fatalf("the placer was queued %d times by refused calls", n)
	}
	// Not found, and another tenant's id looks the same.
	_, err := c.Get(ctx, &leasesv1.GetRequest{Id: uuid.NewString()})
	if connect.CodeOf(err) != connect.CodeNotFound {
		t.Fatalf("get unknown: %v", err)
	}
	_, err = c.Extend(ctx, &leasesv1.ExtendRequest{Id: uuid.NewString(), By: durationpb.New(0)})
	wantField(t, err, connect.CodeInvalidArgument, "by")
}

func TestQuota(t *testing.T) {
	t.Parallel()
	env := servertest.New(t)
	poolID := fleet(t, env, 2, 8)
	max4 := int32(4)
	if _, err := pools(env).SetQuota(ctx, &poolsv1.SetQuotaRequest{PoolId: poolID, Quota: &poolsv1.Quota{MaxGpus: &max4}}); err != nil {
		t.Fatal(err)
	}
	c := leases(env)
	// Ten concurrent one-GPU leases against a quota of 4: exactly four are admitted.
	var wg sync.WaitGroup
	var ok, refused atomic.Int32
	for range 10 {
		wg.Go(func() {
			_, err := c.Create(ctx, &leasesv1.CreateRequest{PoolId: poolID, Gpus: 1, Duration: hour()})
			switch {
			case err == nil:
				ok.Add(1)
			case connect.CodeOf(err) == connect.CodeFailedPrecondition && strings.Contains(err.Error(), "gpus: the tenant's quota"):
				refused.Add(1)
			default:
				t.Errorf("create: %v", err)
			}
		})
	}
	wg.Wait()
	if ok.Load() != 4 || refused.Load() != 6 {
		t.Fatalf("%d admitted, %d refused; want 4 and 6", ok.Load(), refused.Load())
	}
	// Releasing one makes room for one.
	list, err := c.List(ctx, &leasesv1.ListRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Release(ctx, &leasesv1.ReleaseRequest{Id: list.GetLeases()[0].GetId()}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Create(ctx, &leasesv1.CreateRequest{PoolId: poolID, Gpus: 1, Duration: hour()}); err != nil {
		t.Fatal(err)
	}
	got, err := pools(env).Get(ctx, &poolsv1.GetRequest{Id: poolID})
	if err != nil || got.GetPool().GetQuota().GetMaxGpus() != 4 {
		t.Fatalf("pool %v, %v", got, err)
	}
}

// BenchmarkCreate measures leases/create calls per second through the real API (HTTP/2,
// guard, IAM, admission with quota and audit, outbox) against a pool of 2,000 8-GPU nodes, with
// 16 concurrent callers.
func BenchmarkCreate(b *testing.B) {
	env := servertest.New(b)
	poolID := fleet(b, env, 2000, 8)
	max := int32(1 << 30)
	if _, err := pools(env).SetQuota(ctx, &poolsv1.SetQuotaRequest{PoolId: poolID, Quota: &poolsv1.Quota{MaxGpus: &max}}); err != nil {
		b.Fatal(err)
	}
	c := leases(env)
	if _, err := env.Pool.Exec(ctx, "VACUUM ANALYZE"); err != nil {
		b.Fatal(err)
	}
	b.SetParallelism(8) // 8 x GOMAXPROCS callers
	start := time.Now()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := c.Create(ctx, &leasesv1.CreateRequest{PoolId: poolID, Gpus: 1, GpuModel: "H100", Duration: hour()}); err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.StopTimer()
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "creates/s")
}
