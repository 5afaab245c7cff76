package daemon_test

import (
	"context"
	"fmt"
	"math"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	daemonv1 "github.com/better-compute/better-compute/gen/go/bettercompute/daemon/v1"
	"github.com/better-compute/better-compute/internal/daemon"
	"github.com/better-compute/better-compute/internal/poll"
)

func usageMinute(m int) *daemonv1.GpuUsage {
	return &daemonv1.GpuUsage{Minute: timestamppb.New(time.Date(2026, 1, 1, 0, m, 0, 0, time.UTC))}
}

// TestGPUUsageFeedBounded: without a taker the feed keeps the last MaxGPUUsageBacklog minutes,
// dropping the oldest and counting them; Take hands them out oldest first, and waits for the next.
func TestGPUUsageFeedBounded(t *testing.T) {
	t.Parallel()
	var f daemon.GPUUsageFeed
	for m := range daemon.MaxGPUUsageBacklog + 3 {
		if dropped := f.Publish(usageMinute(m)); dropped != (m >= daemon.MaxGPUUsageBacklog) {
			t.Errorf("minute %d: dropped %v", m, dropped)
		}
	}
	if f.Dropped() != 3 || len(f.Pending()) != daemon.MaxGPUUsageBacklog {
		t.Fatalf("dropped %d, pending %d", f.Dropped(), len(f.Pending()))
	}
	for want := 3; want < daemon.MaxGPUUsageBacklog+3; want++ {
		u, err := f.Take(t.Context())
		if err != nil || u.GetMinute().AsTime().Minute() != want {
			t.Fatalf("take: %v, %v; want minute %d", u, err, want)
		}
	}
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Millisecond)
	defer cancel()
	if _, err := f.Take(ctx); err == nil {
		t.Error("take from an empty feed returned")
	}
	got := make(chan *daemonv1.GpuUsage)
	go func() {
		u, _ := f.Take(t.Context())
		got <- u
	}()
	time.Sleep(10 * time.Millisecond)
	f.Publish(usageMinute(42))
	if u := <-got; u.GetMinute().AsTime().Minute() != 42 {
		t.Errorf("a waiting take got %v", u)
	}
}

// TestGPUUsageAggregator: a known series gives exact min, mean, max and active seconds; NaN
// metrics are left out; a minute ends only at a sample of a later one; active seconds are capped
// at the minute.
func TestGPUUsageAggregator(t *testing.T) {
	t.Parallel()
	a := daemon.GPUUsageAggregator{Interval: 10 * time.Second}
	t0 := time.Date(2026, 3, 1, 12, 30, 0, 0, time.UTC)
	utils := []float64{4, 5, 100, math.NaN(), 20, 0}
	for i, u := range utils {
		if ended := a.Add(t0.Add(time.Duration(i)*10*time.Second), []daemon.GPUSample{
			{Index: 3, UUID: "GPU-c", UtilPercent: u, MemoryUsedMiB: 1, MemoryTotalMiB: 2, PowerWatts: math.NaN(), TemperatureC: float64(i)},
			{Index: 1, UUID: "GPU-a", UtilPercent: 50, MemoryUsedMiB: math.NaN(), MemoryTotalMiB: math.NaN(), PowerWatts: 100, TemperatureC: math.NaN()},
		}); ended != nil {
			t.Fatalf("sample %d ended a minute: %v", i, ended)
		}
	}
	u := a.Add(t0.Add(time.Minute), nil)
	if u == nil || !u.GetMinute().AsTime().Equal(t0) || u.GetInterval().AsDuration() != 10*time.Second || len(u.GetGpus()) != 2 {
		t.Fatalf("minute %v", u)
	}
	first, c := u.GetGpus()[0], u.GetGpus()[1]
	if first.GetUuid() != "GPU-a" || first.GetActiveSeconds() != 60 || first.GetUtilMean() != 50 ||
		first.MemoryUsedMaxBytes != nil || first.MemoryTotalBytes != nil || first.TemperatureMaxC != nil || first.GetPowerMeanWatts() != 100 {
		t.Errorf("GPU-a %v", first)
	}
	want := &daemonv1.GpuUsageSummary{Uuid: "GPU-c", Index: 3, Samples: 6,
		UtilMin: proto.Float32(0), UtilMean: proto.Float32(float32(129.0 / 5)), UtilMax: proto.Float32(100),
		ActiveSeconds: proto.Int32(30), MemoryUsedMaxBytes: proto.Uint64(1 << 20), MemoryTotalBytes: proto.Uint64(2 << 20),
		TemperatureMaxC: proto.Float32(5)}
	if !proto.Equal(c, want) {
		t.Errorf("GPU-c\n got %v\nwant %v", c, want)
	}
	if a.Flush() != nil || a.Add(t0.Add(2*time.Minute), nil) != nil {
		t.Error("an empty minute was summarised")
	}
}

