package daemon

import (
	"context"
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"slices"
	"sync"
	"time"

	daemonv1 "github.com/better-compute/better-compute/gen/go/bettercompute/daemon/v1"
)

// LoadProfile is how busy a FakeDaemon's GPU is (SetLoad): what its usage samples read, and so
// what the minutes it sends say.
type LoadProfile string

// The load profiles of a FakeDaemon's GPUs.
const (
	// LoadIdle is a GPU held and not used: 0–2% utilisation, a few hundred MiB of memory (a
	// context), about 70 W.
	LoadIdle LoadProfile = "idle"
	// LoadBusy is a GPU under a training job: 85–100% utilisation, 80–95% of its memory, most of
	// its power limit.
	LoadBusy LoadProfile = "busy"
	// LoadBursty alternates by wall-clock minute: busy in even minutes, idle (memory still held)
	// in odd ones.
	LoadBursty LoadProfile = "bursty"
)

// LoadProfiles are the profiles, in the order a random pick weighs them (RandomLoad).
var LoadProfiles = []LoadProfile{LoadBusy, LoadIdle, LoadBursty}

// ParseLoadProfile reads a profile's name (idle, busy, bursty).
func ParseLoadProfile(s string) (LoadProfile, error) {
	if p := LoadProfile(s); slices.Contains(LoadProfiles, p) {
		return p, nil
	}
	return "", fmt.Errorf("load profile %q: want idle, busy or bursty", s)
}

// RandomLoad picks a profile from r as a fleet's GPUs are: mostly busy (70%), some idle (20%),
// some bursty (10%).
func RandomLoad(r *rand.Rand) LoadProfile {
	switch x := r.IntN(10); {
	case x < 7:
		return LoadBusy
	case x < 9:
		return LoadIdle
	}
	return LoadBursty
}

// DefaultFakeUsageInterval is how often a FakeDaemon samples its GPUs' usage, as bcd's default.
const DefaultFakeUsageInterval = 5 * time.Second

// fakeGPUUsage is a FakeDaemon's GPU usage: each GPU's load profile, the samples drawn from them
// (from a source seeded with FakeOptions.Seed and the hostname, so a run replays) and the minutes
// they make, queued on the feed every process's Agent sends from.
type fakeGPUUsage struct {
	feed GPUUsageFeed

	mu    sync.Mutex
	loads map[string]LoadProfile // by GPU UUID; LoadIdle when absent
	agg   GPUUsageAggregator
	r     *rand.Rand
}

func newFakeGPUUsage(opts FakeOptions, hostname string) *fakeGPUUsage {
	h := fnv.New64a()
	_, _ = h.Write([]byte("usage:" + hostname))
	return &fakeGPUUsage{
		loads: map[string]LoadProfile{}, agg: GPUUsageAggregator{Interval: opts.usageInterval()},
		r: rand.New(rand.NewPCG(opts.Seed, h.Sum64())),
	}
}

func (o FakeOptions) usageInterval() time.Duration {
	if o.UsageInterval <= 0 {
		return DefaultFakeUsageInterval
	}
	return o.UsageInterval
}

// SetLoad makes the GPU of the inventory with UUID uuid run under profile p from its next
// sample on. It fails for a GPU the inventory does not have or a profile that is not one.
func (f *Fake) SetLoad(uuid string, p LoadProfile) error {
	if _, err := ParseLoadProfile(string(p)); err != nil {
		return fmt.Errorf("set load: %w", err)
	}
	if !slices.ContainsFunc(f.inventory.Load().GetGpus(), func(g *daemonv1.Gpu) bool { return g.GetUuid() == uuid }) {
		return fmt.Errorf("set load: the inventory has no GPU %s", uuid)
	}
	u := f.usage
	u.mu.Lock()
	defer u.mu.Unlock()
	u.loads[uuid] = p
	f.opts.Logger.Info("fake daemon: GPU load set", "gpu", uuid, "profile", p)
	return nil
}

