package host_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	daemonv1 "github.com/better-compute/better-compute/gen/go/bettercompute/daemon/v1"
	"github.com/better-compute/better-compute/internal/daemon"
	"github.com/better-compute/better-compute/internal/daemon/host"
	"github.com/better-compute/better-compute/internal/gpuhealth"
)

// fakeClock is a clock the test moves.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) Set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = t
}

// probeResult is one answer of a fake probe.
type probeResult struct {
	report host.GPUReport
	err    error
}

// signalLines writes a snapshot's signals one a line, times as seconds after t0, to compare.
func signalLines(h *daemonv1.GpuHealth, t0 time.Time) []string {
	var out []string
	for _, s := range h.GetSignals() {
		out = append(out, fmt.Sprintf("%s %s %s code=%d count=%d first=%v last=%v %q", s.GetGpuUuid(), s.GetPciBusId(), s.GetCheck(),
			s.GetCode(), s.GetCount(), s.GetFirstSeen().AsTime().Sub(t0).Seconds(), s.GetLastSeen().AsTime().Sub(t0).Seconds(), s.GetDetail()))
	}
	return out
}

// h100Report is the report of testdata/nvidia-smi-xml/h100-driver550-health-2gpu.xml, changed by
// edit.
func h100Report(t *testing.T, edit func(*host.GPUReport)) host.GPUReport {
	t.Helper()
	r, err := host.ParseNvidiaSMI(readTestdata(t, filepath.Join("nvidia-smi-xml", "h100-driver550-health-2gpu.xml")))
	if err != nil {
		t.Fatal(err)
	}
	if edit != nil {
		edit(&r)
	}
	return r
}

