package provision

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/better-compute/better-compute/gen/db"
	provisionmodulev1 "github.com/better-compute/better-compute/gen/go/bettercompute/modules/provision/v1"
	provisiondb "github.com/better-compute/better-compute/gen/modules/provision/db"
	"github.com/better-compute/better-compute/internal/capacity"
	"github.com/better-compute/better-compute/internal/capacity/capacitytest"
	"github.com/better-compute/better-compute/internal/event"
	"github.com/better-compute/better-compute/internal/gpuhealth"
	"github.com/better-compute/better-compute/internal/locks"
	"github.com/better-compute/better-compute/internal/poll"
	"github.com/better-compute/better-compute/internal/provision/simprovider"
	"github.com/better-compute/better-compute/workers"
	"github.com/better-compute/better-compute/workers/workerstest"
)

// scaleEnv is an env with a scaled pool of the root tenant, the sim class "auto" (machines of
// 8 CPUs and 32 GiB that boot after 200ms) and a gateway.
type scaleEnv struct {
	*env
	tenant, pool uuid.UUID
}

func newScaleEnv(t *testing.T) *scaleEnv {
	t.Helper()
	e := newEnv(t, nil)
	e.mod.cfg.MaxMachinesPerTenant = 10
	e.mod.cfg.Autoscaling.Interval = 100 * time.Millisecond
	e.startGateway(t)
	params, err := structpb.NewStruct(map[string]any{"bootDelay": "200ms"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.client.CreateClass(t.Context(), &provisionmodulev1.CreateClassRequest{Name: "auto", Provider: simprovider.Kind, Params: params}); err != nil {
		t.Fatal(err)
	}
	tenant := capacitytest.RootTenant(t, e.Pool)
	return &scaleEnv{env: e, tenant: tenant, pool: capacitytest.Pool(t, e.Pool, tenant, "auto", nil)}
}

// run starts the lifecycle controller, the autoscaler, the node controllers and the liveness
// job (controllers role), and the placer.
func (e *scaleEnv) run(t *testing.T) {
	t.Helper()
	workerstest.Run(t, workerstest.Options{
		Pool: e.Pool, Roles: []string{workers.RoleControllers},
		Reconcilers: append(workerstest.NodeControl(e.Pool, workerstest.NodeControlOptions{CommandPoll: 100 * time.Millisecond}),
			e.controller(t, nil).Registration(), e.autoscaler().Registration()),
		Jobs: map[string][]locks.Job{workers.RoleControllers: {
			workerstest.Liveness(e.Pool, workerstest.LivenessOptions{Interval: 100 * time.Millisecond}),
		}},
	})
	workerstest.RunPlacer(t, e.Pool, workerstest.PlacerOptions{ResyncEvery: 200 * time.Millisecond})
}

func (e *scaleEnv) autoscaler() *Autoscaler { return NewAutoscaler(e.Pool, nil, e.mod.cfg) }

func (e *scaleEnv) setScaling(t *testing.T, lo, hi int32, delay, idle time.Duration) {
	t.Helper()
	if _, err := e.client.SetPoolScaling(t.Context(), &provisionmodulev1.SetPoolScalingRequest{
		PoolId: e.pool.String(), Class: "auto", Min: lo, Max: hi,
		ScaleUpDelayMs: delay.Milliseconds(), ScaleDownIdleMs: idle.Milliseconds(),
	}); err != nil {
		t.Fatal(err)
	}
}

// lease inserts a pending lease of cpus CPUs in the pool.
func (e *scaleEnv) lease(t *testing.T, cpus int32) uuid.UUID {
	t.Helper()
	return capacitytest.Leases(t, e.Pool, e.tenant, e.pool, 1, capacitytest.LeaseSpec{CPUs: cpus, MemoryBytes: 1 << 30})[0]
}

func (e *scaleEnv) release(t *testing.T, ids ...uuid.UUID) {
	t.Helper()
	if err := pgx.BeginFunc(t.Context(), e.Pool, func(tx pgx.Tx) error {
		if _, err := capacity.EndLeases(t.Context(), db.New(tx), ids, capacity.LeaseReleased, "", nil, new(event.Batch).Add); err != nil {
			return err
		}
		return capacity.EnqueuePlacer(t.Context(), db.New(tx), e.pool)
	}); err != nil {
		t.Fatal(err)
	}
}

// machines are the pool's machines that are not gone, by state.
func (e *scaleEnv) machines(t *testing.T) map[string][]provisiondb.PoolMachinesRow {
	t.Helper()
	rows, err := provisiondb.New(e.Pool).PoolMachines(context.Background(), &e.pool)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]provisiondb.PoolMachinesRow{}
	for _, r := range rows {
		out[r.State] = append(out[r.State], r)
	}
	return out
}

// everMade counts the pool's machines, gone ones too.
func (e *scaleEnv) everMade(t *testing.T) int {
	t.Helper()
	var n int
	if err := e.Pool.QueryRow(context.Background(), `SELECT count(*) FROM provision_machines WHERE pool_id = $1`, e.pool).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

func (e *scaleEnv) leaseState(t *testing.T, id uuid.UUID) (db.LeaseState, *uuid.UUID) {
	t.Helper()
	var st db.LeaseState
	var node *uuid.UUID
	if err := e.Pool.QueryRow(context.Background(), `
		SELECT l.state, (SELECT a.node_id FROM allocations a WHERE a.lease_id = l.id AND a.ended_at IS NULL LIMIT 1)
		FROM pool_leases l WHERE l.id = $1`, id).Scan(&st, &node); err != nil {
		t.Fatal(err)
	}
	return st, node
}

func (e *scaleEnv) awaitPlaced(t *testing.T, ids ...uuid.UUID) {
	t.Helper()
	poll.Until(t, 30*time.Second, "leases placed", func() bool {
		for _, id := range ids {
			if st, _ := e.leaseState(t, id); st != capacity.LeasePlaced {
				return false
			}
		}
		return true
	}, poll.Report(func() string { return e.report(t) }))
}

func (e *scaleEnv) awaitLive(t *testing.T, want int, states ...string) {
	t.Helper()
	poll.Until(t, 30*time.Second, "the pool's machines", func() bool {
		ms, n := e.machines(t), 0
		for _, s := range states {
			n += len(ms[s])
		}
		total := 0
		for _, v := range ms {
			total += len(v)
		}
		return n == want && total == want
	}, poll.Report(func() string { return e.report(t) }))
}

func (e *scaleEnv) report(t *testing.T) string {
	t.Helper()
	var b strings.Builder
	for s, ms := range e.machines(t) {
		fmt.Fprintf(&b, "%s:%d ", s, len(ms))
	}
	rows, _ := db.New(e.Pool).PlacerNodes(context.Background(), db.PlacerNodesParams{PoolID: e.pool, QuarantineTaint: gpuhealth.QuarantineTaintKey})
	for _, r := range rows {
		fmt.Fprintf(&b, "member %s %s online=%v cpus=%d; ", r.ID, r.State, r.Online, r.Cpus)
	}
	var dbg string
	_ = e.Pool.QueryRow(context.Background(), `SELECT string_agg(n.id::text || ' pool=' || n.pool || ' state=' || n.state || ' online=' || n.online::text, '; ') FROM nodes n`).Scan(&dbg)
	b.WriteString("nodes: " + dbg + " ")
	_ = e.Pool.QueryRow(context.Background(), `SELECT string_agg(l.state || ' ' || l.cpus || ' ' || l.memory_bytes || ' ' || l.reason, '; ') FROM pool_leases l`).Scan(&dbg)
	b.WriteString("leases: " + dbg + " ")
	_ = e.Pool.QueryRow(context.Background(), `SELECT string_agg(r.node_id || ' ' || r.cpus || ' ' || r.memory_bytes || ' used ' || r.cpus_used, '; ') FROM node_resources r`).Scan(&dbg)
	b.WriteString("res: " + dbg + " ")
	_ = e.Pool.QueryRow(context.Background(), `SELECT string_agg(id || ' ' || action || ' ' || reason, '; ') FROM provision_scaling_decisions`).Scan(&dbg)
	b.WriteString("decisions: " + dbg + " ")
	_ = e.Pool.QueryRow(context.Background(), `SELECT string_agg(type || ' ' || payload::text, '; ') FROM outbox WHERE type LIKE 'pool.scale%'`).Scan(&dbg)
	b.WriteString("outbox: " + dbg + " ")
	res, err := e.client.GetPoolScaling(context.Background(), &provisionmodulev1.GetPoolScalingRequest{PoolId: e.pool.String()})
	if err == nil {
		for _, d := range res.GetDecisions() {
			b.WriteString("| " + d.GetAction() + ": " + d.GetReason() + " ")
		}
	}
	return b.String()
}

func (e *scaleEnv) events(t *testing.T, typ string) int {
	t.Helper()
	var n int
	if err := e.Pool.QueryRow(context.Background(), `SELECT count(*) FROM outbox WHERE type = $1 AND subject = $2`, typ, "pool/"+e.pool.String()).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// TestAutoscaleUpAndDown: a pool keeps its min of one machine; leases that do not fit on it
// provision the fewest machines that make them fit (6+4+4 CPUs on 8-CPU machines: two), which
// join the pool, and the leases are placed; once released, the pool goes back to min after the
// idle time. Every decision is an event and shows in poolScaling/get.
func TestAutoscaleUpAndDown(t *testing.T) {
	t.Parallel()
	e := newScaleEnv(t)
	e.setScaling(t, 1, 4, 0, time.Second)
	e.run(t)
	e.awaitLive(t, 1, StateReady)

	leases := []uuid.UUID{e.lease(t, 6), e.lease(t, 4), e.lease(t, 4)}
	e.awaitPlaced(t, leases...)
	e.awaitLive(t, 2, StateReady)
	if n := e.everMade(t); n != 2 {
		t.Fatalf("%d machines made, want 2 (one for min, one for the leases)", n)
	}
	ready := map[uuid.UUID]bool{}
	for _, m := range e.machines(t)[StateReady] {
		ready[*m.NodeID] = true
	}
	for _, id := range leases {
		if _, node := e.leaseState(t, id); node == nil || !ready[*node] {
			t.Fatalf("lease %s is on node %v, not on a machine of the pool", id, node)
		}
	}

	e.release(t, leases...)
	e.awaitLive(t, 1, StateReady)
	if e.events(t, "pool.scaled_up") != 2 || e.events(t, "pool.scaled_down") != 1 {
		t.Fatalf("events: %d scaled_up, %d scaled_down; want 2 and 1", e.events(t, "pool.scaled_up"), e.events(t, "pool.scaled_down"))
	}
	res, err := e.client.GetPoolScaling(t.Context(), &provisionmodulev1.GetPoolScalingRequest{PoolId: e.pool.String()})
	if err != nil {
		t.Fatal(err)
	}
	var actions []string
	for _, d := range res.GetDecisions() {
		actions = append(actions, d.GetAction())
	}
	if strings.Join(actions, ",") != "scale_down,scale_up,scale_up" || res.GetScaling().GetMachines() != 1 {
		t.Fatalf("decisions %v, machines %d; want scale_down,scale_up,scale_up and 1", actions, res.GetScaling().GetMachines())
	}
}

// TestAutoscaleKeepsHeldNodes: of two idle-eligible machines, the one whose node holds a lease
// stays, however long the autoscaler runs.
func TestAutoscaleKeepsHeldNodes(t *testing.T) {
	t.Parallel()
	e := newScaleEnv(t)
	e.setScaling(t, 0, 4, 0, time.Second)
	e.run(t)
	held, freed := e.lease(t, 6), e.lease(t, 6)
	e.awaitPlaced(t, held, freed)
	e.awaitLive(t, 2, StateReady)
	e.release(t, freed)
	e.awaitLive(t, 1, StateReady)
	_, node := e.leaseState(t, held)
	left := e.machines(t)[StateReady][0]
	if node == nil || *left.NodeID != *node {
		t.Fatalf("the machine left has node %v; the held lease is on %v", left.NodeID, node)
	}
	// Well past the idle time, more decisions change nothing.
	poll.Until(t, 10*time.Second, "the idle time to pass", func() bool {
		return time.Since(left.IdleSince) > 2*time.Second
	})
	a := e.autoscaler()
	for range 3 {
		if err := a.Reconcile(t.Context(), e.pool.String()); err != nil {
			t.Fatal(err)
		}
	}
	if ms := e.machines(t); len(ms[StateReady]) != 1 || len(ms) != 1 {
		t.Fatalf("machines %v: want the held one ready, alone", ms)
	}
	if st, _ := e.leaseState(t, held); st != capacity.LeasePlaced {
		t.Fatalf("held lease is %s", st)
	}
}

// TestAutoscaleMax: three leases that need three machines get two, the pool's max; the third
// stays pending and the decision that the pool is at its max is recorded once.
func TestAutoscaleMax(t *testing.T) {
	t.Parallel()
	e := newScaleEnv(t)
	e.setScaling(t, 0, 2, 0, time.Minute)
	e.run(t)
	leases := []uuid.UUID{e.lease(t, 6), e.lease(t, 6), e.lease(t, 6)}
	e.awaitLive(t, 2, StateReady)
	poll.Until(t, 30*time.Second, "two leases placed", func() bool {
		n := 0
		for _, id := range leases {
			if st, _ := e.leaseState(t, id); st == capacity.LeasePlaced {
				n++
			}
		}
		return n == 2
	}, poll.Report(func() string { return e.report(t) }))
	poll.Until(t, 10*time.Second, "a blocked event", func() bool { return e.events(t, "pool.scale_blocked") == 1 })
	a := e.autoscaler()
	for range 3 {
		if err := a.Reconcile(t.Context(), e.pool.String()); err != nil {
			t.Fatal(err)
		}
	}
	if n, b := e.everMade(t), e.events(t, "pool.scale_blocked"); n != 2 || b != 1 {
		t.Fatalf("%d machines made, %d blocked events; want 2 and 1: %s", n, b, e.report(t))
	}
}

// TestAutoscaleRestartMidScaleUp: a decision committed by a process that then died (its
// machines still requested, nothing at the provider) counts as incoming capacity for the next
// process, which asks for no more; the machines it asked for come up and take the leases.
func TestAutoscaleRestartMidScaleUp(t *testing.T) {
	t.Parallel()
	e := newScaleEnv(t)
	e.setScaling(t, 0, 4, 0, time.Minute)
	leases := []uuid.UUID{e.lease(t, 6), e.lease(t, 6)}
	if err := e.autoscaler().Reconcile(t.Context(), e.pool.String()); err != nil {
		t.Fatal(err)
	}
	if ms := e.machines(t); len(ms[StateRequested]) != 2 {
		t.Fatalf("after the first decision: %v, want two requested", ms)
	}
	// A new process: its first decisions see the requested machines and add none.
	for range 2 {
		if err := e.autoscaler().Reconcile(t.Context(), e.pool.String()); err != nil {
			t.Fatal(err)
		}
	}
	e.run(t)
	e.awaitPlaced(t, leases...)
	e.awaitLive(t, 2, StateReady)
	if n, creates := e.everMade(t), e.cloud.Creates(); n != 2 || creates != 2 {
		t.Fatalf("%d machines, %d provider creates; want 2 and 2", n, creates)
	}
}

// TestPoolScalingAPI: validation, tenant scoping and the per-tenant limit.
func TestPoolScalingAPI(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	e.mod.cfg.Autoscaling.MaxPoolsPerTenant = 1
	e.simClass(t, "small")
	root := capacitytest.RootTenant(t, e.Pool)
	p1 := capacitytest.Pool(t, e.Pool, root, "p1", nil)
	p2 := capacitytest.Pool(t, e.Pool, root, "p2", nil)
	set := func(c interface {
		SetPoolScaling(context.Context, *provisionmodulev1.SetPoolScalingRequest) (*provisionmodulev1.SetPoolScalingResponse, error)
	}, pool uuid.UUID, class string, lo, hi int32) error {
		_, err := c.SetPoolScaling(t.Context(), &provisionmodulev1.SetPoolScalingRequest{
			PoolId: pool.String(), Class: class, Min: lo, Max: hi, ScaleUpDelayMs: 1000, ScaleDownIdleMs: 60000,
		})
		return err
	}
	wantCode(t, set(e.client, p1, "small", 3, 2), connect.CodeInvalidArgument, "min above max")
	wantCode(t, set(e.client, p1, "small", 0, 1000), connect.CodeInvalidArgument, "max above maxMachinesPerPool")
	wantCode(t, set(e.client, p1, "nope", 0, 2), connect.CodeInvalidArgument, "unknown class")
	wantCode(t, set(e.client, uuid.New(), "small", 0, 2), connect.CodeInvalidArgument, "unknown pool")
	if err := set(e.client, p1, "small", 0, 2); err != nil {
		t.Fatal(err)
	}
	if err := set(e.client, p1, "small", 1, 3); err != nil {
		t.Fatalf("changing a scaled pool: %v", err)
	}
	wantCode(t, set(e.client, p2, "small", 0, 2), connect.CodeResourceExhausted, "a second scaled pool over the limit")

	other := e.childTenant(t, "other")
	if _, err := other.CreateClass(t.Context(), &provisionmodulev1.CreateClassRequest{Name: "small", Provider: simprovider.Kind}); err != nil {
		t.Fatal(err)
	}
	wantCode(t, set(other, p1, "small", 0, 2), connect.CodeInvalidArgument, "another tenant's pool")
	_, err := other.GetPoolScaling(t.Context(), &provisionmodulev1.GetPoolScalingRequest{PoolId: p1.String()})
	wantCode(t, err, connect.CodeNotFound, "another tenant's scaling")
	l, err := other.ListPoolScaling(t.Context(), &provisionmodulev1.ListPoolScalingRequest{})
	if err != nil || len(l.GetScalings()) != 0 {
		t.Fatalf("other tenant's list: %v, %v", l, err)
	}
	got, err := e.client.GetPoolScaling(t.Context(), &provisionmodulev1.GetPoolScalingRequest{PoolId: p1.String()})
	if err != nil || got.GetScaling().GetMin() != 1 || got.GetScaling().GetMax() != 3 {
		t.Fatalf("get: %v, %v", got, err)
	}
	if _, err := other.DeletePoolScaling(t.Context(), &provisionmodulev1.DeletePoolScalingRequest{PoolId: p1.String()}); connect.CodeOf(err) != connect.CodeNotFound {
		t.Fatalf("other tenant's delete: %v", err)
	}
	if _, err := e.client.DeletePoolScaling(t.Context(), &provisionmodulev1.DeletePoolScalingRequest{PoolId: p1.String()}); err != nil {
		t.Fatal(err)
	}
	if err := set(e.client, p2, "small", 0, 2); err != nil {
		t.Fatalf("after deleting, another pool fits the limit: %v", err)
	}

	// A class with a shape is accepted and its provider does not see the shape; a bad one is not.
	shape, _ := structpb.NewStruct(map[string]any{"shape": map[string]any{"gpus": 8, "gpuModel": "H100", "cpus": 64, "memoryBytes": 512 << 30}})
	if _, err := e.client.CreateClass(t.Context(), &provisionmodulev1.CreateClassRequest{Name: "big", Provider: simprovider.Kind, Params: shape}); err != nil {
		t.Fatalf("class with a shape: %v", err)
	}
	bad, _ := structpb.NewStruct(map[string]any{"shape": map[string]any{"gpus": 8}})
	_, err = e.client.CreateClass(t.Context(), &provisionmodulev1.CreateClassRequest{Name: "bad", Provider: simprovider.Kind, Params: bad})
	wantCode(t, err, connect.CodeInvalidArgument, "a shape with GPUs and no model")
}
