package gpuhealth_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"google.golang.org/protobuf/types/known/timestamppb"

	commandsv1 "github.com/better-compute/better-compute/gen/go/bettercompute/commands/v1"
	"github.com/better-compute/better-compute/gen/go/bettercompute/commands/v1/commandsv1connect"
	daemonv1 "github.com/better-compute/better-compute/gen/go/bettercompute/daemon/v1"
	leasesv1 "github.com/better-compute/better-compute/gen/go/bettercompute/leases/v1"
	"github.com/better-compute/better-compute/internal/daemon"
	"github.com/better-compute/better-compute/internal/gpuhealth"
	"github.com/better-compute/better-compute/internal/poll"
	"github.com/better-compute/better-compute/internal/reconcile"
	"github.com/better-compute/better-compute/internal/remediation"
	"github.com/better-compute/better-compute/workers/internal/engine"
	"github.com/better-compute/better-compute/workers/internal/remediator"
)

// withRemediator adds the remediation controller, with verify windows of 300 ms.
func withRemediator(pool *pgxpool.Pool, poke func(kind string)) []reconcile.Registration {
	return []reconcile.Registration{remediator.Registration(pool, remediator.Options{
		Wake: poke, VerifyWindow: 300 * time.Millisecond, Poll: 50 * time.Millisecond,
	})}
}

// xid injects an Xid on GPU i of host.
func (d *drill) xid(t *testing.T, host string, i int, code int64) {
	t.Helper()
	now := timestamppb.Now()
	if err := d.fakes[host].InjectGPUSignal(&daemonv1.GpuSignal{
		GpuUuid: fmt.Sprintf("GPU-%s-%d", host, i), Check: gpuhealth.CheckXid, Code: code, Count: 1, FirstSeen: now, LastSeen: now,
		Detail: fmt.Sprintf("NVRM: Xid: %d", code),
	}); err != nil {
		t.Fatal(err)
	}
}

// remediationOf waits for the node's latest remediation to end and returns its state and the
// actions and outcomes of its history.
func (d *drill) remediationOf(t *testing.T, host string) (state string, steps []string) {
	t.Helper()
	var history []byte
	poll.Until(t, 30*time.Second, "the remediation of "+host+" ends", func() bool {
		var ended bool
		err := d.env.Pool.QueryRow(ctx, `SELECT r.state, r.history, r.ended_at IS NOT NULL FROM remediations r JOIN nodes n ON n.id = r.node_id
			WHERE n.hostname = $1 ORDER BY r.created_at DESC LIMIT 1`, host).Scan(&state, &history, &ended)
		return err == nil && ended
	})
	var h []remediation.Entry
	if err := json.Unmarshal(history, &h); err != nil {
		t.Fatal(err)
	}
	for _, e := range h {
		steps = append(steps, e.Action+":"+e.Outcome)
	}
	return state, steps
}