// TestGPUHealthCollector follows a node through probes: signals first seen, counts that grow
// (last seen moves) or not (it does not), the PCIe replay counter's growth, a wedged driver
// (driver_not_answering, the signals read before kept, a second timeout no change), a GPU gone
// missing, and an Xid mapped to its GPU by PCI bus id.
func TestGPUHealthCollector(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2025, 3, 1, 8, 0, 0, 0, time.UTC)
	timeout := func(d string) error {
		return fmt.Errorf("/usr/bin/nvidia-smi -q -x: no answer in %s (a wedged driver?): %w", d, context.DeadlineExceeded)
	}
	const (
		pci0, pci1 = "00000000:18:00.0", "00000000:2A:00.0"
		u0, u1     = h100UUID0, h100UUID1
	)
	gpu0 := []string{
		u0 + " " + pci0 + " ecc_dbe code=0 count=2 first=0 last=0 \"ecc_errors/aggregate: dram_uncorrectable 2\"",
		u0 + " " + pci0 + " ecc_sbe code=0 count=15 first=0 last=0 \"ecc_errors/aggregate: dram_correctable 14, sram_correctable 1\"",
		u0 + " " + pci0 + " pcie_link_degraded code=0 count=1 first=0 last=0 \"pci_gpu_link_info/link_widths: current 8x, max 16x\"",
		u0 + " " + pci0 + " row_remap_pending code=0 count=1 first=0 last=0 \"remapped_rows/remapped_row_pending: Yes\"",
		u0 + " " + pci0 + " thermal_slowdown code=0 count=1 first=0 last=0 \"clocks_event_reasons: hw_thermal_slowdown Active\"",
	}
	gpu1 := []string{
		u1 + " " + pci1 + " power_slowdown code=0 count=1 first=0 last=0 \"clocks_event_reasons: hw_power_brake_slowdown Active\"",
		u1 + " " + pci1 + " row_remap_failure code=0 count=1 first=0 last=0 \"remapped_rows/remapped_row_failure: Yes\"",
	}
	// After the second probe: one more DBE and 8 replays on GPU 0, at 60 s.
	gpu0Grown := []string{
		u0 + " " + pci0 + " ecc_dbe code=0 count=3 first=0 last=60 \"ecc_errors/aggregate: dram_uncorrectable 3\"",
		gpu0[1], gpu0[2],
		u0 + " " + pci0 + " pcie_replays code=0 count=8 first=60 last=60 \"pci/replay_counter: 8 more since bcd started\"",
		gpu0[3], gpu0[4],
	}
	grown := func(r *host.GPUReport) {
		r.Health[0].PCIeReplays = 20
		r.Health[0].Signals[0].Count, r.Health[0].Signals[0].Detail = 3, "ecc_errors/aggregate: dram_uncorrectable 3"
	}
	driver := func(first, last int, detail string) string {
		return fmt.Sprintf("  driver_not_answering code=0 count=1 first=%d last=%d %q", first, last, detail)
	}
	xid := u0 + " 0000:18:00 xid code=79 count=1 first=250 last=250 \"NVRM: Xid (PCI:0000:18:00): 79, GPU has fallen off the bus.\""
	steps := []struct {
		at        int // seconds after t0
		probe     probeResult
		xid       bool // an Xid event for GPU 0 before the step; no probe then
		want      []string
		probeErr  string
		unchanged bool // the feed saw no change
	}{
		{at: 0, probe: probeResult{report: h100Report(t, nil)}, want: append(append([]string{}, gpu0...), gpu1...)},
		{at: 30, probe: probeResult{report: h100Report(t, nil)}, want: append(append([]string{}, gpu0...), gpu1...), unchanged: true},
		{at: 60, probe: probeResult{report: h100Report(t, grown)}, want: append(append([]string{}, gpu0Grown...), gpu1...)},
		{
			at: 90, probe: probeResult{err: timeout("10.002s")},
			want:     append(append([]string{driver(90, 90, timeout("10.002s").Error())}, gpu0Grown...), gpu1...),
			probeErr: timeout("10.002s").Error(),
		},
		{
			at: 120, probe: probeResult{err: timeout("10.013s")},
			want:     append(append([]string{driver(90, 90, timeout("10.002s").Error())}, gpu0Grown...), gpu1...),
			probeErr: timeout("10.002s").Error(), unchanged: true,
		},
		{
			at: 150, probe: probeResult{err: errors.New("nvidia-smi: exit status 9: NVIDIA-SMI has failed")},
			want:     append(append([]string{driver(90, 150, "nvidia-smi: exit status 9: NVIDIA-SMI has failed")}, gpu0Grown...), gpu1...),
			probeErr: "nvidia-smi: exit status 9: NVIDIA-SMI has failed",
		},
		{
			// GPU 0 fell off the bus: the probe lists GPU 1 only.
			at: 200, probe: probeResult{report: h100Report(t, func(r *host.GPUReport) {
				r.GPUs, r.Health = r.GPUs[1:], r.Health[1:]
			})},
			want: append([]string{u0 + " " + pci0 + " gpu_missing code=0 count=1 first=200 last=200 \"not listed by nvidia-smi -q -x\""}, gpu1...),
		},
		{
			at: 250, xid: true,
			want: append([]string{u0 + " " + pci0 + " gpu_missing code=0 count=1 first=200 last=200 \"not listed by nvidia-smi -q -x\"", xid}, gpu1...),
		},
		{
			// It is back (after a reset): no longer missing; its replay counter restarted at 2.
			at: 300, probe: probeResult{report: h100Report(t, func(r *host.GPUReport) { r.Health[0].PCIeReplays = 2 })},
			want: append([]string{
				gpu0[0], gpu0[1], gpu0[2],
				u0 + " " + pci0 + " pcie_replays code=0 count=10 first=60 last=300 \"pci/replay_counter: 10 more since bcd started\"",
				gpu0[3], gpu0[4], xid,
			}, gpu1...),
		},
	}
	// GPU 0's signals come back first seen at 300.
	for i, line := range steps[len(steps)-1].want {
		if strings.HasPrefix(line, u0) && !strings.Contains(line, "pcie_replays") && !strings.Contains(line, " xid ") {
			steps[len(steps)-1].want[i] = strings.Replace(line, "first=0 last=0", "first=300 last=300", 1)
		}
	}

	clock := &fakeClock{now: t0}
	var next probeResult
	feed := &daemon.GPUHealthFeed{}
	c := &host.GPUHealthCollector{
		Feed: feed, Now: clock.Now, Xids: &host.XidLog{Now: clock.Now},
		Probe: func(context.Context) (host.GPUReport, error) { return next.report, next.err },
	}
	for _, step := range steps {
		clock.Set(t0.Add(time.Duration(step.at) * time.Second))
		_, before := feed.Current()
		var h *daemonv1.GpuHealth
		if step.xid {
			c.Xids.Record(host.XidEvent{PCI: "0000:18:00", Xid: 79, Message: "NVRM: Xid (PCI:0000:18:00): 79, GPU has fallen off the bus."}, clock.Now())
			h = c.Publish()
		} else {
			next = step.probe
			h = c.Update(t.Context())
		}
		got := signalLines(h, t0)
		if strings.Join(got, "\n") != strings.Join(step.want, "\n") {
			t.Errorf("at %ds: signals\n%s\nwant\n%s", step.at, strings.Join(got, "\n"), strings.Join(step.want, "\n"))
		}
		if h.GetProbeError() != step.probeErr {
			t.Errorf("at %ds: probe error %q; want %q", step.at, h.GetProbeError(), step.probeErr)
		}
		if !h.GetTime().AsTime().Equal(clock.Now()) {
			t.Errorf("at %ds: time %v", step.at, h.GetTime().AsTime())
		}
		if _, after := feed.Current(); (after == before) != step.unchanged {
			t.Errorf("at %ds: feed version %d -> %d; want a change: %v", step.at, before, after, !step.unchanged)
		}
	}
}

