package locks_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/better-compute/better-compute/internal/dbtest"
	"github.com/better-compute/better-compute/internal/locks"
	"github.com/better-compute/better-compute/internal/poll"
)

func TestMain(m *testing.M) { dbtest.Main(m) }

func TestFencingRefusesStaleHolder(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	pool := dbtest.Pool(t)
	a, b := locks.NewHolder(pool, "a", nil), locks.NewHolder(pool, "b", nil)

	la, err := a.Acquire(ctx, 200*time.Millisecond, "job")
	if err != nil || len(la) != 1 {
		t.Fatalf("a acquire: %v %v", la, err)
	}
	if lb, err := b.Acquire(ctx, time.Second, "job"); err != nil || len(lb) != 0 {
		t.Fatalf("b took a held lock: %v %v", lb, err)
	}
	// a stalls past its expiry; b takes over with a newer token.
	var lb []locks.Lock
	poll.Until(t, 5*time.Second, "b takes the expired lock", func() bool {
		if lb, err = b.Acquire(ctx, time.Minute, "job"); err != nil {
			t.Fatal(err)
		}
		return len(lb) > 0
	})
	if len(lb) != 1 || lb[0].Token <= la[0].Token {
		t.Fatalf("b's lock %v, a's %v: want a newer token", lb, la)
	}
	// a wakes up and tries to write under its old token: refused.
	err = pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error { return locks.Fence(ctx, tx, la[0]) })
	if !errors.Is(err, locks.ErrStale) {
		t.Fatalf("stale fence = %v, want ErrStale", err)
	}
	if got, err := a.Renew(ctx, time.Minute, "job"); err != nil || len(got) != 0 {
		t.Fatalf("stale holder renewed: %v %v", got, err)
	}
	// b's writes pass.
	if err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error { return locks.Fence(ctx, tx, lb[0]) }); err != nil {
		t.Fatalf("current fence: %v", err)
	}
	// Released locks are free at once, and the token still grows.
	if err := b.Release(ctx, "job"); err != nil {
		t.Fatal(err)
	}
	la2, err := a.Acquire(ctx, time.Minute, "job")
	if err != nil || len(la2) != 1 || la2[0].Token <= lb[0].Token {
		t.Fatalf("after release: %v %v", la2, err)
	}
}

// TestSingletonMovesWhenHolderDies runs one job on three holders: at most one runs it at a time,
// and when the runner dies without releasing, another takes over within a TTL.
func TestSingletonMovesWhenHolderDies(t *testing.T) {
	t.Parallel()
	pool := dbtest.Pool(t)
	const ttl = 600 * time.Millisecond
	var running atomic.Int32
	var overlap atomic.Bool
	started := make(chan string, 16)
	job := func(id string) locks.Job {
		return locks.Job{Name: "test", TTL: ttl, Run: func(ctx context.Context, _ locks.Lock) error {
			if running.Add(1) > 1 {
				overlap.Store(true)
			}
			started <- id
			<-ctx.Done()
			running.Add(-1)
			return nil
		}}
	}
	holders := map[string]*locks.Holder{}
	cancels := map[string]context.CancelFunc{}
	var wg sync.WaitGroup
	for _, id := range []string{"h1", "h2", "h3"} {
		h := locks.NewHolder(pool, id, nil)
		ctx, cancel := context.WithCancel(t.Context())
		holders[id], cancels[id] = h, cancel
		wg.Go(func() { h.RunJob(ctx, job(id)) })
	}
	defer func() {
		for _, c := range cancels {
			c()
		}
		wg.Wait()
	}()
	first := <-started
	// Kill the runner: it stops without releasing.
	holders[first].Abandon()
	killed := time.Now()
	cancels[first]()
	select {
	case second := <-started:
		if second == first {
			t.Fatalf("the dead holder %s ran again", first)
		}
		// One TTL to expire, plus up to one retry period (a third of the TTL, with jitter).
		if waited := time.Since(killed); waited > ttl+ttl/2 {
			t.Errorf("took %v to move the job, want within about one TTL (%v)", waited, ttl)
		}
	case <-time.After(10 * ttl):
		t.Fatal("the job did not move to another holder")
	}
	if overlap.Load() {
		t.Error("two holders ran the job at once")
	}
}

// TestRoundTripsOutliveTheirContext: Acquire and Renew run their statement to its end even when
// their context has ended, so that the Release a stopping holder runs next is never overtaken by
// a statement still running on an abandoned connection (TestServeWorkerRoles saw a singleton's
// lock held after a clean stop). A cancelled Acquire answers what the database did; the Release
// after it leaves nothing held.
func TestRoundTripsOutliveTheirContext(t *testing.T) {
	t.Parallel()
	pool := dbtest.Pool(t)
	h := locks.NewHolder(pool, "stopping", nil)
	cancelled, cancel := context.WithCancel(t.Context())
	cancel()
	got, err := h.Acquire(cancelled, time.Minute, "job")
	if err != nil || len(got) != 1 {
		t.Fatalf("acquire with an ended context: %v %v, want the lock, as the database took it", got, err)
	}
	if got, err := h.Renew(cancelled, time.Minute, "job"); err != nil || len(got) != 1 {
		t.Fatalf("renew with an ended context: %v %v, want the lock renewed", got, err)
	}
	if err := h.Release(t.Context(), "job"); err != nil {
		t.Fatal(err)
	}
	other := locks.NewHolder(pool, "next", nil)
	if got, err := other.Acquire(t.Context(), time.Minute, "job"); err != nil || len(got) != 1 {
		t.Fatalf("after the release: %v %v, want the lock free", got, err)
	}
}