// TestRemediationDrill: an Xid 79 on a node holding a lease opens a remediation on the reboot
// ladder; the tenant is told, the node drains (the lease ends after the pool's grace with the
// remediation's reason), reboots, passes its diagnostics and a clean window, and is back in
// service with the GPU healthy, every step in the history and the events out.
func TestRemediationDrill(t *testing.T) {
	t.Parallel()
	d := newDrillWith(t, withRemediator, "dgx-r1")
	if _, err := d.env.Pool.Exec(ctx, `UPDATE pools SET preemption_grace_ms = 300 WHERE id = $1`, d.pool); err != nil {
		t.Fatal(err)
	}
	l := d.lease(t, 8)
	d.xid(t, "dgx-r1", 3, 79)

	state, steps := d.remediationOf(t, "dgx-r1")
	want := []string{"drain:passed", "reboot:passed", "diagnose:passed", "verify:passed"}
	if state != remediation.StateSucceeded || !slices.Equal(steps, want) {
		t.Fatalf("remediation %s with steps %v, want succeeded with %v", state, steps, want)
	}
	got, err := d.leases.Get(ctx, &leasesv1.GetRequest{Id: l.GetId()})
	if err != nil {
		t.Fatal(err)
	}
	if got.GetLease().GetState() != leasesv1.LeaseState_LEASE_STATE_FAILED || got.GetLease().GetReason() != "remediation: xid 79" {
		t.Errorf("the lease on the node: %v %q", got.GetLease().GetState(), got.GetLease().GetReason())
	}
	if n := d.count(t, `SELECT count(*) FROM outbox WHERE type = 'lease.node_remediation' AND subject = $1`, "lease/"+l.GetId()); n != 1 {
		t.Errorf("%d lease.node_remediation events to the holder, want 1", n)
	}
	for typ, want := range map[string]int{"remediation.started": 1, "remediation.step": 4, "remediation.succeeded": 1} {
		if n := d.count(t, `SELECT count(*) FROM outbox WHERE type = $1`, typ); n != want {
			t.Errorf("%d %s events, want %d", n, typ, want)
		}
	}
	poll.Until(t, 10*time.Second, "the node is ready and GPU 3 healthy", func() bool {
		return d.count(t, `SELECT count(*) FROM nodes WHERE hostname = 'dgx-r1' AND state = 'ready'`) == 1 &&
			d.count(t, `SELECT count(*) FROM devices WHERE uuid = 'GPU-dgx-r1-3' AND health = 'healthy'`) == 1
	})
}

// TestRemediationRepeatOffender: a GPU remediated twice in the window goes to service on its
// third fault, with the ticket's event, and its node stays out of service until the GPU is
// replaced (the node reports another serial at its index).
func TestRemediationRepeatOffender(t *testing.T) {
	t.Parallel()
	d := newDrillWith(t, withRemediator, "dgx-r2")
	for range 2 {
		if _, err := d.env.Pool.Exec(ctx, `INSERT INTO remediations (id, tenant_id, node_id, gpu_uuid, gpu_serial, reason_check, reason_code,
				ladder, policy_version, steps, state, ended_at, created_at)
			SELECT gen_random_uuid(), n.tenant_id, n.id, 'GPU-dgx-r2-5', '1652922000005', 'xid', 48, 'reset', 'old', '[]', 'succeeded', now(), now() - interval '1 day'
			FROM nodes n WHERE n.hostname = 'dgx-r2'`); err != nil {
			t.Fatal(err)
		}
	}
	d.xid(t, "dgx-r2", 5, 48)
	// remediationOf reads the newest: wait for the third to be opened, not one of the two ended.
	poll.Until(t, 10*time.Second, "the third remediation is opened", func() bool {
		return d.count(t, `SELECT count(*) FROM remediations`) == 3
	})
	state, steps := d.remediationOf(t, "dgx-r2")
	if state != remediation.StateService || len(steps) != 2 || steps[0] != "drain:skipped" || steps[1] != "service:passed" {
		t.Fatalf("the third remediation: %s, %v; want service straight away", state, steps)
	}
	var ticket struct {
		Serial  string   `json:"serial"`
		Repeats int64    `json:"repeats"`
		Tried   []string `json:"tried"`
	}
	var raw []byte
	if err := d.env.Pool.QueryRow(ctx, `SELECT payload FROM outbox WHERE type = 'remediation.service_required'`).Scan(&raw); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(raw, &ticket); err != nil || ticket.Serial != "1652922000005" || ticket.Repeats != 2 {
		t.Fatalf("the ticket: %s (%v)", raw, err)
	}
	if n := d.count(t, `SELECT count(*) FROM nodes WHERE hostname = 'dgx-r2' AND state IN ('draining', 'drained')`); n != 1 {
		t.Error("the node went back in service")
	}

	// The GPU is replaced: the node reports another GPU, of another serial, at index 5; the
	// service ends (returned) and the node is back in service.
	inv := dgx("dgx-r2")
	inv.Gpus[5].Uuid, inv.Gpus[5].Serial = "GPU-dgx-r2-5-new", "1652922099999"
	d.fakes["dgx-r2"].SetInventory(inv)
	var node string
	if err := d.env.Pool.QueryRow(ctx, `SELECT id::text FROM nodes WHERE hostname = 'dgx-r2'`).Scan(&node); err != nil {
		t.Fatal(err)
	}
	req := &commandsv1.CreateRequest{NodeId: node, Payload: &commandsv1.CreateRequest_CollectInventory{CollectInventory: &daemonv1.CollectInventoryPayload{}}}
	if _, err := commandsv1connect.NewCommandsServiceClient(d.env.HTTPClient(d.env.AdminKey), d.env.URL).Create(ctx, req); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, 20*time.Second, "the replaced GPU's service ends and the node is ready", func() bool {
		return d.count(t, `SELECT count(*) FROM remediations WHERE state = 'returned' AND history -> -1 ->> 'detail' = 'GPU serial 1652922000005 replaced by 1652922099999'`) == 1 &&
			d.count(t, `SELECT count(*) FROM nodes WHERE hostname = 'dgx-r2' AND state = 'ready'`) == 1
	})
}