// TestGPUHealthCollectorEmpty: no GPUs and no nvidia-smi is an empty snapshot, not an error; a
// probe cut short by its context publishes nothing.
func TestGPUHealthCollectorEmpty(t *testing.T) {
	t.Parallel()
	feed := &daemon.GPUHealthFeed{}
	c := &host.GPUHealthCollector{Feed: feed, Probe: (&host.Inventory{NvidiaSMI: "-"}).GPUs}
	h := c.Update(t.Context())
	if len(h.GetSignals()) != 0 || h.GetProbeError() != "" {
		t.Errorf("snapshot %v", h)
	}
	if cur, v := feed.Current(); v != 1 || len(cur.GetSignals()) != 0 {
		t.Errorf("feed %v at version %d", cur, v)
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	c.Probe = func(ctx context.Context) (host.GPUReport, error) { return host.GPUReport{}, ctx.Err() }
	if h := c.Update(ctx); h != nil {
		t.Errorf("cancelled probe: %v", h)
	}
	if _, v := feed.Current(); v != 1 {
		t.Errorf("feed at version %d after a cancelled probe", v)
	}
}

// TestGPUHealthCollectorMaxSignals: a snapshot keeps at most gpuhealth.MaxSignals signals.
func TestGPUHealthCollectorMaxSignals(t *testing.T) {
	t.Parallel()
	var report host.GPUReport
	for i := range gpuhealth.MaxSignals/4 + 10 {
		report.Health = append(report.Health, host.GPUReading{
			UUID: fmt.Sprintf("GPU-%05d", i), PCIBusID: fmt.Sprintf("00000000:%02X:00.0", i%256), PCIeReplays: -1,
			Signals: []host.SignalReading{
				{Check: gpuhealth.CheckECCDoubleBit, Count: 1}, {Check: gpuhealth.CheckECCSingleBit, Count: 1},
				{Check: gpuhealth.CheckRowRemapPending, Count: 1}, {Check: gpuhealth.CheckPowerSlowdown, Count: 1},
			},
		})
		report.GPUs = append(report.GPUs, &daemonv1.Gpu{})
	}
	c := &host.GPUHealthCollector{Probe: func(context.Context) (host.GPUReport, error) { return report, nil }}
	h := c.Update(t.Context())
	if n := len(h.GetSignals()); n != gpuhealth.MaxSignals {
		t.Errorf("%d signals; want %d", n, gpuhealth.MaxSignals)
	}
	if first := h.GetSignals()[0]; first.GetGpuUuid() != "GPU-00000" || first.GetCheck() != gpuhealth.CheckECCDoubleBit {
		t.Errorf("first signal %v", first)
	}
}

// TestGPUHealthCollectorRun: Run probes at once and every interval, publishes an Xid as soon as
// it is counted, and returns when its context ends.
func TestGPUHealthCollectorRun(t *testing.T) {
	t.Parallel()
	probed := make(chan struct{}, 100)
	feed := &daemon.GPUHealthFeed{}
	c := &host.GPUHealthCollector{
		Feed: feed, Interval: time.Millisecond, Kmsg: "-", Xids: &host.XidLog{},
		Probe: func(context.Context) (host.GPUReport, error) {
			select {
			case probed <- struct{}{}:
			default:
			}
			return h100Report(t, nil), nil
		},
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() {
		defer close(done)
		c.Run(ctx)
	}()
	for range 3 {
		<-probed
	}
	_, v := feed.Current()
	c.Xids.Record(host.XidEvent{PCI: "0000:2a:00", Xid: 48, Message: "NVRM: Xid (PCI:0000:2a:00): 48, DBE"}, time.Now())
	for {
		h, nv, err := feed.Wait(ctx, v)
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(strings.Join(signalLines(h, time.Time{}), "\n"), h100UUID1+" 0000:2a:00 xid code=48 count=1") {
			break
		}
		v = nv
	}
	cancel()
	<-done
}

// TestNewGPUHealthCollector: the node's collector probes through the inventory and dates Xids
// from the kernel's boot time, read from /proc/uptime under the inventory's root.
func TestNewGPUHealthCollector(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	if err := os.MkdirAll(filepath.Join(root, "proc"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "proc", "uptime"), []byte("100.00 200.00\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	feed := &daemon.GPUHealthFeed{}
	c := host.NewGPUHealthCollector(&host.Inventory{Root: root, NvidiaSMI: "-"}, feed, 0, nil)
	if boot := c.Xids.Boot; boot.IsZero() || time.Since(boot) < 100*time.Second {
		t.Errorf("boot time %v", boot)
	}
	if h := c.Update(t.Context()); len(h.GetSignals()) != 0 {
		t.Errorf("snapshot %v", h)
	}
	if _, v := feed.Current(); v != 1 {
		t.Errorf("feed at version %d", v)
	}
}
