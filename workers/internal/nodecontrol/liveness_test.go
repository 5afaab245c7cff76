package nodecontrol_test

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/better-compute/better-compute/gen/db"
	"github.com/better-compute/better-compute/internal/auth"
	"github.com/better-compute/better-compute/internal/dbtest"
	"github.com/better-compute/better-compute/internal/fleet"
	"github.com/better-compute/better-compute/internal/locks"
	"github.com/better-compute/better-compute/internal/poll"
	"github.com/better-compute/better-compute/workers/internal/nodecontrol"
)

// hooks records the liveness hooks' calls and checks, inside their transaction, that the nodes
// they are given are already marked.
type hooks struct {
	t           *testing.T
	mu          sync.Mutex
	offline     [][]uuid.UUID
	online      [][]uuid.UUID
	failOffline bool
}

func (h *hooks) hook(online bool) nodecontrol.LivenessHook {
	return func(ctx context.Context, tx pgx.Tx, ids []uuid.UUID) error {
		var marked int
		if err := tx.QueryRow(ctx, `SELECT count(*) FROM nodes WHERE id = ANY($1) AND online = $2`, ids, online).Scan(&marked); err != nil {
			return err
		}
		if marked != len(ids) {
			h.t.Errorf("hook (online %v) called for %d nodes, %d of them marked in its transaction", online, len(ids), marked)
		}
		h.mu.Lock()
		defer h.mu.Unlock()
		if online {
			h.online = append(h.online, ids)
		} else {
			if h.failOffline {
				return errors.New("lease store unavailable")
			}
			h.offline = append(h.offline, ids)
		}
		return nil
	}
}

func (h *hooks) calls(online bool) [][]uuid.UUID {
	h.mu.Lock()
	defer h.mu.Unlock()
	if online {
		return slices.Clone(h.online)
	}
	return slices.Clone(h.offline)
}

func flatten(calls [][]uuid.UUID) []uuid.UUID {
	var out []uuid.UUID
	for _, c := range calls {
		out = append(out, c...)
	}
	slices.SortFunc(out, func(a, b uuid.UUID) int { return slices.Compare(a[:], b[:]) })
	return out
}

func sorted(ids []uuid.UUID) []uuid.UUID {
	out := slices.Clone(ids)
	slices.SortFunc(out, func(a, b uuid.UUID) int { return slices.Compare(a[:], b[:]) })
	return out
}

// seen sets a node's liveness columns directly: online or not, last heard from ago (never when
// negative).
func seen(t *testing.T, pool *pgxpool.Pool, id uuid.UUID, online bool, ago time.Duration) {
	t.Helper()
	var last *time.Time
	if ago >= 0 {
		v := time.Now().Add(-ago)
		last = &v
	}
	if _, err := pool.Exec(ctx, `UPDATE nodes SET online = $2 WHERE id = $1`, id, online); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `DELETE FROM node_liveness WHERE node_id = $1`, id); err != nil {
		t.Fatal(err)
	}
	if last == nil {
		return
	}
	if _, err := pool.Exec(ctx, `INSERT INTO node_liveness (node_id, last_seen_at) VALUES ($1, $2)`, id, last); err != nil {
		t.Fatal(err)
	}
}

func takeLivenessLease(t *testing.T, pool *pgxpool.Pool) locks.Lock {
	t.Helper()
	ls, err := locks.NewHolder(pool, "test", nil).Acquire(ctx, time.Minute, nodecontrol.LivenessJob(pool, nodecontrol.LivenessOptions{}).LockName())
	if err != nil || len(ls) != 1 {
		t.Fatalf("take the liveness lease: %v %v", ls, err)
	}
	return ls[0]
}

