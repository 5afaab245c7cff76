package host

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	daemonv1 "github.com/better-compute/better-compute/gen/go/bettercompute/daemon/v1"
	"github.com/better-compute/better-compute/internal/daemon"
	"github.com/better-compute/better-compute/internal/gpuhealth"
	"github.com/better-compute/better-compute/internal/scrub"
)

// DefaultGPUHealthInterval is how often the collector runs nvidia-smi for health: often enough
// that a slowdown or a pending remap reaches the control plane within a minute, rarely enough
// that a probe (a few hundred milliseconds of a process) costs the node nothing worth counting.
const DefaultGPUHealthInterval = 30 * time.Second

// GPUHealthCollector reads the node's GPU health signals (docs/gpus.md, "Signals") and publishes
// them to Feed as full snapshots, sorted: every Interval from nvidia-smi (Probe, the inventory's
// bounded, single-flight probe), and at once when the kernel log (Xids) has a new event.
//
// Counts (PCIe replays, Xids) are since it started. Its methods are safe for concurrent use.
type GPUHealthCollector struct {
	Feed *daemon.GPUHealthFeed
	// Probe reads the GPUs and their health readings: Inventory.GPUs.
	Probe func(context.Context) (GPUReport, error)
	// Interval is the time between probes; DefaultGPUHealthInterval when 0.
	Interval time.Duration
	// Kmsg is the kernel log read for Xids: KmsgPath when empty, "-" for none.
	Kmsg string
	// Xids counts the Xid events; Run reads Kmsg into it. Its Boot, Now and Logger are set by
	// the caller (NewGPUHealthCollector sets them).
	Xids *XidLog
	// Now is the clock; time.Now when nil.
	Now    func() time.Time
	Logger *slog.Logger

	once  sync.Once
	mu    sync.Mutex // over state, and over publishing it so that snapshots reach Feed in order
	state healthState
}

// healthState is what the collector remembers between probes.
type healthState struct {
	// smi are the per-GPU signals of the last probe that read, by GPU and check, with times.
	smi map[signalKey]*daemonv1.GpuSignal
	// replays is each GPU's PCIe replay counter and its growth since the collector started.
	replays map[string]*replayGrowth
	// known is every GPU a probe listed, uuid → PCI bus id.
	known map[string]string
	// missing are the gpu_missing signals of GPUs known and not listed by the last probe.
	missing map[string]*daemonv1.GpuSignal
	// driver is the driver_not_answering signal while probes fail, and probeErr their reason.
	driver   *daemonv1.GpuSignal
	probeErr error
	// truncated: a snapshot was over gpuhealth.MaxSignals (logged once).
	truncated bool
}

type signalKey struct{ gpu, check string }

type replayGrowth struct {
	last, growth    int64
	first, lastGrew time.Time
}

// NewGPUHealthCollector is the collector of a node: probing through inv, reading KmsgPath with
// the kernel's boot time from /proc/uptime (under inv.Root), publishing to feed.
func NewGPUHealthCollector(inv *Inventory, feed *daemon.GPUHealthFeed, interval time.Duration, log *slog.Logger) *GPUHealthCollector {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	xids := &XidLog{Logger: log}
	if boot, err := KernelBoot(inv.path("/proc/uptime"), time.Now()); err != nil {
		log.Info("GPU health: Xid events are dated when read", "err", err)
	} else {
		xids.Boot = boot
	}
	return &GPUHealthCollector{Feed: feed, Probe: inv.GPUs, Interval: interval, Xids: xids, Logger: log}
}

func (c *GPUHealthCollector) init() {
	c.once.Do(func() {
		if c.Xids == nil {
			c.Xids = &XidLog{Logger: c.Logger}
		}
		c.state = healthState{
			smi: map[signalKey]*daemonv1.GpuSignal{}, replays: map[string]*replayGrowth{},
			known: map[string]string{}, missing: map[string]*daemonv1.GpuSignal{},
		}
	})
}

// Run collects until ctx ends: it follows the kernel log, probes at once and every Interval,
// and publishes after each probe and each new Xid. It returns once the kernel log reader has
// stopped too.
func (c *GPUHealthCollector) Run(ctx context.Context) {
	c.init()
	interval := cmp.Or(c.Interval, DefaultGPUHealthInterval)
	var reading sync.WaitGroup
	defer reading.Wait()
	if c.Kmsg != "-" {
		reading.Go(func() { c.Xids.Follow(ctx, c.Kmsg) })
	}
	changed := c.Xids.Changed()
	c.Update(ctx)
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
			c.Update(ctx)
		case <-changed:
			c.Publish()
		}
	}
}