// TestGPUUsageBytes: a full minute of 8 GPUs with every metric is within the bound docs/gpus.md
// states (and far within limits.daemonEventBytes, the gateway's bound on the message).
func TestGPUUsageBytes(t *testing.T) {
	t.Parallel()
	a := daemon.GPUUsageAggregator{Interval: 5 * time.Second}
	t0 := time.Date(2026, 3, 1, 12, 30, 0, 0, time.UTC)
	for i := range 12 {
		var s []daemon.GPUSample
		for g := range 8 {
			s = append(s, daemon.GPUSample{Index: int32(g), UUID: fmt.Sprintf("GPU-4a1c8b2e-6f0d-3e2a-9b7c-1d5e8f2a6c%02d", g),
				UtilPercent: 97.5, MemoryUsedMiB: 74213, MemoryTotalMiB: 81559, PowerWatts: 688.42, TemperatureC: 64})
		}
		a.Add(t0.Add(time.Duration(i)*5*time.Second), s)
	}
	u := a.Flush()
	req := &daemonv1.SessionRequest{Msg: &daemonv1.SessionRequest_GpuUsage{GpuUsage: u}}
	n := proto.Size(req)
	t.Logf("GpuUsage of 8 GPUs: %d bytes (%d as a SessionRequest)", proto.Size(u), n)
	if n > 1024 {
		t.Errorf("%d bytes a minute for 8 GPUs, docs/gpus.md says at most 1 KiB", n)
	}
}

// TestFakeGPUUsage: a FakeDaemon's GPUs run their profiles (busy, idle, bursty by minute),
// deterministic from the seed; FlushUsage ends the minute, whose summary reaches the gateway
// over the session (which ignores it and stays up).
func TestFakeGPUUsage(t *testing.T) {
	t.Parallel()
	e := newFakeEnv(t)
	inv := &daemonv1.Inventory{Hostname: "fake-usage", Os: "linux", Cpus: 8}
	for i := range 3 {
		inv.Gpus = append(inv.Gpus, &daemonv1.Gpu{Index: int32(i), Model: "NVIDIA H100 80GB HBM3", MemoryBytes: 80 << 30,
			Uuid: fmt.Sprintf("GPU-00000000-0000-4000-8000-00000000000%d", i), PciBusId: fmt.Sprintf("00000000:%02X:00.0", 0x18+i)})
	}
	now := time.Date(2026, 3, 1, 12, 30, 0, 0, time.UTC) // an even minute: bursty is busy
	clock := make(chan time.Time, 1)
	clock <- now
	readClock := func() time.Time { c := <-clock; clock <- c; return c }
	setClock := func(c time.Time) { <-clock; clock <- c }
	f := e.start("fake-usage", daemon.FakeOptions{Inventory: inv, Seed: 7, UsageInterval: time.Hour, Now: readClock})
	uuid := func(i int) string { return inv.GetGpus()[i].GetUuid() }
	if f.Load(uuid(0)) != daemon.LoadIdle {
		t.Errorf("default load %v", f.Load(uuid(0)))
	}
	if err := f.SetLoad(uuid(0), daemon.LoadBusy); err != nil {
		t.Fatal(err)
	}
	if err := f.SetLoad(uuid(2), daemon.LoadBursty); err != nil {
		t.Fatal(err)
	}
	if f.SetLoad("GPU-nope", daemon.LoadBusy) == nil || f.SetLoad(uuid(1), "warm") == nil {
		t.Error("a bad GPU or profile was accepted")
	}
	for i := range 11 {
		setClock(now.Add(time.Duration(i) * 5 * time.Second))
		f.SampleUsage()
	}
	setClock(now.Add(55 * time.Second))
	u := f.FlushUsage()
	if u == nil || len(u.GetGpus()) != 3 || !u.GetMinute().AsTime().Equal(now) {
		t.Fatalf("flushed %v", u)
	}
	busy, idle, bursty := u.GetGpus()[0], u.GetGpus()[1], u.GetGpus()[2]
	for name, g := range map[string]*daemonv1.GpuUsageSummary{"busy": busy, "bursty (even minute)": bursty} {
		if g.GetSamples() != 12 || g.GetUtilMin() < 85 || g.GetUtilMax() > 100 || g.GetActiveSeconds() != 60 ||
			g.GetMemoryUsedMaxBytes() < 80<<30*8/10 || g.GetMemoryTotalBytes() != 80<<30 || g.GetPowerMaxWatts() < 500 {
			t.Errorf("%s: %v", name, g)
		}
	}
	if idle.GetUtilMax() > 2 || idle.GetActiveSeconds() != 0 || idle.GetMemoryUsedMaxBytes() > 1<<30 {
		t.Errorf("idle: %v", idle)
	}
	// The next (odd) minute the bursty GPU idles, with its memory still held.
	setClock(now.Add(time.Minute))
	odd := f.FlushUsage().GetGpus()[2]
	if odd.GetUtilMax() > 2 || odd.GetMemoryUsedMaxBytes() < 60<<30 {
		t.Errorf("bursty (odd minute): %v", odd)
	}
	// Both minutes reach the gateway, which keeps the session.
	poll.Until(t, 10*time.Second, "the minutes are sent", func() bool { return len(f.PendingUsage()) == 0 })
	if st := f.Status(); !st.Connected || st.Sessions != 1 {
		t.Errorf("after sending usage: connected %v, %d sessions", st.Connected, st.Sessions)
	}
	// The same seed draws the same samples.
	g := newFakeEnv(t)
	f2 := g.start("fake-usage", daemon.FakeOptions{Inventory: inv, Seed: 7, UsageInterval: time.Hour, Now: func() time.Time { return now }})
	_ = f2.SetLoad(uuid(0), daemon.LoadBusy)
	f3 := g.start("fake-usage-3", daemon.FakeOptions{Inventory: inv, Seed: 7, UsageInterval: time.Hour, Now: func() time.Time { return now }})
	_ = f3.SetLoad(uuid(0), daemon.LoadBusy)
	a, b := f2.FlushUsage().GetGpus()[0], f3.FlushUsage().GetGpus()[0]
	if !proto.Equal(a, b) {
		t.Errorf("same seed, same inventory: %v and %v", a, b)
	}
}