func TestLivenessMarksNodesInBatches(t *testing.T) {
	t.Parallel()
	pool := dbtest.Pool(t)
	root, err := auth.EnsureRootTenant(ctx, pool)
	if err != nil {
		t.Fatal(err)
	}
	var silent, alive, back, stay []uuid.UUID
	for range 5 { // online, silent for a minute
		id := newNode(t, pool, root.ID, "silent", "1.0.0")
		seen(t, pool, id, true, time.Minute)
		silent = append(silent, id)
	}
	for range 2 { // online, heard from just now
		id := newNode(t, pool, root.ID, "alive", "1.0.0")
		seen(t, pool, id, true, time.Second)
		alive = append(alive, id)
	}
	for range 4 { // offline, heard from again
		id := newNode(t, pool, root.ID, "back", "1.0.0")
		seen(t, pool, id, false, time.Second)
		back = append(back, id)
	}
	revoked := newNode(t, pool, root.ID, "revoked", "1.0.0")
	seen(t, pool, revoked, false, time.Second)
	if _, err := db.New(pool).RevokeNode(ctx, db.RevokeNodeParams{TenantID: root.ID, ID: revoked}); err != nil {
		t.Fatal(err)
	}
	never := newNode(t, pool, root.ID, "never", "")
	stay = append(stay, revoked, never)

	h := &hooks{t: t}
	opts := nodecontrol.LivenessOptions{Batch: 2, Threshold: 30 * time.Second, OnOffline: h.hook(false), OnOnline: h.hook(true)}
	l := takeLivenessLease(t, pool)
	rounds := 0
	for {
		n, err := nodecontrol.CheckLiveness(ctx, pool, l, opts)
		if err != nil {
			t.Fatal(err)
		}
		if len(n.Offline) > 2 || len(n.Online) > 2 {
			t.Errorf("round %d changed %d and %d nodes, more than a batch", rounds, len(n.Offline), len(n.Online))
		}
		if len(n.Offline)+len(n.Online) == 0 {
			break
		}
		rounds++
	}
	if rounds != 3 {
		t.Errorf("%d rounds for 5 offline and 4 online nodes in batches of 2, want 3", rounds)
	}
	if got := flatten(h.calls(false)); !slices.Equal(got, sorted(silent)) {
		t.Errorf("OnOffline got %v, want %v", got, sorted(silent))
	}
	if got := flatten(h.calls(true)); !slices.Equal(got, sorted(back)) {
		t.Errorf("OnOnline got %v, want %v", got, sorted(back))
	}
	if calls := h.calls(false); len(calls) != 3 || len(calls[0]) != 2 {
		t.Errorf("OnOffline calls %v, want batches of 2, 2 and 1", calls)
	}
	for _, id := range silent {
		if n := node(t, pool, id); n.Online || n.OnlineChangedAt == nil || events(t, pool, "node.offline", id) != 1 {
			t.Errorf("silent node: online %v, changed %v, %d events", n.Online, n.OnlineChangedAt, events(t, pool, "node.offline", id))
		}
	}
	for _, id := range back {
		if n := node(t, pool, id); !n.Online || events(t, pool, "node.online", id) != 1 {
			t.Errorf("node heard from again: online %v, %d events", n.Online, events(t, pool, "node.online", id))
		}
	}
	for _, id := range alive {
		if !node(t, pool, id).Online {
			t.Error("a live node went offline")
		}
	}
	for _, id := range stay {
		if node(t, pool, id).Online {
			t.Error("a revoked or never-seen node came online")
		}
	}
	if got := count(t, pool, `SELECT count(*) FROM outbox WHERE type IN ('node.offline', 'node.online')`); got != 9 {
		t.Errorf("%d liveness events, want 9", got)
	}
	if got := count(t, pool, `SELECT count(*) FROM reconcile_queue WHERE kind = $1`, fleet.KindLifecycle); got != 9 {
		t.Errorf("%d nodes enqueued for their lifecycle, want 9", got)
	}

	// A failing hook rolls the round back: the node stays online, with no event.
	seen(t, pool, alive[0], true, time.Hour)
	h.failOffline = true
	if _, err := nodecontrol.CheckLiveness(ctx, pool, l, opts); err == nil {
		t.Fatal("a failing hook did not fail the round")
	}
	if !node(t, pool, alive[0]).Online || events(t, pool, "node.offline", alive[0]) != 0 {
		t.Error("a failed round changed the node")
	}
	// A stale lease changes nothing.
	stale := l
	stale.Token++
	if _, err := nodecontrol.CheckLiveness(ctx, pool, stale, opts); !errors.Is(err, locks.ErrStale) {
		t.Fatalf("round with a stale lease: %v, want ErrStale", err)
	}
	h.failOffline = false
	if n, err := nodecontrol.CheckLiveness(ctx, pool, l, opts); err != nil || !slices.Equal(n.Offline, []uuid.UUID{alive[0]}) {
		t.Fatalf("after the hook recovers: %v %v", n, err)
	}
}

