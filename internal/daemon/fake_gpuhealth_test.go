package daemon_test

import (
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	daemonv1 "github.com/better-compute/better-compute/gen/go/bettercompute/daemon/v1"
	"github.com/better-compute/better-compute/internal/daemon"
	"github.com/better-compute/better-compute/internal/gpuhealth"
	"github.com/better-compute/better-compute/internal/poll"
)

// TestFakeGPUSignals: a FakeDaemon reports no signals at start; an injected one names its GPU
// by the inventory's UUID and PCI bus id; the same one again is counted; a daemon restart (an
// upgrade) keeps the signals, a reboot clears them, and so does ClearGPUSignals.
func TestFakeGPUSignals(t *testing.T) {
	t.Parallel()
	e := newFakeEnv(t)
	inv := &daemonv1.Inventory{Hostname: "fake-gpus", Os: "linux", Cpus: 8, Gpus: []*daemonv1.Gpu{
		{Index: 0, Model: "NVIDIA H100 80GB HBM3", Uuid: "GPU-00000000-0000-4000-8000-000000000000", PciBusId: "00000000:18:00.0"},
		{Index: 1, Model: "NVIDIA H100 80GB HBM3", Uuid: "GPU-00000000-0000-4000-8000-000000000001", PciBusId: "00000000:2A:00.0"},
	}}
	f := e.start("fake-gpus", daemon.FakeOptions{Inventory: inv, RebootDowntime: 100 * time.Millisecond})
	if h := f.GPUHealth(); len(h.GetSignals()) != 0 || h.GetTime() == nil {
		t.Fatalf("at start: %v, want an empty snapshot", h)
	}

	gpu1 := inv.GetGpus()[1].GetUuid()
	if err := f.InjectGPUSignal(&daemonv1.GpuSignal{GpuUuid: gpu1, Check: gpuhealth.CheckXid, Code: 79}); err != nil {
		t.Fatal(err)
	}
	h := f.GPUHealth()
	if len(h.GetSignals()) != 1 {
		t.Fatalf("after an injection: %v", h)
	}
	s := h.GetSignals()[0]
	if s.GetPciBusId() != "00000000:2A:00.0" || s.GetCount() != 1 || s.GetFirstSeen() == nil || !proto.Equal(s.GetFirstSeen(), s.GetLastSeen()) {
		t.Fatalf("signal %v", s)
	}
	if err := f.InjectGPUSignal(&daemonv1.GpuSignal{GpuUuid: gpu1, Check: gpuhealth.CheckXid, Code: 79, Count: 2}); err != nil {
		t.Fatal(err)
	}
	if err := f.InjectGPUSignal(&daemonv1.GpuSignal{GpuUuid: gpu1, Check: gpuhealth.CheckRowRemapPending}); err != nil {
		t.Fatal(err)
	}
	h = f.GPUHealth()
	if len(h.GetSignals()) != 2 {
		t.Fatalf("two signals expected: %v", h)
	}
	bumped := h.GetSignals()[1] // row_remap_pending sorts before xid
	if bumped.GetCheck() != gpuhealth.CheckXid || bumped.GetCount() != 3 || !proto.Equal(bumped.GetFirstSeen(), s.GetFirstSeen()) ||
		bumped.GetLastSeen().AsTime().Before(s.GetLastSeen().AsTime()) {
		t.Errorf("bumped signal %v, first %v", bumped, s)
	}

	for name, bad := range map[string]*daemonv1.GpuSignal{
		"unknown GPU": {GpuUuid: "GPU-nope", Check: gpuhealth.CheckXid, Code: 79},
		"no check":    {GpuUuid: gpu1},
		"upper case":  {GpuUuid: gpu1, Check: "XID"},
		"negative":    {GpuUuid: gpu1, Check: gpuhealth.CheckXid, Count: -1},
	} {
		if err := f.InjectGPUSignal(bad); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}

	// A daemon restart keeps them, as bcd reads the kernel log again.
	if r := e.run(f, "upgrade", `{"version": "v2.0.0"}`); r.State != "succeeded" {
		t.Fatalf("upgrade: %+v", r)
	}
	if n := len(f.GPUHealth().GetSignals()); n != 2 || f.Status().Sessions != 2 {
		t.Errorf("after a restart: %d signals, %d sessions", n, f.Status().Sessions)
	}

	// A reboot clears them.
	if r := e.run(f, "reboot", `{}`); r.State != "succeeded" {
		t.Fatalf("reboot: %+v", r)
	}
	poll.Until(t, 10*time.Second, "the rebooted daemon is back with no signals", func() bool {
		return f.Status().Sessions == 3 && f.Status().Connected && len(f.GPUHealth().GetSignals()) == 0
	})

	// A node-wide signal: the driver does not answer.
	if err := f.InjectGPUSignal(&daemonv1.GpuSignal{Check: gpuhealth.CheckDriverNotAnswering, Detail: "nvidia-smi timed out"}); err != nil {
		t.Fatal(err)
	}
	if h := f.GPUHealth(); h.GetProbeError() != "nvidia-smi timed out" || len(h.GetSignals()) != 1 {
		t.Errorf("driver not answering: %v", h)
	}
	if !f.ResolveGPUSignal("", gpuhealth.CheckDriverNotAnswering, 0) || f.ResolveGPUSignal("", gpuhealth.CheckDriverNotAnswering, 0) {
		t.Error("ResolveGPUSignal removes a signal once")
	}
	if err := f.InjectGPUSignal(&daemonv1.GpuSignal{GpuUuid: gpu1, Check: gpuhealth.CheckThermalSlowdown, Code: 92}); err != nil {
		t.Fatal(err)
	}
	f.ClearGPUSignals()
	if h := f.GPUHealth(); len(h.GetSignals()) != 0 || h.GetProbeError() != "" {
		t.Errorf("after ClearGPUSignals: %v", h)
	}
}
