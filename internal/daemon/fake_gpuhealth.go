package daemon

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"sync"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	daemonv1 "github.com/better-compute/better-compute/gen/go/bettercompute/daemon/v1"
	"github.com/better-compute/better-compute/internal/gpuhealth"
)

// fakeGPUHealth is a FakeDaemon's GPU health: the signals injected into it, published as one
// snapshot to the feed every process's Agent sends from. It belongs to the Fake, not to a
// process, so a daemon restart keeps the signals (bcd re-reads the kernel log at start); a
// reboot clears them, as a real reboot clears Xids and pending remaps.
type fakeGPUHealth struct {
	feed GPUHealthFeed

	mu      sync.Mutex
	signals []*daemonv1.GpuSignal
}

// InjectGPUSignal makes the FakeDaemon report s, as if one of bcd's checks had seen it: a signal
// of the same GPU (gpu_uuid), check and code is bumped instead (its count grows by s's count,
// last_seen moves, first_seen stays). s names a GPU of the inventory by its UUID, or none for a
// node-wide signal; an empty pci_bus_id is filled in from the inventory. A zero count is 1, and
// unset times are now. A driver_not_answering signal also sets the snapshot's probe_error (its
// detail). The new snapshot goes to the gateway at once when a session is open, else after the
// next hello. s is not kept; it is refused when it breaks the limits the gateway enforces.
func (f *Fake) InjectGPUSignal(s *daemonv1.GpuSignal) error {
	s = proto.CloneOf(s)
	switch {
	case s.GetCheck() == "" || len(s.GetCheck()) > gpuhealth.MaxCheckBytes || strings.ToLower(s.GetCheck()) != s.GetCheck():
		return fmt.Errorf("inject GPU signal: check %q must be lower case, 1 to %d bytes", s.GetCheck(), gpuhealth.MaxCheckBytes)
	case len(s.GetDetail()) > gpuhealth.MaxDetailBytes:
		return fmt.Errorf("inject GPU signal: the detail has %d bytes, at most %d", len(s.GetDetail()), gpuhealth.MaxDetailBytes)
	case s.GetCount() < 0:
		return fmt.Errorf("inject GPU signal: negative count %d", s.GetCount())
	}
	if s.GetGpuUuid() != "" {
		i := slices.IndexFunc(f.inventory.Load().GetGpus(), func(g *daemonv1.Gpu) bool { return g.GetUuid() == s.GetGpuUuid() })
		if i < 0 {
			return fmt.Errorf("inject GPU signal: the inventory has no GPU %s", s.GetGpuUuid())
		}
		if s.PciBusId == "" {
			s.PciBusId = f.inventory.Load().GetGpus()[i].GetPciBusId()
		}
	}
	if s.Count == 0 {
		s.Count = 1
	}
	now := timestamppb.Now()
	if s.LastSeen == nil {
		s.LastSeen = now
	}
	if s.FirstSeen == nil {
		s.FirstSeen = s.LastSeen
	}
	h := &f.gpu
	h.mu.Lock()
	defer h.mu.Unlock()
	i := slices.IndexFunc(h.signals, func(o *daemonv1.GpuSignal) bool {
		return o.GetGpuUuid() == s.GetGpuUuid() && o.GetCheck() == s.GetCheck() && o.GetCode() == s.GetCode()
	})
	switch {
	case i >= 0:
		old := h.signals[i]
		old.Count += s.GetCount()
		old.LastSeen = s.GetLastSeen()
		if s.GetDetail() != "" {
			old.Detail = s.GetDetail()
		}
	case len(h.signals) >= gpuhealth.MaxSignals:
		return fmt.Errorf("inject GPU signal: the node reports %d signals already, the most a snapshot carries", gpuhealth.MaxSignals)
	default:
		h.signals = append(h.signals, s)
		slices.SortFunc(h.signals, compareSignals)
	}
	h.publishLocked()
	f.opts.Logger.Info("fake daemon: GPU signal injected", "gpu", s.GetGpuUuid(), "check", s.GetCheck(), "code", s.GetCode())
	return nil
}

// ResolveGPUSignal removes the signal of a GPU (gpuUUID, empty for a node-wide one), check and
// code, as bcd leaves out of its next snapshot a condition that has passed (a slowdown that
// ended). It reports whether there was one.
func (f *Fake) ResolveGPUSignal(gpuUUID, check string, code int64) bool {
	h := &f.gpu
	h.mu.Lock()
	defer h.mu.Unlock()
	n := len(h.signals)
	h.signals = slices.DeleteFunc(h.signals, func(o *daemonv1.GpuSignal) bool {
		return o.GetGpuUuid() == gpuUUID && o.GetCheck() == check && o.GetCode() == code
	})
	if len(h.signals) == n {
		return false
	}
	h.publishLocked()
	return true
}

// ClearGPUSignals removes every signal, as a GPU reset (or a reboot, which the FakeDaemon's
// reboot command does itself) leaves none: the gateway is sent an empty snapshot.
func (f *Fake) ClearGPUSignals() {
	h := &f.gpu
	h.mu.Lock()
	defer h.mu.Unlock()
	h.signals = nil
	h.publishLocked()
}

// GPUHealth is the snapshot the FakeDaemon sends now (a copy): empty, never nil, until a signal
// is injected.
func (f *Fake) GPUHealth() *daemonv1.GpuHealth {
	h, _ := f.gpu.feed.Current()
	if h == nil {
		return &daemonv1.GpuHealth{}
	}
	return h
}

// publishLocked publishes the signals as the current snapshot; h.mu is held.
func (h *fakeGPUHealth) publishLocked() {
	snap := &daemonv1.GpuHealth{Time: timestamppb.Now()}
	for _, s := range h.signals {
		snap.Signals = append(snap.Signals, proto.CloneOf(s))
		if s.GetCheck() == gpuhealth.CheckDriverNotAnswering && snap.ProbeError == "" {
			snap.ProbeError = cmp.Or(s.GetDetail(), "nvidia-smi: no answer from the driver (a FakeDaemon's injected fault)")
		}
	}
	h.feed.Publish(snap)
}

// compareSignals orders a snapshot's signals: node-wide first, then by GPU, check and code.
func compareSignals(a, b *daemonv1.GpuSignal) int {
	return cmp.Or(strings.Compare(a.GetGpuUuid(), b.GetGpuUuid()), strings.Compare(a.GetCheck(), b.GetCheck()), cmp.Compare(a.GetCode(), b.GetCode()))
}
