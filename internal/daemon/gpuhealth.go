package daemon

import (
	"context"
	"sync"

	"google.golang.org/protobuf/proto"

	daemonv1 "github.com/better-compute/better-compute/gen/go/bettercompute/daemon/v1"
)

// GPUHealthFeed carries a node's GPU health snapshots from whoever reads them (bcd's checks, a
// FakeDaemon's injected faults) to the agent, which sends the latest after each hello and again
// whenever it changes. Only the latest snapshot matters: one published while the agent is busy
// or between sessions replaces the one before it, and a snapshot equal to the current one is no
// change. The zero value is ready; it is safe for concurrent use.
type GPUHealthFeed struct {
	mu      sync.Mutex
	current *daemonv1.GpuHealth
	version uint64
	changed chan struct{} // closed and replaced at each change
}

// Publish makes h the current snapshot and reports whether it changed anything. h is cloned; its
// time is not compared (a snapshot re-read a minute later is no change).
func (f *GPUHealthFeed) Publish(h *daemonv1.GpuHealth) bool {
	h = proto.CloneOf(h)
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.current != nil && sameHealth(f.current, h) {
		return false
	}
	f.current = h
	f.version++
	if f.changed != nil {
		close(f.changed)
		f.changed = nil
	}
	return true
}

// Current returns the current snapshot (a clone) and its version; nil and 0 before the first.
func (f *GPUHealthFeed) Current() (*daemonv1.GpuHealth, uint64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.current == nil {
		return nil, 0
	}
	return proto.CloneOf(f.current), f.version
}

// Wait blocks until the snapshot's version is past after, or ctx ends; it returns the snapshot.
func (f *GPUHealthFeed) Wait(ctx context.Context, after uint64) (*daemonv1.GpuHealth, uint64, error) {
	for {
		f.mu.Lock()
		if f.version > after {
			h, v := proto.CloneOf(f.current), f.version
			f.mu.Unlock()
			return h, v, nil
		}
		if f.changed == nil {
			f.changed = make(chan struct{})
		}
		ch := f.changed
		f.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return nil, after, ctx.Err()
		}
	}
}

// sameHealth compares snapshots without their times.
func sameHealth(a, b *daemonv1.GpuHealth) bool {
	if a.GetProbeError() != b.GetProbeError() || len(a.GetSignals()) != len(b.GetSignals()) {
		return false
	}
	for i, s := range a.GetSignals() {
		if !proto.Equal(s, b.GetSignals()[i]) {
			return false
		}
	}
	return true
}

// sendGPUHealth sends the feed's snapshot once the session is open, and every change after it,
// until ctx (the session's) ends. A snapshot that was current at the previous session is sent
// again: the gateway may not have stored it, and a repeat changes nothing there.
func (a *Agent) sendGPUHealth(ctx context.Context, send func(*daemonv1.SessionRequest)) {
	feed := a.opts.GPUHealth
	if feed == nil {
		return
	}
	h, v := feed.Current()
	for {
		if h != nil {
			send(&daemonv1.SessionRequest{Msg: &daemonv1.SessionRequest_GpuHealth{GpuHealth: h}})
		}
		var err error
		if h, v, err = feed.Wait(ctx, v); err != nil {
			return
		}
	}
}
