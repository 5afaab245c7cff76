package client_test

import (
	"fmt"
	"log"
	"os"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/better-compute/better-compute/client"
	leasesv1 "github.com/better-compute/better-compute/gen/go/bettercompute/leases/v1"
	poolsv1 "github.com/better-compute/better-compute/gen/go/bettercompute/pools/v1"
	usagev1 "github.com/better-compute/better-compute/gen/go/bettercompute/usage/v1"
)

// The "Sharing a pool with another tenant" examples client/README.md shows (c, the owner's
// client, and ctx are example_test.go's); they are compiled with the tests, and
// TestREADMEShowsTheExamples checks that the README shows them as they are.

var (
	// grantee is a client of the tenant the pool is granted to, with its own API key.
	grantee           = client.New(os.Getenv("BETTER_COMPUTE_URL"), client.WithAPIKey(os.Getenv("GRANTEE_API_KEY")))
	tenantID, csvPath = os.Getenv("TENANT_ID"), os.Getenv("CSV_PATH")
)

func Example_grantPool() {
	res, err := c.Pools.Grant(ctx, &poolsv1.GrantRequest{
		PoolId:         poolID,
		TenantId:       tenantID,
		Nominal:        &poolsv1.Resources{Gpus: map[string]int32{"NVIDIA H100 80GB HBM3": 4}},
		BorrowingLimit: &poolsv1.Resources{Gpus: map[string]int32{"NVIDIA H100 80GB HBM3": 4}},
		Weight:         1,
	})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("granted", res.GetGrant().GetId())
}

func Example_leaseFromGrantedPool() {
	pools, err := grantee.Pools.List(ctx, &poolsv1.ListRequest{})
	if err != nil {
		log.Fatal(err)
	}
	for _, p := range pools.GetPools() {
		if p.GetGranted() {
			g := p.GetGrant()
			fmt.Println(p.GetId(), p.GetName(), "nominal", g.GetNominal().GetGpus(), "borrowable", g.GetBorrowable().GetGpus())
		}
	}
	res, err := grantee.Leases.Create(ctx, &leasesv1.CreateRequest{
		PoolId: poolID, Gpus: 2, GpuModel: "NVIDIA H100 80GB HBM3", Priority: 100, Duration: durationpb.New(time.Hour),
	})
	if err != nil {
		log.Fatal(err)
	}
	lease, err := grantee.WaitForLease(ctx, res.GetLease().GetId()) // leases/get until it is no longer pending
	if err != nil || lease.GetState() != leasesv1.LeaseState_LEASE_STATE_PLACED {
		log.Fatal(err, lease.GetState(), lease.GetReason())
	}
	for _, a := range lease.GetAllocations() {
		fmt.Println(a.GetNodeId(), a.GetHostname(), "GPU", a.GetGpuIndex(), a.GetGpuUuid())
	}
	if lease.GetBorrowing() {
		fmt.Println("beyond the nominal quota: preempted first when the capacity is needed back")
	}
}

func Example_listAndRevokeGrants() {
	res, err := c.Pools.ListGrants(ctx, &poolsv1.ListGrantsRequest{PoolId: poolID})
	if err != nil {
		log.Fatal(err)
	}
	for _, g := range res.GetGrants() {
		fmt.Println(g.GetTenantId(), "uses", g.GetUsed().GetGpus(), "borrows", g.GetBorrowed().GetGpus())
	}
	if _, err := c.Pools.RevokeGrant(ctx, &poolsv1.RevokeGrantRequest{PoolId: poolID, TenantId: tenantID}); err != nil {
		log.Fatal(err)
	}
}

func Example_usageByTenant() {
	end := time.Now().Truncate(time.Hour)
	start, stop := timestamppb.New(end.AddDate(0, 0, -30)), timestamppb.New(end)
	usage, err := c.Usage.Query(ctx, &usagev1.QueryRequest{StartTime: start, EndTime: stop, Scope: usagev1.Scope_SCOPE_OWNED_POOLS})
	if err != nil {
		log.Fatal(err)
	}
	for _, u := range usage.GetTotals() {
		fmt.Println(u.GetTenantId(), u.GetPoolId(), u.GetResource(), u.GetModel(), u.GetAmount()) // GPU-, CPU- or MiB-seconds
	}
	// The export comes in pages of up to 10,000 rows; ExportUsage writes them one after another.
	f, err := os.Create(csvPath)
	if err != nil {
		log.Fatal(err)
	}
	defer f.Close()
	if _, err := c.ExportUsage(ctx, &usagev1.ExportRequest{
		StartTime: start, EndTime: stop, Scope: usagev1.Scope_SCOPE_OWNED_POOLS, Format: usagev1.ExportFormat_EXPORT_FORMAT_CSV,
	}, f); err != nil {
		log.Fatal(err)
	}
}
