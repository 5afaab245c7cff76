package capacity_test

import (
	"testing"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	leasesv1 "github.com/better-compute/better-compute/gen/go/bettercompute/leases/v1"
	"github.com/better-compute/better-compute/gen/go/bettercompute/leases/v1/leasesv1connect"
	poolsv1 "github.com/better-compute/better-compute/gen/go/bettercompute/pools/v1"
	"github.com/better-compute/better-compute/gen/go/bettercompute/pools/v1/poolsv1connect"
	usagev1 "github.com/better-compute/better-compute/gen/go/bettercompute/usage/v1"
	"github.com/better-compute/better-compute/gen/go/bettercompute/usage/v1/usagev1connect"
	"github.com/better-compute/better-compute/internal/capacity/capacitytest"
	"github.com/better-compute/better-compute/server/servertest"
	"github.com/better-compute/better-compute/workers/internal/metering"
	"github.com/better-compute/better-compute/workers/internal/placer"
)

// TestQueryMatchesLeaseDurations creates leases through the API, runs them on an injected clock
// (placement, hourly metering, expiry), aggregates, and reads usage/query: the GPU-seconds are
// exactly the leases' GPUs times their durations.
func TestQueryMatchesLeaseDurations(t *testing.T) {
	t.Parallel()
	env := servertest.New(t)
	tenant := capacitytest.RootTenant(t, env.Pool)
	capacitytest.Nodes(t, env.Pool, tenant, 2, capacitytest.NodeSpec{GPUs: 8, Model: "H100", Labels: map[string]string{"gpu": "h100"}})
	p, err := poolsv1connect.NewPoolsServiceClient(env.HTTPClient(env.AdminKey), env.URL).Create(ctx,
		&poolsv1.CreateRequest{Name: "h100", NodeSelector: map[string]string{"gpu": "h100"}})
	if err != nil {
		t.Fatal(err)
	}
	poolID := p.GetPool().GetId()
	lc := leasesv1connect.NewLeasesServiceClient(env.HTTPClient(env.AdminKey), env.URL)
	durations := []time.Duration{90 * time.Minute, 7*time.Hour + 13*time.Minute + 7*time.Second + 250*time.Millisecond, 45 * time.Second}
	gpus := []int32{8, 3, 1}
	var want float64
	for i, d := range durations {
		if _, err := lc.Create(ctx, &leasesv1.CreateRequest{PoolId: poolID, Gpus: gpus[i], Duration: durationpb.New(d)}); err != nil {
			t.Fatal(err)
		}
		want += float64(gpus[i]) * d.Seconds()
	}
	now := time.Date(2032, 6, 1, 22, 47, 13, 0, time.UTC)
	clock := func() time.Time { return now }
	pl := placer.New(env.Pool, placer.Options{Now: clock})
	if res, err := pl.ReconcilePool(ctx, poolID); err != nil || res.Placed != 3 {
		t.Fatalf("place: %+v, %v", res, err)
	}
	// The usage job runs every 20 minutes of the injected clock, the placer too, for 10 hours.
	for range 30 {
		now = now.Add(20 * time.Minute)
		if _, err := metering.RunOnce(ctx, env.Pool, metering.Options{Now: clock}); err != nil {
			t.Fatal(err)
		}
		if _, err := pl.ReconcilePool(ctx, poolID); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := metering.RunOnce(ctx, env.Pool, metering.Options{Now: clock}); err != nil {
		t.Fatal(err)
	}
	uc := usagev1connect.NewUsageServiceClient(env.HTTPClient(env.AdminKey), env.URL)
	res, err := uc.Query(ctx, &usagev1.QueryRequest{
		StartTime: timestamppb.New(time.Date(2032, 6, 1, 0, 0, 0, 0, time.UTC)), EndTime: timestamppb.New(time.Date(2032, 6, 3, 0, 0, 0, 0, time.UTC)),
		PoolId: poolID, Hourly: true,
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.GetTotals()) != 1 || res.GetTotals()[0].GetResource() != "gpu" || res.GetTotals()[0].GetModel() != "H100" {
		t.Fatalf("totals %v", res.GetTotals())
	}
	if got := res.GetTotals()[0].GetAmount(); got != want {
		t.Fatalf("%v GPU-seconds, want exactly %v", got, want)
	}
	var sum float64
	for _, h := range res.GetHours() {
		sum += h.GetAmount()
		if h.GetHour().AsTime().Minute() != 0 {
			t.Errorf("hour %v not on the hour", h.GetHour().AsTime())
		}
	}
	if len(res.GetHours()) != 9 || sum != want { // 22h to 06h: nine hours
		t.Errorf("%d hourly rows summing to %v", len(res.GetHours()), sum)
	}
	if res.GetUnaggregatedRecords() != 0 {
		t.Errorf("%d records not aggregated", res.GetUnaggregatedRecords())
	}
	// Another period has nothing; a bad period is refused.
	none, err := uc.Query(ctx, &usagev1.QueryRequest{StartTime: timestamppb.New(now.Add(24 * time.Hour)), EndTime: timestamppb.New(now.Add(48 * time.Hour))})
	if err != nil || len(none.GetTotals()) != 0 {
		t.Fatalf("empty period: %v, %v", none, err)
	}
	_, err = uc.Query(ctx, &usagev1.QueryRequest{StartTime: timestamppb.New(now), EndTime: timestamppb.New(now.Add(-time.Hour))})
	if connect.CodeOf(err) != connect.CodeInvalidArgument {
		t.Fatalf("reversed period: %v", err)
	}
}