// Load is the profile of the GPU with UUID uuid: LoadIdle until SetLoad says otherwise.
func (f *Fake) Load(uuid string) LoadProfile {
	u := f.usage
	u.mu.Lock()
	defer u.mu.Unlock()
	if p, ok := u.loads[uuid]; ok {
		return p
	}
	return LoadIdle
}

// SampleUsage samples every GPU of the inventory once, at the Fake's clock (FakeOptions.Now),
// as bcd's sampler does every interval: a minute that has ended is queued to be sent. Run calls
// it every FakeOptions.UsageInterval; tests call it to step the clock themselves.
func (f *Fake) SampleUsage() {
	u := f.usage
	u.mu.Lock()
	defer u.mu.Unlock()
	now := f.now()
	if ended := u.agg.Add(now, u.sampleLocked(f.inventory.Load().GetGpus(), now)); ended != nil {
		u.feed.Publish(ended)
	}
}

// FlushUsage samples once more and ends the minute under way now, as if it were over: its
// GpuUsage is queued to be sent (at once when a session is open) and returned. Nil for a node
// without GPUs. It lets a test or a demo see a minute without waiting for one.
func (f *Fake) FlushUsage() *daemonv1.GpuUsage {
	u := f.usage
	u.mu.Lock()
	defer u.mu.Unlock()
	now := f.now()
	if ended := u.agg.Add(now, u.sampleLocked(f.inventory.Load().GetGpus(), now)); ended != nil {
		u.feed.Publish(ended)
	}
	m := u.agg.Flush()
	if m == nil || len(m.GetGpus()) == 0 {
		return nil
	}
	u.feed.Publish(m)
	return m
}

// PendingUsage is a copy of the minutes queued and not yet sent, oldest first.
func (f *Fake) PendingUsage() []*daemonv1.GpuUsage { return f.usage.feed.Pending() }

// sampleUsage samples every UsageInterval until ctx ends.
func (f *Fake) sampleUsage(ctx context.Context) {
	t := time.NewTicker(f.opts.usageInterval())
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			f.SampleUsage()
		}
	}
}

func (f *Fake) now() time.Time {
	if f.opts.Now != nil {
		return f.opts.Now()
	}
	return time.Now()
}

// sampleLocked draws one sample of each GPU from its profile at now; u.mu is held.
func (u *fakeGPUUsage) sampleLocked(gpus []*daemonv1.Gpu, now time.Time) []GPUSample {
	out := make([]GPUSample, 0, len(gpus))
	for _, g := range gpus {
		if g.GetUuid() == "" {
			continue
		}
		totalMiB := float64(g.GetMemoryBytes()) / (1 << 20)
		if totalMiB <= 0 {
			totalMiB = 81559 // an H100 80GB
		}
		limit := g.GetPowerLimitWatts()
		if limit <= 0 {
			limit = 700
		}
		p := u.loads[g.GetUuid()]
		if p == "" {
			p = LoadIdle
		}
		busy := p == LoadBusy || (p == LoadBursty && now.UTC().Unix()/60%2 == 0)
		s := GPUSample{Index: g.GetIndex(), UUID: g.GetUuid(), Name: g.GetModel(), MemoryTotalMiB: totalMiB}
		if busy {
			s.UtilPercent = 85 + 15*u.r.Float64()
			s.MemoryUsedMiB = totalMiB * (0.80 + 0.15*u.r.Float64())
			s.PowerWatts = limit * (0.75 + 0.25*s.UtilPercent/100*u.r.Float64())
			s.TemperatureC = 55 + 20*u.r.Float64()
		} else {
			s.UtilPercent = 2 * u.r.Float64()
			s.MemoryUsedMiB = 4
			if p == LoadBursty {
				s.MemoryUsedMiB = totalMiB * 0.80 // the job keeps its memory between bursts
			}
			s.PowerWatts = 65 + 10*u.r.Float64()
			s.TemperatureC = 28 + 6*u.r.Float64()
		}
		s.UtilPercent = float64(int(s.UtilPercent)) // nvidia-smi prints whole percents
		s.MemoryUsedMiB = float64(int(s.MemoryUsedMiB))
		s.TemperatureC = float64(int(s.TemperatureC))
		out = append(out, s)
	}
	return out
}
