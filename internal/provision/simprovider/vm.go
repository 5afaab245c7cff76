package simprovider

import (
	"context"
	"log/slog"
	"maps"
	"sync"
	"time"

	"github.com/better-compute/better-compute/internal/daemon"
	"github.com/better-compute/better-compute/internal/provision"
)

// vm is one simulated machine: its boot (a wait, then a join with the token it was created
// with, once) and its FakeDaemon, which keeps its identity across power cycles as a disk would.
type vm struct {
	id, name  string
	tags      map[string]string
	join      provision.Join
	bootDelay time.Duration
	log       *slog.Logger

	mu    sync.Mutex
	state provision.ProviderState
	fake  *daemon.Fake
	stop  context.CancelFunc // nil while powered off
	done  chan struct{}
}

func (v *vm) machine() provision.Machine {
	v.mu.Lock()
	defer v.mu.Unlock()
	return provision.Machine{ProviderID: v.id, Tags: maps.Clone(v.tags), State: v.state, Addresses: []string{"127.0.0.1"}}
}

func (v *vm) setState(s provision.ProviderState) {
	v.mu.Lock()
	v.state = s
	v.mu.Unlock()
}

// powerOn boots the machine unless it runs or is gone: after the boot delay it joins (the first
// time) and runs its daemon until halted.
func (v *vm) powerOn() {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.stop != nil || v.state == provision.ProviderGone {
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	v.stop, v.done, v.state = cancel, done, provision.ProviderPending
	go func() {
		defer close(done)
		v.run(ctx)
	}()
}

// halt powers the machine off and waits for its daemon to stop.
func (v *vm) halt() {
	v.mu.Lock()
	stop, done := v.stop, v.done
	v.stop, v.done = nil, nil
	v.mu.Unlock()
	if stop == nil {
		return
	}
	stop()
	<-done
}

func (v *vm) run(ctx context.Context) {
	select {
	case <-ctx.Done():
		return
	case <-time.After(v.bootDelay):
	}
	v.setState(provision.ProviderRunning)
	v.mu.Lock()
	fake := v.fake
	v.mu.Unlock()
	for wait := time.Second; fake == nil; wait = min(2*wait, 30*time.Second) {
		f, err := daemon.JoinFake(ctx, v.join.RootCA, v.join.Token, v.name, daemon.FakeOptions{
			Dialer: daemon.Dialer{Gateway: v.join.Gateway}, Logger: v.log,
		})
		if err == nil {
			fake = f
			v.mu.Lock()
			v.fake = f
			v.mu.Unlock()
			break
		}
		v.log.Warn("sim machine: join failed; retrying", "machine", v.id, "err", err)
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
	}
	if err := fake.Run(ctx); err != nil && ctx.Err() == nil {
		v.log.Warn("sim machine: daemon stopped", "machine", v.id, "err", err)
	}
}
