package gpuhealth_test

import (
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/fieldmaskpb"

	leasesv1 "github.com/better-compute/better-compute/gen/go/bettercompute/leases/v1"
	poolsv1 "github.com/better-compute/better-compute/gen/go/bettercompute/pools/v1"
	"github.com/better-compute/better-compute/gen/go/bettercompute/pools/v1/poolsv1connect"
	"github.com/better-compute/better-compute/internal/daemon"
	"github.com/better-compute/better-compute/internal/poll"
	"github.com/better-compute/better-compute/workers/internal/idlejob"
)

// TestIdleNotifyAndReleaseThroughTheAPI: two leases of four GPUs on one node whose FakeDaemon
// sends its minutes through the gateway, one lease's GPUs idle and the other's busy. Under
// NOTIFY the idle one is told (lease.idle, idle_since) and keeps running; under RELEASE with no
// grace it is released with reason "idle: …", and the running placer gives its GPUs to a lease
// that waited for them. The busy lease is never touched.
func TestIdleNotifyAndReleaseThroughTheAPI(t *testing.T) {
	t.Parallel()
	var clock atomic.Int64
	clock.Store(time.Now().UnixNano())
	d := newDrillOpts(t, nil, func(o *daemon.FakeOptions) {
		o.Now = func() time.Time { return time.Unix(0, clock.Load()) }
		o.UsageInterval = time.Hour // the test samples (FlushUsage)
	}, "i1")
	pools := poolsv1connect.NewPoolsServiceClient(d.env.HTTPClient(d.env.AdminKey), d.env.URL)
	policy := func(action poolsv1.IdleAction) {
		t.Helper()
		if _, err := pools.Update(ctx, &poolsv1.UpdateRequest{
			Id:         d.pool,
			IdlePolicy: &poolsv1.IdlePolicy{MinUtilization: 10, Window: durationpb.New(5 * time.Minute), Action: action, Grace: durationpb.New(0)},
			UpdateMask: &fieldmaskpb.FieldMask{Paths: []string{"idle_policy"}},
		}); err != nil {
			t.Fatal(err)
		}
	}
	policy(poolsv1.IdleAction_IDLE_ACTION_NOTIFY)

	idle, busy := d.lease(t, 4), d.lease(t, 4)
	for _, l := range []*leasesv1.Lease{idle, busy} {
		// Placed a while ago, as the window needs (the idle job reads the database's clock), and its
		// GPUs held since.
		if _, err := d.env.Pool.Exec(ctx, `UPDATE pool_leases SET placed_at = placed_at - interval '10 minutes' WHERE id = $1`, l.GetId()); err != nil {
			t.Fatal(err)
		}
		if _, err := d.env.Pool.Exec(ctx, `UPDATE allocations SET started_at = started_at - interval '10 minutes', metered_until = metered_until - interval '10 minutes' WHERE lease_id = $1`, l.GetId()); err != nil {
			t.Fatal(err)
		}
		profile := daemon.LoadBusy
		if l == idle {
			profile = daemon.LoadIdle
		}
		for _, a := range l.GetAllocations() {
			if err := d.fakes["i1"].SetLoad(a.GetGpuUuid(), profile); err != nil {
				t.Fatal(err)
			}
		}
	}
	// A first minute takes whatever the GPUs sampled before; then the window's five and one more.
	now := time.Now().UTC().Truncate(time.Minute)
	for _, i := range []int{8, 6, 5, 4, 3, 2, 1} {
		clock.Store(now.Add(-time.Duration(i)*time.Minute + time.Second).UnixNano())
		if d.fakes["i1"].FlushUsage() == nil {
			t.Fatal("no minute sent")
		}
	}
	poll.Until(t, 10*time.Second, "the minutes are stored", func() bool {
		return d.count(t, `SELECT count(*) FROM lease_gpu_minutes WHERE minute >= $1`, now.Add(-6*time.Minute)) == 12
	})

	st, err := idlejob.RunOnce(ctx, d.env.Pool, idlejob.Options{})
	if err != nil || st.Told != 1 || st.Released != 0 {
		t.Fatalf("idle job under NOTIFY: %+v, %v; want one lease told", st, err)
	}
	get := func(id string) *leasesv1.Lease {
		t.Helper()
		res, err := d.leases.Get(ctx, &leasesv1.GetRequest{Id: id})
		if err != nil {
			t.Fatal(err)
		}
		return res.GetLease()
	}
	if l := get(idle.GetId()); l.GetState() != leasesv1.LeaseState_LEASE_STATE_PLACED || l.GetIdleSince() == nil {
		t.Fatalf("the idle lease under NOTIFY: %v, idle since %v", l.GetState(), l.GetIdleSince())
	}
	if l := get(busy.GetId()); l.GetIdleSince() != nil || l.GetUtilization().GetMeanUtilization() < 50 {
		t.Fatalf("the busy lease: idle since %v, utilisation %v", l.GetIdleSince(), l.GetUtilization())
	}
	if n := d.count(t, `SELECT count(*) FROM outbox WHERE type = 'lease.idle' AND subject = 'lease/' || $1`, idle.GetId()); n != 1 {
		t.Fatalf("%d lease.idle events, want 1", n)
	}

	// A lease that waits for GPUs, then RELEASE: the idle lease is released and the waiting one
	// placed on its GPUs.
	waiting, err := d.leases.Create(ctx, &leasesv1.CreateRequest{PoolId: d.pool, Gpus: 4, Duration: durationpb.New(time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	policy(poolsv1.IdleAction_IDLE_ACTION_RELEASE)
	if st, err = idlejob.RunOnce(ctx, d.env.Pool, idlejob.Options{}); err != nil || st.Released != 1 {
		t.Fatalf("idle job under RELEASE: %+v, %v; want one lease released", st, err)
	}
	l := get(idle.GetId())
	if l.GetState() != leasesv1.LeaseState_LEASE_STATE_RELEASED || !strings.HasPrefix(l.GetReason(), "idle: ") {
		t.Fatalf("the idle lease under RELEASE: %v, %q", l.GetState(), l.GetReason())
	}
	freed := map[string]bool{}
	for _, a := range idle.GetAllocations() {
		freed[a.GetGpuUuid()] = true
	}
	poll.Until(t, 10*time.Second, "the waiting lease is placed on the freed GPUs", func() bool {
		w := get(waiting.GetLease().GetId())
		if w.GetState() != leasesv1.LeaseState_LEASE_STATE_PLACED {
			return false
		}
		for _, a := range w.GetAllocations() {
			if !freed[a.GetGpuUuid()] {
				t.Fatalf("the waiting lease got %s, not a freed GPU", a.GetGpuUuid())
			}
		}
		return true
	})
	if l := get(busy.GetId()); l.GetState() != leasesv1.LeaseState_LEASE_STATE_PLACED {
		t.Fatalf("the busy lease: %v", l.GetState())
	}
}
