package daemon

import (
	"context"
	"sync"

	"google.golang.org/protobuf/proto"

	daemonv1 "github.com/better-compute/better-compute/gen/go/bettercompute/daemon/v1"
)

// The bounds of GPU usage reporting (docs/gpus.md, "Utilisation sampling").
const (
	// MaxGPUUsageBacklog is how many minutes of GPU usage a node keeps while it has no session:
	// ten minutes cover a gateway restart or a short network outage, and the backlog is bounded
	// (about 1 KiB a minute for 8 GPUs) whatever the outage's length. Older minutes are dropped.
	MaxGPUUsageBacklog = 10
	// MaxGPUUsageGPUs is the most GPU summaries one GpuUsage carries; a node with more GPUs
	// reports the first by index. No node has more than 16 today.
	MaxGPUUsageGPUs = 64
	// GPUActiveUtilPercent is the utilisation at and above which a sample counts as active (a
	// GpuUsageSummary's active_seconds): above the 0–2% an idle GPU reads with a monitoring
	// process or a stray context on it, below any real workload.
	GPUActiveUtilPercent = 5
)

// GPUUsageFeed carries a node's per-minute GPU usage summaries from the sampler (bcd's, or a
// FakeDaemon's) to the agent, which sends each once, oldest first. Unlike GPUHealthFeed it is a
// queue, not a latest value: every minute matters. While nothing takes from it (no session) it
// holds at most MaxGPUUsageBacklog minutes, dropping the oldest, and counts what it dropped. The
// zero value is ready; it is safe for concurrent use.
type GPUUsageFeed struct {
	mu      sync.Mutex
	queue   []*daemonv1.GpuUsage
	dropped uint64
	ready   chan struct{} // closed and replaced when a minute is queued
}

// Publish queues u (a clone), dropping the oldest queued minute when MaxGPUUsageBacklog are
// already waiting. It reports whether one was dropped.
func (f *GPUUsageFeed) Publish(u *daemonv1.GpuUsage) (dropped bool) {
	u = proto.CloneOf(u)
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.queue) >= MaxGPUUsageBacklog {
		f.queue[0] = nil
		f.queue = f.queue[1:]
		f.dropped++
		dropped = true
	}
	f.queue = append(f.queue, u)
	if f.ready != nil {
		close(f.ready)
		f.ready = nil
	}
	return dropped
}

// Take removes and returns the oldest queued minute, waiting for one until ctx ends.
func (f *GPUUsageFeed) Take(ctx context.Context) (*daemonv1.GpuUsage, error) {
	for {
		f.mu.Lock()
		if len(f.queue) > 0 {
			u := f.queue[0]
			f.queue[0] = nil
			f.queue = f.queue[1:]
			f.mu.Unlock()
			return u, nil
		}
		if f.ready == nil {
			f.ready = make(chan struct{})
		}
		ch := f.ready
		f.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// Pending is a copy of the queued minutes, oldest first, without taking them.
func (f *GPUUsageFeed) Pending() []*daemonv1.GpuUsage {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make([]*daemonv1.GpuUsage, len(f.queue))
	for i, u := range f.queue {
		out[i] = proto.CloneOf(u)
	}
	return out
}

// Dropped is how many minutes were dropped, since the feed was made, because the backlog was
// full.
func (f *GPUUsageFeed) Dropped() uint64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.dropped
}

// sendGPUUsage sends the feed's minutes, oldest first, as they come, until ctx (the session's)
// ends. A minute taken as the session ends may be lost with it; the ones still queued wait for
// the next session.
func (a *Agent) sendGPUUsage(ctx context.Context, send func(*daemonv1.SessionRequest)) {
	feed := a.opts.GPUUsage
	if feed == nil {
		return
	}
	for {
		u, err := feed.Take(ctx)
		if err != nil {
			return
		}
		send(&daemonv1.SessionRequest{Msg: &daemonv1.SessionRequest_GpuUsage{GpuUsage: u}})
	}
}
