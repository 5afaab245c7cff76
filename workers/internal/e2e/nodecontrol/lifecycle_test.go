package nodecontrol_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/better-compute/better-compute/gen/db"
	nodesv1 "github.com/better-compute/better-compute/gen/go/bettercompute/nodes/v1"
	"github.com/better-compute/better-compute/internal/fleet"
	"github.com/better-compute/better-compute/internal/poll"
	"github.com/better-compute/better-compute/workers/internal/nodecontrol"
)

// leaseCounter is an ActiveLeases with settable counts per node that counts its calls.
type leaseCounter struct {
	mu     sync.Mutex
	active map[uuid.UUID]int
	calls  map[uuid.UUID]int
}

func (l *leaseCounter) set(id uuid.UUID, n int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.active[id] = n
}

func (l *leaseCounter) count(_ context.Context, id uuid.UUID) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.calls[id]++
	return l.active[id], nil
}

func (l *leaseCounter) callsOf(id uuid.UUID) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.calls[id]
}

func TestDrainReachesDrained(t *testing.T) {
	t.Parallel()
	f := newFleet(t)
	leases := &leaseCounter{active: map[uuid.UUID]int{}, calls: map[uuid.UUID]int{}}
	runWorkers(t, f.Pool, nodecontrol.Options{ActiveLeases: leases.count, DrainPoll: 100 * time.Millisecond})
	idle := newNode(t, f.Pool, f.tenant, "idle", "1.0.0")
	busy := newNode(t, f.Pool, f.tenant, "busy", "1.0.0")
	leases.set(busy, 1)
	for _, id := range []uuid.UUID{idle, busy} {
		if _, err := f.nodes.Drain(ctx, &nodesv1.DrainRequest{Id: id.String()}); err != nil {
			t.Fatal(err)
		}
	}

	// With no active leases the node is drained at once, and its daemon told to drain.
	poll.Until(t, 20*time.Second, "the idle node is drained", func() bool { return node(t, f.Pool, idle).State == "drained" })
	n := node(t, f.Pool, idle)
	if c := commands(t, f.Pool, idle, nodecontrol.CommandDrain); len(c) != 1 || c[0].Key != fmt.Sprintf("drain-%d", n.StateGeneration-1) || c[0].State != "pending" {
		t.Errorf("drain commands %+v (state generation %d)", c, n.StateGeneration)
	}
	if got := events(t, f.Pool, "node.drained", idle); got != 1 {
		t.Errorf("%d node.drained events, want 1", got)
	}
	poll.Until(t, 5*time.Second, "Schedulable says drained", func() bool {
		c := condition(t, node(t, f.Pool, idle), fleet.ConditionSchedulable)
		return c.Status == fleet.StatusFalse && c.Reason == "Drained"
	})

	// With an active lease the node stays draining, looked at again and again, however often.
	poll.Until(t, 10*time.Second, "the busy node is looked at three times", func() bool { return leases.callsOf(busy) >= 3 })
	if s := node(t, f.Pool, busy).State; s != "draining" {
		t.Fatalf("busy node is %s with an active lease", s)
	}
	if c := commands(t, f.Pool, busy, nodecontrol.CommandDrain); len(c) != 1 {
		t.Errorf("%d drain commands for one drain, want 1", len(c))
	}
	// The lease ends: the node is drained within a poll.
	leases.set(busy, 0)
	poll.Until(t, 10*time.Second, "the busy node is drained once its lease ended", func() bool { return node(t, f.Pool, busy).State == "drained" })

	// Uncordoned and drained again, it gets a second drain command.
	if _, err := f.nodes.Uncordon(ctx, &nodesv1.UncordonRequest{Id: busy.String()}); err != nil {
		t.Fatal(err)
	}
	if _, err := f.nodes.Drain(ctx, &nodesv1.DrainRequest{Id: busy.String()}); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, 10*time.Second, "drained again", func() bool { return node(t, f.Pool, busy).State == "drained" })
	if c := commands(t, f.Pool, busy, nodecontrol.CommandDrain); len(c) != 2 || c[0].Key == c[1].Key {
		t.Errorf("drain commands after two drains: %+v", c)
	}
	if got := events(t, f.Pool, "node.drained", busy); got != 2 {
		t.Errorf("%d node.drained events, want 2", got)
	}
	// Nothing is left queued but the periodic resync.
	poll.Until(t, 5*time.Second, "the lifecycle queue drains", func() bool {
		return count(t, f.Pool, `SELECT count(*) FROM reconcile_queue WHERE kind = $1`, fleet.KindLifecycle) == 0
	})
}

func TestDrainWithoutLeaseCounter(t *testing.T) {
	t.Parallel()
	f := newFleet(t)
	var notified atomic.Int32
	runWorkers(t, f.Pool, nodecontrol.Options{Notifier: notifierFunc(func(ids []uuid.UUID) { notified.Add(int32(len(ids))) })})
	id := newNode(t, f.Pool, f.tenant, "a", "")
	// A node that never said hello can be cordoned, drained and retired.
	if _, err := f.nodes.Cordon(ctx, &nodesv1.CordonRequest{Id: id.String()}); err != nil {
		t.Fatal(err)
	}
	if _, err := f.nodes.Drain(ctx, &nodesv1.DrainRequest{Id: id.String()}); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, 20*time.Second, "the node is drained", func() bool { return node(t, f.Pool, id).State == "drained" })
	// Gateways are told after the transaction commits, so the state can be seen first.
	poll.Until(t, 5*time.Second, "gateways are told of the drain command", func() bool { return notified.Load() >= 1 })
	if n := notified.Load(); n != 1 {
		t.Errorf("gateways told of %d new commands, want 1", n)
	}
	if _, err := f.nodes.Retire(ctx, &nodesv1.RetireRequest{Id: id.String()}); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, 5*time.Second, "Schedulable says retired", func() bool {
		return condition(t, node(t, f.Pool, id), fleet.ConditionSchedulable).Reason == "Retired"
	})
	// The resync lists draining nodes and nodes without a Schedulable condition, not this one.
	fresh := newNode(t, f.Pool, f.tenant, "fresh", "")
	keys, err := db.New(f.Pool).LifecycleResyncNodeKeys(ctx)
	if err != nil || !slices.Contains(keys, fresh.String()) || slices.Contains(keys, id.String()) {
		t.Errorf("lifecycle resync keys %v (%v): want %s and not %s", keys, err, fresh, id)
	}
}

type notifierFunc func([]uuid.UUID)

func (f notifierFunc) CommandsCreated(_ context.Context, ids []uuid.UUID) { f(ids) }
