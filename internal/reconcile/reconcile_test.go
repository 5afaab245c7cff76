package reconcile_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/better-compute/better-compute/gen/db"
	"github.com/better-compute/better-compute/internal/dbtest"
	"github.com/better-compute/better-compute/internal/locks"
	"github.com/better-compute/better-compute/internal/poll"
	"github.com/better-compute/better-compute/internal/reconcile"
	"github.com/better-compute/better-compute/internal/shard"
)

func TestMain(m *testing.M) { dbtest.Main(m) }

// worker is one simulated process: a holder, a controllers membership and a runtime.
type worker struct {
	holder *locks.Holder
	member *shard.Member
	rt     *reconcile.Runtime
	cancel context.CancelFunc
	done   chan struct{}
}

func startWorker(t testing.TB, pool *pgxpool.Pool, id string, ttl time.Duration, regs ...reconcile.Registration) *worker {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	w := &worker{holder: locks.NewHolder(pool, id, nil), cancel: cancel, done: make(chan struct{})}
	w.member = shard.NewMember(pool, w.holder, reconcile.RoleControllers, ttl, nil)
	w.rt = reconcile.NewRuntime(pool, w.holder, nil)
	for _, r := range regs {
		w.rt.Register(r)
	}
	var wg sync.WaitGroup
	wg.Go(func() { w.member.Run(ctx) })
	wg.Go(func() { w.rt.Run(ctx, map[string]*shard.Member{reconcile.RoleControllers: w.member}) })
	go func() { wg.Wait(); close(w.done) }()
	t.Cleanup(w.stop)
	return w
}

// stop ends the worker gracefully; kill ends it as a crash would, releasing nothing.
func (w *worker) stop() { w.cancel(); <-w.done }
func (w *worker) kill() { w.holder.Abandon(); w.stop() }

// disjointCover reports whether the workers' shards are disjoint and cover all of them.
func disjointCover(ws ...*worker) bool {
	seen := map[int]bool{}
	for _, w := range ws {
		for _, s := range w.member.Owned() {
			if seen[s] {
				return false
			}
			seen[s] = true
		}
	}
	return len(seen) == shard.Count
}

func TestShardsRebalanceAndMoveWhenMemberDies(t *testing.T) {
	t.Parallel()
	pool := dbtest.Pool(t)
	const ttl = 900 * time.Millisecond
	a := startWorker(t, pool, "a", ttl)
	poll.Until(t, 5*time.Second, "a holds every shard", func() bool { return disjointCover(a) })
	b := startWorker(t, pool, "b", ttl)
	poll.Until(t, 10*time.Second, "a and b split the shards", func() bool {
		return disjointCover(a, b) && len(b.member.Owned()) > 0
	})
	if n := len(a.member.Owned()); n < 96 || n > 160 {
		t.Errorf("a holds %d of 256 shards: not a fair share", n)
	}
	// No shard is ever held twice in the database while members come and go.
	c := startWorker(t, pool, "c", ttl)
	poll.Until(t, 10*time.Second, "three members split the shards", func() bool {
		return disjointCover(a, b, c) && len(c.member.Owned()) > 0
	})
	var held int
	if err := pool.QueryRow(t.Context(), "SELECT count(*) FROM locks WHERE name LIKE 'shard:controllers:%' AND expires_at > now()").Scan(&held); err != nil || held > shard.Count {
		t.Fatalf("%d live shard leases, %v", held, err)
	}
	b.kill()
	took := poll.Until(t, 4*ttl, "the survivors take the dead member's shards", func() bool { return disjointCover(a, c) })
	t.Logf("shards moved %v after the member died (TTL %v)", took, ttl)
	if took > ttl+ttl/2 {
		t.Errorf("shards moved after %v, want within about one TTL (%v)", took, ttl)
	}
}

// tracker is a reconciler that records concurrency per key.
type tracker struct {
	kind     string
	inflight sync.Map // key -> *atomic.Int32
	overlap  atomic.Bool
	count    sync.Map // key -> *atomic.Int32
	fail     func(key string, attempt int32) error
	work     time.Duration
}

func (tr *tracker) Kind() string { return tr.kind }