// TestRemediationBudget: three nodes of one rack fault at once; the pool's budget lets one of
// them be in remediation at a time, and all three come back.
func TestRemediationBudget(t *testing.T) {
	t.Parallel()
	hosts := []string{"dgx-b1", "dgx-b2", "dgx-b3"}
	d := newDrillWith(t, withRemediator, hosts...)
	if _, err := d.env.Pool.Exec(ctx, `UPDATE nodes SET labels = labels || '{"rack": "r9"}'`); err != nil {
		t.Fatal(err)
	}
	for i, h := range hosts {
		d.xid(t, h, i, 79) // other GPUs, other serials
	}
	for _, h := range hosts {
		if state, steps := d.remediationOf(t, h); state != remediation.StateSucceeded {
			t.Fatalf("%s: %s %v", h, state, steps)
		}
	}
	// The running periods (the first step's start to the end) never overlap.
	rows, err := d.env.Pool.Query(ctx, `SELECT (history -> 0 ->> 'startedAt')::timestamptz, ended_at FROM remediations ORDER BY 1`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var last time.Time
	for rows.Next() {
		var from, to time.Time
		if err := rows.Scan(&from, &to); err != nil {
			t.Fatal(err)
		}
		if from.Before(last) {
			t.Errorf("a remediation started at %v, before the one before it ended (%v)", from, last)
		}
		last = to
	}
}

// TestRemediationSurvivesControllerRestarts: the process of the controllers role is stopped and
// started again after 50 to 300 milliseconds (every fourth time after 3 s), its transactions cut
// off wherever they are, until the remediation of an Xid 79 ends: it ends once, succeeded, each
// step done once, and one reboot was sent.
func TestRemediationSurvivesControllerRestarts(t *testing.T) {
	t.Parallel()
	d := newDrill(t, "dgx-k1")
	d.xid(t, "dgx-k1", 2, 79)
	poll.Until(t, 10*time.Second, "a remediation is opened", func() bool {
		return d.count(t, `SELECT count(*) FROM remediations`) == 1
	})
	// From here the controllers role runs only in the process started and stopped below: a
	// second member would hold some of the shards, the remediation's among them, without the
	// remediation controller.
	d.sys.stopControllers()
	deadline := time.Now().Add(150 * time.Second)
	restarts := 0
	for ; d.count(t, `SELECT count(*) FROM remediations WHERE ended_at IS NOT NULL`) == 0; restarts++ {
		if time.Now().After(deadline) {
			var state, history, queue string
			_ = d.env.Pool.QueryRow(ctx, `SELECT state, history::text FROM remediations`).Scan(&state, &history)
			_ = d.env.Pool.QueryRow(ctx, `SELECT COALESCE(json_agg(q)::text, 'none') FROM reconcile_queue q WHERE kind = $1`, remediation.Kind).Scan(&queue)
			t.Fatalf("the remediation did not end across %d controller restarts: %s, history %s; queued %s", restarts, state, history, queue)
		}
		// Mostly cut short anywhere; every fourth run long enough to outlast a dead run's hold on
		// the key, so the remediation moves on however slow the machine.
		run := time.Duration(50+restarts%7*40) * time.Millisecond
		if restarts%4 == 3 {
			run = 3 * time.Second
		}
		rctx, stop := context.WithTimeout(ctx, run)
		var rt *engine.Runtime
		rt = engine.New(controllers(d.env.Pool, func(kind string) { rt.Reconcilers().Poke(kind) }, func(pool *pgxpool.Pool, poke func(string)) []reconcile.Registration {
			return []reconcile.Registration{remediator.Registration(pool, remediator.Options{
				Wake: poke, VerifyWindow: 100 * time.Millisecond, Poll: 10 * time.Millisecond,
			})}
		}))
		rt.Run(rctx)
		stop()
	}
	t.Logf("the remediation ended after %d controller restarts", restarts)
	state, steps := d.remediationOf(t, "dgx-k1")
	want := []string{"drain:passed", "reboot:passed", "diagnose:passed", "verify:passed"}
	if state != remediation.StateSucceeded || !slices.Equal(steps, want) {
		t.Fatalf("remediation %s with steps %v, want succeeded with %v", state, steps, want)
	}
	if n := d.count(t, `SELECT count(*) FROM commands WHERE type = 'reboot'`); n != 1 {
		t.Errorf("%d reboot commands, want 1", n)
	}
	if n := d.count(t, `SELECT count(*) FROM outbox WHERE type = 'remediation.succeeded'`); n != 1 {
		t.Errorf("%d remediation.succeeded events, want 1", n)
	}
}

// TestRemediationPowerCyclesADarkNode: a node whose reboot never comes back fails its reboot
// step; the next rung power-cycles it through the machine's provider (here: the daemon is
// started again, as a power cycle boots it), it answers, passes, and is back in service.
func TestRemediationPowerCyclesADarkNode(t *testing.T) {
	t.Parallel()
	var cycles atomic.Int32
	var cycle func()
	sys := newSystemWith(t, 1, func(pool *pgxpool.Pool, poke func(kind string)) []reconcile.Registration {
		return []reconcile.Registration{remediator.Registration(pool, remediator.Options{
			Wake: poke, VerifyWindow: 300 * time.Millisecond, Poll: 50 * time.Millisecond, RebootWait: time.Second,
			PowerCycle: func(context.Context, uuid.UUID) (bool, error) {
				cycles.Add(1)
				cycle()
				return true, nil
			},
		})}
	})
	fake, err := daemon.JoinFake(ctx, sys.rootPEM, sys.token, "dgx-dark", daemon.FakeOptions{
		Dialer: daemon.Dialer{Gateway: sys.gateway}, Inventory: dgx("dgx-dark"),
		FailRate: 1, FailTypes: []string{"reboot"}, StuckReboots: true, RebootDowntime: 50 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	runCtx, stopRun := context.WithCancel(sys.ctx)
	var runs sync.WaitGroup
	runs.Go(func() { _ = fake.Run(runCtx) })
	cycle = func() { // the power cycle: the stuck daemon's process ends, a new one boots
		mu.Lock()
		defer mu.Unlock()
		stopRun()
		runs.Wait()
		runCtx, stopRun = context.WithCancel(sys.ctx)
		runs.Go(func() { _ = fake.Run(runCtx) })
	}
	t.Cleanup(func() { mu.Lock(); stopRun(); mu.Unlock(); runs.Wait() })
	poll.Until(t, 20*time.Second, "the node is ready and online", func() bool {
		return sys.count(t, `SELECT count(*) FROM nodes WHERE state = 'ready' AND online`) == 1
	})
	// A remediation whose rungs are a reboot (which leaves the node dark) and a power cycle.
	if _, err := sys.env.Pool.Exec(ctx, `INSERT INTO remediations (id, tenant_id, node_id, gpu_uuid, reason_check, reason_code, ladder, policy_version, steps)
		SELECT gen_random_uuid(), n.tenant_id, n.id, 'GPU-dgx-dark-1', 'xid', 79, 'reboot', 'test',
		       '[{"action":"drain"},{"action":"reboot"},{"action":"verify","window":"1s"},{"action":"powerCycle"},{"action":"verify","window":"1s"},{"action":"service"}]'
		FROM nodes n`); err != nil {
		t.Fatal(err)
	}
	if _, err := sys.env.Pool.Exec(ctx, `INSERT INTO reconcile_queue (kind, key) SELECT $1, id::text FROM remediations`, remediation.Kind); err != nil {
		t.Fatal(err)
	}
	var state string
	var history []byte
	poll.Until(t, 30*time.Second, "the remediation ends", func() bool {
		return sys.env.Pool.QueryRow(ctx, `SELECT state, history FROM remediations WHERE ended_at IS NOT NULL`).Scan(&state, &history) == nil
	})
	var h []remediation.Entry
	if err := json.Unmarshal(history, &h); err != nil {
		t.Fatal(err)
	}
	var steps []string
	for _, e := range h {
		steps = append(steps, e.Action+":"+e.Outcome)
	}
	want := []string{"drain:passed", "reboot:failed", "powerCycle:passed", "verify:passed"}
	if state != remediation.StateSucceeded || !slices.Equal(steps, want) || cycles.Load() != 1 {
		t.Fatalf("remediation %s with steps %v after %d power cycles; want succeeded with %v after 1", state, steps, cycles.Load(), want)
	}
}

// TestRemediationPoolOverride: a pool's own rule sends an Xid 79 of its member to its own
// ladder (reboot, then verify, without diagnostics), and the remediation records the policy as
// overridden.
func TestRemediationPoolOverride(t *testing.T) {
	t.Parallel()
	d := newDrillWith(t, withRemediator, "dgx-o1")
	if _, err := d.env.Pool.Exec(ctx, `UPDATE pools SET remediation_override = $2 WHERE id = $1`, d.pool,
		`{"rules": [{"check": "xid", "codes": [79], "ladder": "quick"}],
		  "ladders": {"quick": {"steps": [{"action": "drain"}, {"action": "reboot"}, {"action": "verify", "window": "1m"}, {"action": "service"}]}}}`); err != nil {
		t.Fatal(err)
	}
	d.xid(t, "dgx-o1", 4, 79)
	state, steps := d.remediationOf(t, "dgx-o1")
	if want := []string{"drain:passed", "reboot:passed", "verify:passed"}; state != remediation.StateSucceeded || !slices.Equal(steps, want) {
		t.Fatalf("remediation %s with steps %v, want succeeded with %v", state, steps, want)
	}
	if n := d.count(t, `SELECT count(*) FROM remediations WHERE ladder = 'quick' AND policy_version LIKE '%+pools'`); n != 1 {
		t.Errorf("%d remediations on the pool's ladder, want 1", n)
	}
}

// TestRemediationRebootWaitsForTheNode: the reboot step ends when the rebooted node is back with
// a new session, not when its daemon reports the reboot (it does so before the host goes down):
// the diagnose after it is created once the new session started, so it is neither sent to the
// daemon that is going away, where it was lost (BenchmarkFaultToService found a remediation
// waiting on such a diagnose for good), nor run before the reboot.
func TestRemediationRebootWaitsForTheNode(t *testing.T) {
	t.Parallel()
	d := newDrillWith(t, withRemediator, "dgx-r4")
	d.xid(t, "dgx-r4", 1, 79)
	state, steps := d.remediationOf(t, "dgx-r4")
	want := []string{"drain:passed", "reboot:passed", "diagnose:passed", "verify:passed"}
	if state != remediation.StateSucceeded || !slices.Equal(steps, want) {
		t.Fatalf("remediation %s with steps %v, want succeeded with %v", state, steps, want)
	}
	var rebooted, session, diagnose time.Time
	if err := d.env.Pool.QueryRow(ctx, `SELECT
			(SELECT finished_at FROM commands WHERE type = 'reboot'),
			(SELECT connected_at FROM node_sessions),
			(SELECT created_at FROM commands WHERE type = 'diagnose')`).Scan(&rebooted, &session, &diagnose); err != nil {
		t.Fatal(err)
	}
	if !session.After(rebooted) {
		t.Fatalf("the node's session started at %v, before the reboot's result (%v)", session, rebooted)
	}
	if diagnose.Before(session) {
		t.Errorf("the diagnose was created at %v, %v after the reboot's result and before the node was back (%v)",
			diagnose, diagnose.Sub(rebooted), session)
	}
}

// TestRemediationReplace: a ladder's replace step has the node's machine replaced where a
// provider holds it (the remediation ends, succeeded, the node left drained to go with its
// machine) and is unavailable where none does (the ladder goes on to service).
func TestRemediationReplace(t *testing.T) {
	t.Parallel()
	var replaceable sync.Map // node id -> true
	var replaced atomic.Int32
	d := newDrillWith(t, func(pool *pgxpool.Pool, poke func(kind string)) []reconcile.Registration {
		return []reconcile.Registration{remediator.Registration(pool, remediator.Options{
			Wake: poke, Poll: 50 * time.Millisecond,
			Replace: func(_ context.Context, node uuid.UUID) (bool, error) {
				if _, ok := replaceable.Load(node); !ok {
					return false, nil
				}
				replaced.Add(1)
				return true, nil
			},
		})}
	}, "vm-1", "vm-2")
	var vm1 uuid.UUID
	if err := d.env.Pool.QueryRow(ctx, `SELECT id FROM nodes WHERE hostname = 'vm-1'`).Scan(&vm1); err != nil {
		t.Fatal(err)
	}
	replaceable.Store(vm1, true)
	if _, err := d.env.Pool.Exec(ctx, `INSERT INTO remediations (id, tenant_id, node_id, reason_check, ladder, policy_version, steps)
		SELECT gen_random_uuid(), n.tenant_id, n.id, 'xid', 'cloud', 'test',
		       '[{"action":"drain"},{"action":"replace"},{"action":"service"}]'
		FROM nodes n`); err != nil {
		t.Fatal(err)
	}
	if _, err := d.env.Pool.Exec(ctx, `INSERT INTO reconcile_queue (kind, key) SELECT $1, id::text FROM remediations`, remediation.Kind); err != nil {
		t.Fatal(err)
	}
	for host, want := range map[string]struct {
		state string
		steps []string
	}{
		"vm-1": {remediation.StateSucceeded, []string{"drain:passed", "replace:passed"}},
		"vm-2": {remediation.StateService, []string{"drain:passed", "replace:unavailable", "service:passed"}},
	} {
		if state, steps := d.remediationOf(t, host); state != want.state || !slices.Equal(steps, want.steps) {
			t.Errorf("%s: %s %v, want %s %v", host, state, steps, want.state, want.steps)
		}
	}
	if replaced.Load() != 1 {
		t.Errorf("%d machines replaced, want 1", replaced.Load())
	}
	if n := d.count(t, `SELECT count(*) FROM nodes WHERE hostname = 'vm-1' AND state = 'draining'`); n != 1 {
		t.Error("the replaced machine's node did not stay drained")
	}
}
