package leases

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/google/uuid"
)

// TestPokesCoalesce: pokes asked while a pool is being poked return at once and make exactly one
// more poke, which starts after they were asked; another pool is poked on its own.
func TestPokesCoalesce(t *testing.T) {
	t.Parallel()
	var p pokes
	pool, other := uuid.New(), uuid.New()
	started, release := make(chan struct{}), make(chan struct{})
	var calls, otherCalls atomic.Int32
	poke := func(_ context.Context, id uuid.UUID) {
		if id == other {
			otherCalls.Add(1)
			return
		}
		if calls.Add(1) == 1 {
			close(started)
			<-release
		}
	}
	first := make(chan struct{})
	go func() {
		p.run(t.Context(), pool, poke)
		close(first)
	}()
	<-started
	var wg sync.WaitGroup
	for range 10 {
		wg.Go(func() { p.run(t.Context(), pool, poke) })
	}
	wg.Wait()
	p.run(t.Context(), other, poke)
	if n := calls.Load(); n != 1 {
		t.Fatalf("%d pokes while the first was running, want 1", n)
	}
	close(release)
	<-first
	if n, o := calls.Load(), otherCalls.Load(); n != 2 || o != 1 {
		t.Fatalf("%d pokes of the pool and %d of the other, want 2 and 1", n, o)
	}
	p.run(t.Context(), pool, poke)
	if n := calls.Load(); n != 3 {
		t.Fatalf("%d pokes after an idle run, want 3", n)
	}
}