func (tr *tracker) Reconcile(ctx context.Context, key string) error {
	v, _ := tr.inflight.LoadOrStore(key, new(atomic.Int32))
	n := v.(*atomic.Int32)
	if n.Add(1) > 1 {
		tr.overlap.Store(true)
	}
	defer n.Add(-1)
	c, _ := tr.count.LoadOrStore(key, new(atomic.Int32))
	attempt := c.(*atomic.Int32).Add(1)
	if tr.work > 0 {
		time.Sleep(tr.work) // simulated work, so overlapping claims would show
	}
	if tr.fail != nil {
		return tr.fail(key, attempt)
	}
	return nil
}

func (tr *tracker) times(key string) int32 {
	c, ok := tr.count.Load(key)
	if !ok {
		return 0
	}
	return c.(*atomic.Int32).Load()
}

func enqueue(t testing.TB, pool *pgxpool.Pool, kind string, keys []string) {
	t.Helper()
	for i := 0; i < len(keys); i += 1000 {
		if err := reconcile.Enqueue(context.Background(), db.New(pool), kind, keys[i:min(i+1000, len(keys))]...); err != nil {
			t.Fatal(err)
		}
	}
}

func queueDepth(t testing.TB, pool *pgxpool.Pool, kind string) int {
	t.Helper()
	var n int
	if err := pool.QueryRow(context.Background(), "SELECT count(*) FROM reconcile_queue WHERE kind = $1", kind).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

func TestNoKeyReconciledByTwoWorkersAtOnce(t *testing.T) {
	t.Parallel()
	pool := dbtest.Pool(t)
	tr := &tracker{kind: "test.overlap", work: time.Millisecond}
	reg := reconcile.Registration{Reconciler: tr, Concurrency: 4}
	a := startWorker(t, pool, "a", time.Second, reg)
	b := startWorker(t, pool, "b", time.Second, reg)
	poll.Until(t, 10*time.Second, "both workers hold shards", func() bool { return disjointCover(a, b) && len(b.member.Owned()) > 0 })

	keys := make([]string, 2000)
	for i := range keys {
		keys[i] = fmt.Sprintf("obj-%d", i)
	}
	enqueue(t, pool, tr.kind, keys)
	a.rt.Poke(tr.kind)
	b.rt.Poke(tr.kind)
	// Enqueue a quarter again while the first pass runs: each of those must run once more.
	enqueue(t, pool, tr.kind, keys[:500])
	poll.Until(t, 60*time.Second, "the queue drains", func() bool { return queueDepth(t, pool, tr.kind) == 0 })
	if tr.overlap.Load() {
		t.Fatal("a key was reconciled by two workers at once")
	}
	for _, k := range keys {
		if tr.times(k) == 0 {
			t.Fatalf("key %s was never reconciled", k)
		}
	}
}

func TestFailuresRetryWithBackoff(t *testing.T) {
	t.Parallel()
	pool := dbtest.Pool(t)
	tr := &tracker{kind: "test.retry", fail: func(key string, attempt int32) error {
		if key == "flaky" && attempt == 1 {
			return errors.New("first attempt fails")
		}
		if key == "broken" {
			panic("reconciler bug")
		}
		return nil
	}}
	w := startWorker(t, pool, "w", time.Second, reconcile.Registration{Reconciler: tr})
	poll.Until(t, 5*time.Second, "w holds every shard", func() bool { return disjointCover(w) })
	enqueue(t, pool, tr.kind, []string{"flaky", "broken", "fine"})
	w.rt.Poke(tr.kind)
	poll.Until(t, 10*time.Second, "flaky succeeds on retry", func() bool { return tr.times("flaky") == 2 && tr.times("fine") == 1 })
	var attempts int
	var lastErr *string
	poll.Until(t, 5*time.Second, "the panic is recorded", func() bool {
		err := pool.QueryRow(context.Background(), "SELECT attempts, last_error FROM reconcile_queue WHERE kind = $1 AND key = 'broken'", tr.kind).Scan(&attempts, &lastErr)
		return err == nil && attempts >= 1 && lastErr != nil
	})
	if want := "reconcile panicked: reconciler bug"; *lastErr != want {
		t.Errorf("last_error %q, want %q", *lastErr, want)
	}
	// A reconcile is counted when it returns, before its key leaves the queue in the commit that
	// follows: wait for that commit rather than race it.
	poll.Until(t, 5*time.Second, "only the broken key stays queued", func() bool { return queueDepth(t, pool, tr.kind) == 1 })
}

// blocker is a reconciler that holds each key until its context ends, telling started.
type blocker struct{ started chan string }

func (b *blocker) Kind() string { return "test.stop" }

func (b *blocker) Reconcile(ctx context.Context, key string) error {
	b.started <- key
	<-ctx.Done()
	return ctx.Err()
}

// TestStoppedWorkerHandsBackItsKeys: a worker stopped while it holds claimed keys (one being
// reconciled, one not yet started) makes both due again at once, attempts unchanged, instead
// of hiding them for their visibility window (a minute here) or backing them off.
func TestStoppedWorkerHandsBackItsKeys(t *testing.T) {
	t.Parallel()
	pool := dbtest.Pool(t)
	b := &blocker{started: make(chan string, 2)}
	w := startWorker(t, pool, "w", time.Second, reconcile.Registration{Reconciler: b, Concurrency: 1})
	poll.Until(t, 5*time.Second, "w holds every shard", func() bool { return disjointCover(w) })
	enqueue(t, pool, b.Kind(), []string{"first", "second"})
	w.rt.Poke(b.Kind())
	<-b.started
	w.stop()

	rows, err := pool.Query(context.Background(), `SELECT key, attempts, due_at <= now() FROM reconcile_queue WHERE kind = $1 ORDER BY key`, b.Kind())
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	n := 0
	for rows.Next() {
		var key string
		var attempts int
		var due bool
		if err := rows.Scan(&key, &attempts, &due); err != nil {
			t.Fatal(err)
		}
		n++
		if attempts != 0 || !due {
			t.Errorf("key %s: %d attempts, due now %v; want 0 attempts and due now", key, attempts, due)
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if n != 2 {
		t.Fatalf("%d keys queued, want 2", n)
	}
}

func TestBackoffGrowsAndIsCapped(t *testing.T) {
	t.Parallel()
	prev := time.Duration(0)
	for attempt := 1; attempt <= 5; attempt++ {
		d := reconcile.Backoff(attempt)
		base := time.Second << (attempt - 1)
		if d < base*8/10 || d > base*12/10 || d <= prev*8/10 {
			t.Errorf("Backoff(%d) = %v, want about %v", attempt, d, base)
		}
		prev = d
	}
	if d := reconcile.Backoff(100); d > 6*time.Minute {
		t.Errorf("Backoff(100) = %v, want capped near 5m", d)
	}
}

// BenchmarkReconcileThroughput pushes keys through a no-op reconciler with 256 shards over two
// workers and reports keys per second.
func BenchmarkReconcileThroughput(b *testing.B) {
	pool := dbtest.Pool(b)
	tr := &tracker{kind: "bench.noop"}
	reg := reconcile.Registration{Reconciler: tr, Concurrency: 16}
	w1 := startWorker(b, pool, "w1", 5*time.Second, reg)
	w2 := startWorker(b, pool, "w2", 5*time.Second, reg)
	poll.Until(b, 20*time.Second, "the workers split the shards", func() bool { return disjointCover(w1, w2) && len(w2.member.Owned()) > 0 })
	n := max(b.N, 20000)
	keys := make([]string, n)
	for i := range keys {
		keys[i] = fmt.Sprintf("k-%d", i)
	}
	b.ResetTimer()
	start := time.Now()
	enqueue(b, pool, tr.kind, keys)
	w1.rt.Poke(tr.kind)
	w2.rt.Poke(tr.kind)
	poll.Until(b, 5*time.Minute, "the queue drains", func() bool { return queueDepth(b, pool, tr.kind) == 0 })
	elapsed := time.Since(start)
	b.StopTimer()
	b.ReportMetric(float64(n)/elapsed.Seconds(), "keys/s")
}
