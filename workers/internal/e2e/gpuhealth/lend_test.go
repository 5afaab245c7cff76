package gpuhealth_test

import (
	"sync/atomic"
	"testing"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/fieldmaskpb"

	iamv1 "github.com/better-compute/better-compute/gen/go/bettercompute/iam/v1"
	leasesv1 "github.com/better-compute/better-compute/gen/go/bettercompute/leases/v1"
	"github.com/better-compute/better-compute/gen/go/bettercompute/leases/v1/leasesv1connect"
	poolsv1 "github.com/better-compute/better-compute/gen/go/bettercompute/pools/v1"
	"github.com/better-compute/better-compute/gen/go/bettercompute/pools/v1/poolsv1connect"
	"github.com/better-compute/better-compute/internal/daemon"
	"github.com/better-compute/better-compute/internal/poll"
	"github.com/better-compute/better-compute/workers/internal/idlejob"
)

// TestLendThroughTheAPI: a pool's idle policy lends (LEND, grace 0); a lease of a node's 8 GPUs
// whose FakeDaemon sends idle minutes through the gateway is lent by the idle job; another
// tenant's lease is placed on the same GPUs by the running placer and leases/get shows the loan;
// leases/wake preempts the borrower with the pool's grace (1s) and the holder gets the same 8
// GPUs back.
func TestLendThroughTheAPI(t *testing.T) {
	t.Parallel()
	var clock atomic.Int64
	clock.Store(time.Now().UnixNano())
	d := newDrillOpts(t, nil, func(o *daemon.FakeOptions) {
		o.Now = func() time.Time { return time.Unix(0, clock.Load()) }
		o.UsageInterval = time.Hour // the test samples (FlushUsage)
	}, "l1")
	pools := poolsv1connect.NewPoolsServiceClient(d.env.HTTPClient(d.env.AdminKey), d.env.URL)
	if _, err := pools.Update(ctx, &poolsv1.UpdateRequest{
		Id: d.pool, PreemptionGracePeriod: durationpb.New(time.Second),
		IdlePolicy: &poolsv1.IdlePolicy{MinUtilization: 10, Window: durationpb.New(5 * time.Minute), Action: poolsv1.IdleAction_IDLE_ACTION_LEND},
		UpdateMask: &fieldmaskpb.FieldMask{Paths: []string{"preemption_grace_period", "idle_policy"}},
	}); err != nil {
		t.Fatal(err)
	}
	other, err := d.env.IAM(d.env.AdminKey).CreateTenant(ctx, &iamv1.CreateTenantRequest{Name: "borrower"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := pools.Grant(ctx, &poolsv1.GrantRequest{
		PoolId: d.pool, TenantId: other.GetTenant().GetId(),
		BorrowingLimit: &poolsv1.Resources{Gpus: map[string]int32{"NVIDIA H100 80GB HBM3": 8}},
	}); err != nil {
		t.Fatal(err)
	}
	otherLeases := leasesv1connect.NewLeasesServiceClient(d.env.HTTPClient(other.GetOwnerApiKey()), d.env.URL)

	holder := d.lease(t, 8)
	// The lease was placed a while ago, as the window needs (the idle job reads the database's
	// clock), and its node's daemon sent five idle minutes since.
	if _, err := d.env.Pool.Exec(ctx, `UPDATE pool_leases SET placed_at = placed_at - interval '10 minutes' WHERE id = $1`, holder.GetId()); err != nil {
		t.Fatal(err)
	}
	if _, err := d.env.Pool.Exec(ctx, `UPDATE allocations SET started_at = started_at - interval '10 minutes', metered_until = metered_until - interval '10 minutes' WHERE lease_id = $1`, holder.GetId()); err != nil {
		t.Fatal(err)
	}
	uuids := map[string]bool{}
	for _, a := range holder.GetAllocations() {
		uuids[a.GetGpuUuid()] = true
		if err := d.fakes["l1"].SetLoad(a.GetGpuUuid(), daemon.LoadIdle); err != nil {
			t.Fatal(err)
		}
	}
	// A first minute takes whatever the GPUs sampled before they were set idle; then six idle
	// minutes, the window's and one more.
	now := time.Now().UTC().Truncate(time.Minute)
	for _, i := range []int{8, 6, 5, 4, 3, 2, 1} {
		clock.Store(now.Add(-time.Duration(i)*time.Minute + time.Second).UnixNano())
		if d.fakes["l1"].FlushUsage() == nil {
			t.Fatal("no minute sent")
		}
	}
	poll.Until(t, 10*time.Second, "the idle minutes are stored", func() bool {
		return d.count(t, `SELECT count(*) FROM lease_gpu_minutes WHERE lease_id = $1 AND minute >= $2`, holder.GetId(), now.Add(-6*time.Minute)) == 6
	})
	st, err := idlejob.RunOnce(ctx, d.env.Pool, idlejob.Options{})
	if err != nil || st.Lent != 1 {
		t.Fatalf("idle job: %+v, %v; want the lease lent", st, err)
	}

	// Another tenant's lease takes the lent GPUs.
	created, err := otherLeases.Create(ctx, &leasesv1.CreateRequest{PoolId: d.pool, Gpus: 8, Duration: durationpb.New(time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	var borrower *leasesv1.Lease
	poll.Until(t, 10*time.Second, "the borrower is placed on the lent GPUs", func() bool {
		res, err := otherLeases.Get(ctx, &leasesv1.GetRequest{Id: created.GetLease().GetId()})
		if err != nil {
			t.Fatal(err)
		}
		borrower = res.GetLease()
		return borrower.GetState() == leasesv1.LeaseState_LEASE_STATE_PLACED
	})
	for _, a := range borrower.GetAllocations() {
		if !uuids[a.GetGpuUuid()] {
			t.Fatalf("the borrower holds %s, not a lent GPU", a.GetGpuUuid())
		}
	}
	got, err := d.leases.Get(ctx, &leasesv1.GetRequest{Id: holder.GetId()})
	if err != nil {
		t.Fatal(err)
	}
	if l := got.GetLease(); l.GetState() != leasesv1.LeaseState_LEASE_STATE_PLACED || l.GetLent().GetGpus() != 8 || l.GetLent().GetBorrowers() != 1 {
		t.Fatalf("the holder: %v, lent %v", l.GetState(), l.GetLent())
	}
	// The borrower's tenant cannot wake the holder's lease.
	if _, err := otherLeases.Wake(ctx, &leasesv1.WakeRequest{Id: holder.GetId()}); connect.CodeOf(err) != connect.CodeNotFound {
		t.Fatalf("another tenant's wake: %v", err)
	}

	// The holder wakes: the borrower is preempted, and the holder holds the same GPUs again.
	if _, err := d.leases.Wake(ctx, &leasesv1.WakeRequest{Id: holder.GetId()}); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, 20*time.Second, "the holder has its GPUs back", func() bool {
		res, err := d.leases.Get(ctx, &leasesv1.GetRequest{Id: holder.GetId()})
		if err != nil {
			t.Fatal(err)
		}
		l := res.GetLease()
		held := 0
		for _, a := range l.GetAllocations() {
			if a.GetEndTime() == nil && uuids[a.GetGpuUuid()] {
				held++
			}
		}
		return l.GetLent() == nil && held == 8
	})
	res, err := otherLeases.Get(ctx, &leasesv1.GetRequest{Id: borrower.GetId()})
	if err != nil || res.GetLease().GetState() != leasesv1.LeaseState_LEASE_STATE_PREEMPTED {
		t.Fatalf("the borrower: %v, %v; want preempted", res.GetLease().GetState(), err)
	}
	if n := d.count(t, `SELECT count(*) FROM outbox WHERE type = 'lease.woke'`); n != 1 {
		t.Errorf("%d lease.woke events", n)
	}
}