// Update probes the GPUs once, folds what it read into the collector's state and publishes the
// snapshot, which it returns. A probe that read no GPU and failed keeps the signals read before
// and adds driver_not_answering; a probe cut short by ctx changes nothing (nil).
func (c *GPUHealthCollector) Update(ctx context.Context) *daemonv1.GpuHealth {
	c.init()
	report, err := c.Probe(ctx)
	if ctx.Err() != nil {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.now()
	if err != nil && len(report.GPUs) == 0 {
		c.probeFailed(err, now)
	} else {
		if err != nil {
			c.logger().Warn("GPU health: nvidia-smi fields not read", "err", err)
		}
		c.probeRead(report, now)
	}
	return c.publishLocked()
}

// probeFailed records a probe that read nothing: the driver is not answering.
func (c *GPUHealthCollector) probeFailed(err error, now time.Time) {
	s := &c.state
	if s.driver == nil {
		c.logger().Warn("GPU health: the driver does not answer", "err", err)
		s.driver = &daemonv1.GpuSignal{Check: gpuhealth.CheckDriverNotAnswering, Count: 1,
			FirstSeen: timestamppb.New(now), LastSeen: timestamppb.New(now)}
	}
	// A timeout after a timeout is the same failure: its text (which names how long the probe
	// took) is kept, so that the snapshot does not change at every probe of a wedged driver.
	if s.probeErr != nil && errors.Is(err, context.DeadlineExceeded) && errors.Is(s.probeErr, context.DeadlineExceeded) {
		return
	}
	if s.probeErr != nil && s.probeErr.Error() != err.Error() {
		s.driver.LastSeen = timestamppb.New(now)
	}
	s.probeErr = err
	s.driver.Detail = scrub.Truncate(scrub.String(err.Error()), gpuhealth.MaxDetailBytes)
}

// probeRead folds a probe that read into the state: the GPUs' signals, replay growth, and GPUs
// gone missing.
func (c *GPUHealthCollector) probeRead(report GPUReport, now time.Time) {
	s := &c.state
	if s.driver != nil {
		c.logger().Info("GPU health: the driver answers again")
	}
	s.driver, s.probeErr = nil, nil
	smi := map[signalKey]*daemonv1.GpuSignal{}
	listed := map[string]bool{}
	for _, r := range report.Health {
		id := cmp.Or(r.UUID, r.PCIBusID)
		if id == "" {
			continue
		}
		listed[id] = true
		if r.UUID != "" {
			s.known[r.UUID] = r.PCIBusID
		}
		for _, sr := range r.Signals {
			smi[signalKey{id, sr.Check}] = dated(s.smi[signalKey{id, sr.Check}], r, sr, now)
		}
		if sig := s.replaySignal(id, r, now); sig != nil {
			smi[signalKey{id, sig.Check}] = sig
		}
	}
	s.smi = smi
	for uuid, pci := range s.known {
		if listed[uuid] {
			delete(s.missing, uuid)
			continue
		}
		if s.missing[uuid] == nil {
			c.logger().Warn("GPU health: a GPU is missing", "gpu_uuid", uuid, "pci_bus_id", pci)
			s.missing[uuid] = &daemonv1.GpuSignal{GpuUuid: uuid, PciBusId: pci, Check: gpuhealth.CheckGPUMissing, Count: 1,
				FirstSeen: timestamppb.New(now), LastSeen: timestamppb.New(now),
				Detail: "not listed by nvidia-smi -q -x"}
		}
	}
}

// replaySignal counts the growth of a GPU's PCIe replay counter since the collector first read
// it; a counter that went down was reset (a GPU reset) and counts on from 0. The signal is there
// once the counter grew: first seen when it first grew, last seen when it last did.
func (s *healthState) replaySignal(id string, r GPUReading, now time.Time) *daemonv1.GpuSignal {
	g := s.replays[id]
	if r.PCIeReplays >= 0 {
		if g == nil {
			g = &replayGrowth{last: r.PCIeReplays}
			s.replays[id] = g
		}
		d := r.PCIeReplays - g.last
		if r.PCIeReplays < g.last {
			d = r.PCIeReplays
		}
		g.last = r.PCIeReplays
		if d > 0 {
			g.growth += d
			if g.first.IsZero() {
				g.first = now
			}
			g.lastGrew = now
		}
	}
	if g == nil || g.growth == 0 {
		return nil
	}
	return &daemonv1.GpuSignal{
		GpuUuid: r.UUID, PciBusId: r.PCIBusID, Check: gpuhealth.CheckPCIeReplays, Count: g.growth,
		FirstSeen: timestamppb.New(g.first), LastSeen: timestamppb.New(g.lastGrew),
		Detail: fmt.Sprintf("pci/replay_counter: %d more since bcd started", g.growth),
	}
}

// dated is the signal sr of GPU r with its times: first seen now, or when prev was first seen;
// last seen when it last changed (its count, code or detail).
func dated(prev *daemonv1.GpuSignal, r GPUReading, sr SignalReading, now time.Time) *daemonv1.GpuSignal {
	sig := &daemonv1.GpuSignal{
		GpuUuid: r.UUID, PciBusId: r.PCIBusID, Check: sr.Check, Code: sr.Code, Count: sr.Count,
		Detail:    scrub.Truncate(scrub.String(sr.Detail), gpuhealth.MaxDetailBytes),
		FirstSeen: timestamppb.New(now), LastSeen: timestamppb.New(now),
	}
	if prev != nil {
		sig.FirstSeen, sig.LastSeen = prev.FirstSeen, prev.LastSeen
		if prev.Count != sig.Count || prev.Code != sig.Code || prev.Detail != sig.Detail {
			sig.LastSeen = timestamppb.New(now)
		}
	}
	return sig
}

// Publish publishes the snapshot of what the collector knows now (without probing) and returns
// it.
func (c *GPUHealthCollector) Publish() *daemonv1.GpuHealth {
	c.init()
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.publishLocked()
}

func (c *GPUHealthCollector) publishLocked() *daemonv1.GpuHealth {
	h := c.snapshotLocked()
	if c.Feed != nil {
		c.Feed.Publish(h)
	}
	return h
}

// Snapshot is what the collector knows now, as one GpuHealth: driver_not_answering, missing
// GPUs, the last probe's signals and the Xids (mapped to the GPUs the probes listed), sorted by
// GPU, check and code, at most gpuhealth.MaxSignals.
func (c *GPUHealthCollector) Snapshot() *daemonv1.GpuHealth {
	c.init()
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.snapshotLocked()
}

func (c *GPUHealthCollector) snapshotLocked() *daemonv1.GpuHealth {
	s := &c.state
	now := c.now()
	h := &daemonv1.GpuHealth{Time: timestamppb.New(now)}
	if s.driver != nil {
		h.Signals = append(h.Signals, s.driver)
		h.ProbeError = scrub.Truncate(scrub.String(s.probeErr.Error()), maxProbeError)
	}
	for _, sig := range s.missing {
		h.Signals = append(h.Signals, sig)
	}
	for _, sig := range s.smi {
		h.Signals = append(h.Signals, sig)
	}
	byPCI := map[pciAddr]string{}
	for uuid, pci := range s.known {
		if a, ok := parsePCIAddr(pci); ok {
			byPCI[a] = uuid
		}
	}
	for _, x := range c.Xids.Counts() {
		a, _ := parsePCIAddr(x.PCI)
		h.Signals = append(h.Signals, &daemonv1.GpuSignal{
			GpuUuid: byPCI[a], PciBusId: x.PCI, Check: gpuhealth.CheckXid, Code: x.Xid, Count: x.Count,
			FirstSeen: timestamppb.New(x.FirstSeen), LastSeen: timestamppb.New(x.LastSeen), Detail: x.Detail,
		})
	}
	slices.SortFunc(h.Signals, func(a, b *daemonv1.GpuSignal) int {
		return cmp.Or(cmp.Compare(a.GpuUuid, b.GpuUuid), cmp.Compare(a.PciBusId, b.PciBusId),
			cmp.Compare(a.Check, b.Check), cmp.Compare(a.Code, b.Code))
	})
	if len(h.Signals) > gpuhealth.MaxSignals {
		if !s.truncated {
			s.truncated = true
			c.logger().Warn("GPU health: too many signals; the snapshot keeps the first", "signals", len(h.Signals), "max", gpuhealth.MaxSignals)
		}
		h.Signals = h.Signals[:gpuhealth.MaxSignals]
	}
	// The state's signals are not handed out to be changed.
	return proto.CloneOf(h)
}

func (c *GPUHealthCollector) now() time.Time {
	if c.Now != nil {
		return c.Now()
	}
	return time.Now()
}

func (c *GPUHealthCollector) logger() *slog.Logger {
	if c.Logger != nil {
		return c.Logger
	}
	return slog.New(slog.DiscardHandler)
}
