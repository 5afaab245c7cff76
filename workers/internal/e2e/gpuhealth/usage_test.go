package gpuhealth_test

import (
	"errors"
	"fmt"
	"math"
	"sync/atomic"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/google/uuid"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/better-compute/better-compute/gen/db"
	daemonv1 "github.com/better-compute/better-compute/gen/go/bettercompute/daemon/v1"
	iamv1 "github.com/better-compute/better-compute/gen/go/bettercompute/iam/v1"
	leasesv1 "github.com/better-compute/better-compute/gen/go/bettercompute/leases/v1"
	"github.com/better-compute/better-compute/gen/go/bettercompute/leases/v1/leasesv1connect"
	"github.com/better-compute/better-compute/internal/daemon"
	"github.com/better-compute/better-compute/internal/poll"
)

// TestLeaseUtilization: two FakeDaemons on a fake clock send three minutes of GPU usage through
// the gateway; leases/get shows, for a lease of two GPUs on one node and a gang with a GPU on
// each node, exactly the roll-up of the minutes sent (the later of a minute sent twice
// replacing the earlier), nothing of the GPUs no lease holds nor of a minute two days old; and
// another tenant sees none of it.
func TestLeaseUtilization(t *testing.T) {
	t.Parallel()
	old := time.Now().UTC().Truncate(time.Minute).Add(-48 * time.Hour)
	var clock atomic.Int64
	clock.Store(old.UnixNano())
	d := newDrillOpts(t, nil, func(o *daemon.FakeOptions) {
		o.Now = func() time.Time { return time.Unix(0, clock.Load()) }
		o.UsageInterval = time.Hour // the test samples (FlushUsage)
	}, "u1", "u2")
	single := d.lease(t, 2)
	created, err := d.leases.Create(ctx, &leasesv1.CreateRequest{PoolId: d.pool, Nodes: 2, GpusPerNode: 1, Duration: durationpb.New(time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	var gang *leasesv1.Lease
	poll.Until(t, 10*time.Second, "the gang is placed", func() bool {
		res, err := d.leases.Get(ctx, &leasesv1.GetRequest{Id: created.GetLease().GetId()})
		if err != nil {
			t.Fatal(err)
		}
		gang = res.GetLease()
		return gang.GetState() == leasesv1.LeaseState_LEASE_STATE_PLACED && len(gang.GetAllocations()) == 2
	})
	for _, a := range single.GetAllocations() {
		if err := d.fakes[a.GetHostname()].SetLoad(a.GetGpuUuid(), daemon.LoadBusy); err != nil {
			t.Fatal(err)
		}
	}
	if a := gang.GetAllocations()[0]; true {
		if err := d.fakes[a.GetHostname()].SetLoad(a.GetGpuUuid(), daemon.LoadBursty); err != nil {
			t.Fatal(err)
		}
	}
	if got := single.GetUtilization(); got != nil {
		t.Fatalf("a lease without a sample has utilization %v", got)
	}

	// The minutes start after the leases were placed (a minute counts for the allocations that
	// started before it ended), in the future the gateway accepts.
	base := time.Now().UTC().Truncate(time.Minute).Add(time.Minute)
	// What each node sent last for each minute.
	sent := map[string]map[time.Time]*daemonv1.GpuUsage{}
	flush := func(host string, at time.Time) {
		clock.Store(at.UnixNano())
		m := d.fakes[host].FlushUsage()
		if m == nil {
			t.Fatalf("%s sent no minute at %s", host, at)
		}
		if sent[host] == nil {
			sent[host] = map[time.Time]*daemonv1.GpuUsage{}
		}
		sent[host][m.GetMinute().AsTime()] = m
	}
	for _, host := range []string{"u1", "u2"} {
		flush(host, old.Add(time.Second)) // two days old: dropped
	}
	delete(sent["u1"], old)
	delete(sent["u2"], old)
	for i := range 3 {
		minute := base.Add(time.Duration(i) * time.Minute)
		for _, host := range []string{"u1", "u2"} {
			flush(host, minute.Add(time.Second))
			if i == 1 {
				flush(host, minute.Add(30*time.Second)) // the same minute again: replaces
			}
		}
	}

	want := func(l *leasesv1.Lease) *leasesv1.Utilization {
		u := &leasesv1.Utilization{}
		var utilSum float64
		var utilN int
		minutes := map[time.Time]bool{}
		for _, a := range l.GetAllocations() {
			for minute, m := range sent[a.GetHostname()] {
				for _, s := range m.GetGpus() {
					if s.GetUuid() != a.GetGpuUuid() {
						continue
					}
					u.GpuSecondsHeld += 60
					u.GpuSecondsActive += int64(s.GetActiveSeconds())
					if s.UtilMean != nil {
						utilSum += float64(s.GetUtilMean())
						utilN++
					}
					u.PeakMemoryBytes = max(u.PeakMemoryBytes, int64(s.GetMemoryUsedMaxBytes()))
					minutes[minute] = true
				}
			}
		}
		u.SampledMinutes = int64(len(minutes))
		u.MeanUtilization = utilSum / float64(utilN)
		return u
	}
	diff := func(got, want *leasesv1.Utilization) string {
		switch {
		case got == nil:
			return "no utilization"
		case got.GetGpuSecondsHeld() != want.GetGpuSecondsHeld() || got.GetGpuSecondsActive() != want.GetGpuSecondsActive() ||
			got.GetPeakMemoryBytes() != want.GetPeakMemoryBytes() || got.GetSampledMinutes() != want.GetSampledMinutes() ||
			math.Abs(got.GetMeanUtilization()-want.GetMeanUtilization()) > 1e-6 ||
			!got.GetLastSampleTime().AsTime().Equal(base.Add(2*time.Minute)):
			return fmt.Sprintf("utilization %v, want %v with the last sample at %s", got, want, base.Add(2*time.Minute))
		}
		return ""
	}
	wantSingle, wantGang := want(single), want(gang)
	if wantSingle.GetGpuSecondsHeld() != 2*3*60 || wantGang.GetGpuSecondsHeld() != 2*3*60 || wantSingle.GetMeanUtilization() < 85 {
		t.Fatalf("the minutes sent are not the series the test means: %v, %v", wantSingle, wantGang)
	}
	var why string
	t.Cleanup(func() {
		if t.Failed() && why != "" {
			t.Log(why)
		}
	})
	poll.Until(t, 10*time.Second, "leases/get shows the minutes sent", func() bool {
		why = ""
		for _, c := range []struct {
			l    *leasesv1.Lease
			want *leasesv1.Utilization
		}{{single, wantSingle}, {gang, wantGang}} {
			res, err := d.leases.Get(ctx, &leasesv1.GetRequest{Id: c.l.GetId()})
			if err != nil {
				t.Fatal(err)
			}
			if w := diff(res.GetLease().GetUtilization(), c.want); w != "" {
				why += c.l.GetId() + ": " + w + "; "
			}
		}
		return why == ""
	})
	// One row per lease per node per minute: the single lease's on its node, the gang's on both;
	// none for the GPUs no lease holds, none for the old minute.
	if n := d.count(t, `SELECT count(*) FROM lease_gpu_minutes`); n != 3+2*3 {
		t.Errorf("%d rows, want 9", n)
	}
	if n := d.count(t, `SELECT COALESCE(sum(gpus), 0) FROM lease_gpu_minutes`); n != 3*2+2*3 {
		t.Errorf("the rows summarise %d GPU-minutes, want 12", n)
	}
	// Each row carries its GPUs' model, as the metering records do: what usage/query matches
	// utilisation to usage by.
	if n := d.count(t, `SELECT count(*) FROM lease_gpu_minutes WHERE model <> 'NVIDIA H100 80GB HBM3'`); n != 0 {
		t.Errorf("%d rows without the GPUs' model", n)
	}
	if n := d.count(t, `SELECT count(*) FROM lease_gpu_minutes WHERE minute < $1`, base); n != 0 {
		t.Errorf("%d rows of the minute two days old", n)
	}
	list, err := d.leases.List(ctx, &leasesv1.ListRequest{})
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range list.GetLeases() {
		if w := diff(l.GetUtilization(), want(l)); w != "" {
			t.Errorf("leases/list: %s: %s", l.GetId(), w)
		}
	}

	// Another tenant sees none of it.
	other, err := d.env.IAM(d.env.AdminKey).CreateTenant(ctx, &iamv1.CreateTenantRequest{Name: "other"})
	if err != nil {
		t.Fatal(err)
	}
	otherLeases := leasesv1connect.NewLeasesServiceClient(d.env.HTTPClient(other.GetOwnerApiKey()), d.env.URL)
	if _, err := otherLeases.Get(ctx, &leasesv1.GetRequest{Id: single.GetId()}); connect.CodeOf(err) != connect.CodeNotFound {
		t.Errorf("another tenant's leases/get: %v, want NotFound", err)
	}
	if res, err := otherLeases.List(ctx, &leasesv1.ListRequest{}); err != nil || len(res.GetLeases()) != 0 {
		t.Errorf("another tenant's leases/list: %v, %v; want none", res.GetLeases(), err)
	}
	otherID, err := uuid.Parse(other.GetTenant().GetId())
	if err != nil {
		t.Fatal(errors.Join(err, fmt.Errorf("tenant %v", other.GetTenant())))
	}
	rows, err := db.New(d.env.Pool).LeaseUtilization(ctx, db.LeaseUtilizationParams{
		TenantID: otherID, LeaseIds: []uuid.UUID{uuid.MustParse(single.GetId()), uuid.MustParse(gang.GetId())},
	})
	if err != nil || len(rows) != 0 {
		t.Errorf("LeaseUtilization under another tenant: %v, %v; want none", rows, err)
	}
}