// TestLivenessJob runs the job and the lifecycle reconciler on the worker runtime: a node whose
// heartbeats stop goes offline (Schedulable False, Offline) and comes back when they resume.
func TestLivenessJob(t *testing.T) {
	t.Parallel()
	f := newFleet(t)
	h := &hooks{t: t}
	var woken sync.Map
	runWorkers(t, f.Pool, nodecontrol.Options{}, nodecontrol.LivenessJob(f.Pool, nodecontrol.LivenessOptions{
		Interval: 50 * time.Millisecond, Threshold: time.Second, OnOffline: h.hook(false), OnOnline: h.hook(true),
		Wake: func(kind string) { woken.Store(kind, true) },
	}))
	id := newNode(t, f.Pool, f.tenant, "a", "1.0.0")
	// Heartbeats arrive, as a gateway writes them, until stopped.
	beat := func() error {
		return db.New(f.Pool).RecordLiveness(ctx, db.RecordLivenessParams{Ids: []uuid.UUID{id}, Seen: []time.Time{time.Now()}, Vouch: []bool{false}})
	}
	// beating sends heartbeats every 100 ms until the returned stop is called.
	beating := func() (stop func()) {
		done, stopped := make(chan struct{}), make(chan struct{})
		go func() {
			defer close(stopped)
			for {
				select {
				case <-done:
					return
				case <-time.After(100 * time.Millisecond):
					if err := beat(); err != nil {
						t.Error(err)
					}
				}
			}
		}()
		return func() { close(done); <-stopped }
	}
	stopBeats := beating()
	poll.Until(t, 20*time.Second, "the node comes online and is schedulable", func() bool {
		c := condition(t, node(t, f.Pool, id), fleet.ConditionSchedulable)
		return node(t, f.Pool, id).Online && c.Status == fleet.StatusTrue && c.Reason == "Ready"
	})
	stopBeats()
	// Heartbeats stop.
	took := poll.Until(t, 10*time.Second, "the silent node goes offline", func() bool {
		c := condition(t, node(t, f.Pool, id), fleet.ConditionSchedulable)
		return !node(t, f.Pool, id).Online && c.Status == fleet.StatusFalse && c.Reason == "Offline"
	})
	t.Logf("offline %v after its last heartbeat (threshold 1s)", took)
	if got := flatten(h.calls(false)); !slices.Equal(got, []uuid.UUID{id}) {
		t.Errorf("OnOffline got %v", got)
	}
	// They resume, and keep coming: one lone heartbeat would let the node go offline again a
	// threshold later, before a slow machine's reconciler marks it schedulable.
	stopBeats = beating()
	poll.Until(t, 10*time.Second, "the node is back", func() bool {
		return node(t, f.Pool, id).Online && condition(t, node(t, f.Pool, id), fleet.ConditionSchedulable).Status == fleet.StatusTrue
	})
	stopBeats()
	if len(h.calls(true)) != 2 { // the first hello, and now
		t.Errorf("OnOnline calls %v, want 2", h.calls(true))
	}
	if _, ok := woken.Load(fleet.KindLifecycle); !ok {
		t.Error("the job did not wake the lifecycle reconciler")
	}
	if got := count(t, f.Pool, `SELECT count(*) FROM job_runs WHERE name = $1 AND last_error = ''`, nodecontrol.LivenessJobName); got != 1 {
		t.Errorf("job_runs has %d ok rows for the liveness job", got)
	}
}
