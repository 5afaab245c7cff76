package workflows_test

import (
	"context"
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/better-compute/better-compute/gen/db"
	workflowsv1 "github.com/better-compute/better-compute/gen/go/bettercompute/workflows/v1"
	"github.com/better-compute/better-compute/internal/capacity/capacitytest"
	"github.com/better-compute/better-compute/internal/dbtest"
	"github.com/better-compute/better-compute/internal/event"
	"github.com/better-compute/better-compute/internal/reconcile"
	"github.com/better-compute/better-compute/internal/workflow"
	"github.com/better-compute/better-compute/workers/internal/workflows"
)

// These tests run the controller's Reconcile directly, one run at a time, against a fleet
// simulated in the database: fleet.step answers the commands the controller sent as daemons
// would (results, new versions in hellos, sessions), so every state the controller sees between
// two runs can be checked.
func TestMain(m *testing.M) { dbtest.Main(m) }

var ctx = context.Background()

// bundle is what each test starts with.
type bundle struct {
	pool   *pgxpool.Pool
	tenant uuid.UUID
	ctl    reconcile.Reconciler
}

func setup(t *testing.T) *bundle {
	t.Helper()
	pool := dbtest.Pool(t)
	reg := workflows.Reconciler(pool, workflows.Options{Poll: 10 * time.Millisecond})
	return &bundle{pool: pool, tenant: capacitytest.RootTenant(t, pool), ctl: reg.Reconciler}
}

// nodes makes n ready, online nodes on version with a live session each.
func (b *bundle) nodes(t *testing.T, n int, version string) []uuid.UUID {
	t.Helper()
	ids := capacitytest.Nodes(t, b.pool, b.tenant, n, capacitytest.NodeSpec{CPUs: 8, MemoryBytes: 32 << 30})
	b.exec(t, `UPDATE nodes SET daemon_version = $2 WHERE id = ANY($1)`, ids, version)
	b.exec(t, `INSERT INTO gateways (id, control_url, region) VALUES ('gw', '', '') ON CONFLICT DO NOTHING`)
	b.exec(t, `INSERT INTO node_sessions (node_id, gateway_id, session_id) SELECT id, 'gw', 's-' || id FROM unnest($1::uuid[]) AS id`, ids)
	return ids
}

func (b *bundle) exec(t *testing.T, sql string, args ...any) {
	t.Helper()
	if _, err := b.pool.Exec(ctx, sql, args...); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
}

func (b *bundle) count(t *testing.T, sql string, args ...any) int {
	t.Helper()
	var n int
	if err := b.pool.QueryRow(ctx, sql, args...).Scan(&n); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	return n
}

// create makes a workflow over ids as workflows/create does.
func (b *bundle) create(t *testing.T, action *workflowsv1.Action, policy workflow.Policy, ids []uuid.UUID) uuid.UUID {
	t.Helper()
	if policy.StepTimeout == 0 {
		policy.StepTimeout = time.Minute
	}
	if policy.MaxParallel == 0 {
		policy.MaxParallel = 1
	}
	var w db.Workflow
	tx, err := b.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	strs := make([]string, len(ids))
	for i, id := range ids {
		strs[i] = id.String()
	}
	w, err = workflow.Create(ctx, db.New(tx), workflow.New{
		TenantID: b.tenant, Name: t.Name(), Action: action, Target: &workflowsv1.Target{NodeIds: strs},
		Policy: policy, Origin: workflow.OriginAPI, CreatedBy: "test", NodeIDs: ids,
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	return w.ID
}

// reconcile runs the controller once.
func (b *bundle) reconcile(t *testing.T, id uuid.UUID) {
	t.Helper()
	if err := b.ctl.Reconcile(ctx, id.String()); err != nil {
		t.Fatalf("reconcile: %v", err)
	}
}

func (b *bundle) state(t *testing.T, id uuid.UUID) db.Workflow {
	t.Helper()
	w, err := db.New(b.pool).GetWorkflow(ctx, db.GetWorkflowParams{TenantID: b.tenant, ID: id})
	if err != nil {
		t.Fatal(err)
	}
	return w
}

// daemons answers every command of the fleet that is not finished: an upgrade command succeeds
// and the daemon says hello with the new version, unless fail says the node fails, in which case
// the command fails as a rolled-back upgrade does.
func (b *bundle) daemons(t *testing.T, fail func(node uuid.UUID) bool) {
	t.Helper()
	rows, err := b.pool.Query(ctx, `SELECT id, node_id, payload->>'version' FROM commands WHERE finished_at IS NULL AND type = 'upgrade'`)
	if err != nil {
		t.Fatal(err)
	}
	type cmd struct {
		id, node uuid.UUID
		version  string
	}
	var cmds []cmd
	for rows.Next() {
		var c cmd
		if err := rows.Scan(&c.id, &c.node, &c.version); err != nil {
			t.Fatal(err)
		}
		cmds = append(cmds, c)
	}
	rows.Close()
	q := db.New(b.pool)
	for _, c := range cmds {
		b.exec(t, `UPDATE commands SET state = 'sent', sent_at = now() WHERE id = $1`, c.id)
		if fail != nil && fail(c.node) {
			if _, err := q.FinishCommand(ctx, db.FinishCommandParams{NodeID: c.node, ID: c.id, State: "failed", Error: "rolled back: the new binary held no session within 2m0s"}); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if _, err := q.FinishCommand(ctx, db.FinishCommandParams{NodeID: c.node, ID: c.id, State: "succeeded", Result: []byte(`{}`)}); err != nil {
			t.Fatal(err)
		}
		if err := q.NodeHello(ctx, db.NodeHelloParams{ID: c.node, DaemonVersion: c.version, Inventory: []byte(`{}`)}); err != nil {
			t.Fatal(err)
		}
	}
}

func upgrade(v string) *workflowsv1.Action {
	return &workflowsv1.Action{Kind: &workflowsv1.Action_Upgrade{Upgrade: &workflowsv1.UpgradeAction{Version: v}}}
}

// run alternates controller runs and daemon answers until the workflow leaves the running
// state, calling check after every run.
func (b *bundle) run(t *testing.T, id uuid.UUID, fail func(uuid.UUID) bool, check func()) db.Workflow {
	t.Helper()
	for range 200 {
		b.reconcile(t, id)
		check()
		if w := b.state(t, id); w.State != workflow.Running {
			return w
		}
		b.daemons(t, fail)
	}
	t.Fatal("the workflow did not finish in 200 runs")
	return db.Workflow{}
}

func TestRollingUpgradeKeepsAtMostMaxParallelOutOfService(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ids := b.nodes(t, 10, "v1.0.0")
	id := b.create(t, upgrade("v2.0.0"), workflow.Policy{MaxParallel: 2}, ids)

	most := 0
	w := b.run(t, id, nil, func() {
		out := b.count(t, `SELECT count(*) FROM nodes WHERE id = ANY($1) AND state <> 'ready'`, ids)
		inFlight := b.count(t, `SELECT count(*) FROM workflow_nodes WHERE workflow_id = $1 AND step IN ('cordon', 'drain', 'act', 'verify', 'uncordon')`, id)
		if out > 2 || inFlight > 2 {
			t.Fatalf("%d nodes out of service, %d in their steps; max_parallel is 2", out, inFlight)
		}
		most = max(most, out)
	})
	if w.State != workflow.Succeeded || w.FinishedAt == nil {
		t.Fatalf("workflow %s (%s)", w.State, w.Reason)
	}
	if most != 2 {
		t.Errorf("at most %d nodes were out of service at once; want 2 (the rollout used its parallelism)", most)
	}
	if n := b.count(t, `SELECT count(*) FROM nodes WHERE id = ANY($1) AND state = 'ready' AND daemon_version = 'v2.0.0'`, ids); n != 10 {
		t.Errorf("%d of 10 nodes ready on v2.0.0", n)
	}
	if n := b.count(t, `SELECT count(DISTINCT node_id) FROM commands WHERE type = 'upgrade' AND node_id = ANY($1)`, ids); n != 10 {
		t.Errorf("upgrade commands went to %d nodes, want 10", n)
	}
	if n := b.count(t, `SELECT count(*) FROM commands WHERE type = 'upgrade'`); n != 10 {
		t.Errorf("%d upgrade commands, want exactly one per node", n)
	}
	if n := b.count(t, `SELECT count(*) FROM workflow_nodes WHERE workflow_id = $1 AND open`, id); n != 0 {
		t.Errorf("a finished workflow still holds %d nodes", n)
	}
	for typ, want := range map[string]int{"workflow.node.started": 10, "workflow.node.succeeded": 10, "workflow.succeeded": 1, "node.cordoned": 10, "node.uncordoned": 10} {
		if n := b.count(t, `SELECT count(*) FROM outbox WHERE type = $1`, typ); n != want {
			t.Errorf("%d %s events, want %d", n, typ, want)
		}
	}
	// Running it again changes nothing.
	b.reconcile(t, id)
	if n := b.count(t, `SELECT count(*) FROM commands`); n != 10 {
		t.Errorf("%d commands after another run", n)
	}
}

func TestFailurePausesUntilResumed(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ids := b.nodes(t, 5, "v1.0.0")
	id := b.create(t, upgrade("v2.0.0"), workflow.Policy{MaxParallel: 1}, ids)
	bad := ids[1]
	w := b.run(t, id, func(n uuid.UUID) bool { return n == bad }, func() {})
	if w.State != workflow.Paused {
		t.Fatalf("workflow %s (%s), want paused", w.State, w.Reason)
	}
	// Nothing more is admitted while it is paused, however often it runs.
	for range 5 {
		b.reconcile(t, id)
		b.daemons(t, nil)
	}
	steps := map[string]int{}
	rows, _ := b.pool.Query(ctx, `SELECT step::text, count(*) FROM workflow_nodes WHERE workflow_id = $1 GROUP BY step`, id)
	for rows.Next() {
		var s string
		var n int
		_ = rows.Scan(&s, &n)
		steps[s] = n
	}
	rows.Close()
	if steps["succeeded"] != 1 || steps["failed"] != 1 || steps["pending"] != 3 {
		t.Fatalf("steps %v: want the first node done, the second failed and the rest not admitted", steps)
	}
	var msg, nodeState string
	if err := b.pool.QueryRow(ctx, `SELECT wn.message, n.state::text FROM workflow_nodes wn JOIN nodes n ON n.id = wn.node_id WHERE wn.workflow_id = $1 AND wn.node_id = $2`, id, bad).Scan(&msg, &nodeState); err != nil {
		t.Fatal(err)
	}
	if nodeState != "cordoned" || msg == "" {
		t.Errorf("failed node is %s with message %q; want it left cordoned, with why", nodeState, msg)
	}

	// Resumed with retry_failed, the failed node starts over with a new attempt (a new command).
	b.exec(t, `UPDATE workflows SET state = 'running', reason = '' WHERE id = $1`, id)
	if _, err := db.New(b.pool).RetryFailedWorkflowNodes(ctx, db.RetryFailedWorkflowNodesParams{TenantID: b.tenant, WorkflowID: id}); err != nil {
		t.Fatal(err)
	}
	w = b.run(t, id, nil, func() {})
	if w.State != workflow.Succeeded {
		t.Fatalf("after resume: %s (%s)", w.State, w.Reason)
	}
	keys := b.count(t, `SELECT count(DISTINCT idempotency_key) FROM commands WHERE node_id = $1`, bad)
	if keys != 2 {
		t.Errorf("the retried node got %d distinct commands, want one per attempt (2)", keys)
	}
	if n := b.count(t, `SELECT count(*) FROM nodes WHERE id = ANY($1) AND state = 'ready' AND daemon_version = 'v2.0.0'`, ids); n != 5 {
		t.Errorf("%d of 5 nodes ready on v2.0.0", n)
	}
}

func TestDrainWaitsForLeasesUntilTheDeadline(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ids := b.nodes(t, 1, "v1.0.0")
	poolID := capacitytest.Pool(t, b.pool, b.tenant, "p", nil, ids...)
	leases := capacitytest.Leases(t, b.pool, b.tenant, poolID, 1, capacitytest.LeaseSpec{CPUs: 1})
	b.exec(t, `UPDATE pool_leases SET state = 'placed', placed_at = now(), ends_at = now() + interval '1 hour' WHERE id = $1`, leases[0])
	b.exec(t, `INSERT INTO allocations (lease_id, node_id, cpus, started_at, metered_until) VALUES ($1, $2, 1, now(), now())`, leases[0], ids[0])

	drain := &workflowsv1.Action{Kind: &workflowsv1.Action_Drain{Drain: &workflowsv1.DrainAction{}}}
	id := b.create(t, drain, workflow.Policy{DrainDeadline: time.Hour}, ids)
	for range 3 {
		b.reconcile(t, id)
	}
	var step, msg string
	if err := b.pool.QueryRow(ctx, `SELECT step::text, message FROM workflow_nodes WHERE workflow_id = $1`, id).Scan(&step, &msg); err != nil {
		t.Fatal(err)
	}
	if step != "drain" {
		t.Fatalf("with a lease on the node the step is %s (%s), want drain", step, msg)
	}
	// The lease ends: the node goes on, and comes back into service.
	b.exec(t, `UPDATE pool_leases SET state = 'released', ended_at = now(), placed_at = placed_at WHERE id = $1`, leases[0])
	b.exec(t, `UPDATE allocations SET ended_at = now() WHERE lease_id = $1`, leases[0])
	w := b.run(t, id, nil, func() {})
	if w.State != workflow.Succeeded {
		t.Fatalf("workflow %s (%s)", w.State, w.Reason)
	}

	// With a deadline of 0 the drain ends the leases at once, as failed, with the reason.
	more := capacitytest.Leases(t, b.pool, b.tenant, poolID, 1, capacitytest.LeaseSpec{CPUs: 1})
	b.exec(t, `UPDATE pool_leases SET state = 'placed', placed_at = now(), ends_at = now() + interval '1 hour' WHERE id = $1`, more[0])
	b.exec(t, `INSERT INTO allocations (lease_id, node_id, cpus, started_at, metered_until) VALUES ($1, $2, 1, now(), now())`, more[0], ids[0])
	id = b.create(t, drain, workflow.Policy{DrainDeadline: 0}, ids)
	if w := b.run(t, id, nil, func() {}); w.State != workflow.Succeeded {
		t.Fatalf("workflow %s (%s)", w.State, w.Reason)
	}
	var state, reason string
	if err := b.pool.QueryRow(ctx, `SELECT state::text, reason FROM pool_leases WHERE id = $1`, more[0]).Scan(&state, &reason); err != nil {
		t.Fatal(err)
	}
	if state != "failed" || reason != fmt.Sprintf("node %s drained by workflow %s", hostname(t, b, ids[0]), id) {
		t.Errorf("lease %s (%q) after the drain deadline", state, reason)
	}
}

// A drain past its deadline fails the placed leases on the node, and frees a preempted lease's
// grace early without failing it: the lease stays preempted, and only the lease the drain failed
// gets a lease.failed event, with every field of the payload.
func TestDrainFailsOnlyLeasesItEnds(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ids := b.nodes(t, 1, "v1.0.0")
	poolID := capacitytest.Pool(t, b.pool, b.tenant, "p", nil, ids...)
	leases := capacitytest.Leases(t, b.pool, b.tenant, poolID, 2, capacitytest.LeaseSpec{CPUs: 1})
	placed, preempted := leases[0], leases[1]
	b.exec(t, `UPDATE pool_leases SET state = 'placed', placed_at = now(), ends_at = now() + interval '1 hour' WHERE id = $1`, placed)
	b.exec(t, `UPDATE pool_leases SET state = 'preempted', reason = 'preempted', placed_at = now(), preempted_at = now(),
		ends_at = now() + interval '30 seconds' WHERE id = $1`, preempted)
	b.exec(t, `INSERT INTO allocations (lease_id, node_id, cpus, started_at, metered_until)
		SELECT id, $2, 1, now(), now() FROM unnest($1::uuid[]) AS id`, leases, ids[0])

	drain := &workflowsv1.Action{Kind: &workflowsv1.Action_Drain{Drain: &workflowsv1.DrainAction{}}}
	id := b.create(t, drain, workflow.Policy{DrainDeadline: 0}, ids)
	if w := b.run(t, id, nil, func() {}); w.State != workflow.Succeeded {
		t.Fatalf("workflow %s (%s)", w.State, w.Reason)
	}
	if n := b.count(t, `SELECT count(*) FROM allocations WHERE lease_id = ANY($1) AND ended_at IS NULL`, leases); n != 0 {
		t.Errorf("%d allocations still held after the drain", n)
	}
	if n := b.count(t, `SELECT count(*) FROM pool_leases WHERE id = $1 AND state = 'preempted' AND reason = 'preempted' AND ended_at IS NOT NULL`, preempted); n != 1 {
		t.Errorf("the preempted lease did not end as preempted with its reason")
	}
	if n := b.count(t, `SELECT count(*) FROM outbox WHERE type LIKE 'lease.%' AND subject = $1`, "lease/"+preempted.String()); n != 0 {
		t.Errorf("%d lease events for the preempted lease, want none", n)
	}
	var (
		tenant uuid.UUID
		got    event.LeaseFailed
		ended  time.Time
	)
	if err := b.pool.QueryRow(ctx, `SELECT o.tenant_id, o.payload, l.ended_at FROM outbox o JOIN pool_leases l ON o.subject = 'lease/' || l.id
		WHERE o.type = 'lease.failed'`).Scan(&tenant, &got, &ended); err != nil {
		t.Fatalf("the one lease.failed event: %v", err)
	}
	want := event.LeaseChange{
		ID: placed, PoolID: poolID, State: "failed", PreviousState: "placed",
		Reason: fmt.Sprintf("node %s drained by workflow %s", hostname(t, b, ids[0]), id), NodeIDs: ids[:1],
	}
	end := got.EndTime
	got.EndTime = nil
	if tenant != b.tenant || !reflect.DeepEqual(got.LeaseChange, want) || end == nil || !end.Equal(ended) {
		t.Errorf("lease.failed of tenant %s: %+v ending %v, want %s: %+v ending %v", tenant, got.LeaseChange, end, b.tenant, want, ended)
	}
}

func TestCancelUncordonsAndSkips(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ids := b.nodes(t, 3, "v1.0.0")
	id := b.create(t, upgrade("v2.0.0"), workflow.Policy{MaxParallel: 1}, ids)
	b.reconcile(t, id) // the first node is cordoned and sent its command
	if n := b.count(t, `SELECT count(*) FROM nodes WHERE id = ANY($1) AND state = 'cordoned'`, ids); n != 1 {
		t.Fatalf("%d nodes cordoned", n)
	}
	b.exec(t, `UPDATE workflows SET state = 'cancelled', finished_at = now() WHERE id = $1`, id)
	b.reconcile(t, id)
	if n := b.count(t, `SELECT count(*) FROM nodes WHERE id = ANY($1) AND state = 'ready'`, ids); n != 3 {
		t.Errorf("%d of 3 nodes ready after the cancel", n)
	}
	if n := b.count(t, `SELECT count(*) FROM workflow_nodes WHERE workflow_id = $1 AND step = 'skipped' AND NOT open`, id); n != 3 {
		t.Errorf("%d of 3 nodes skipped and let go", n)
	}
	if n := b.count(t, `SELECT count(*) FROM commands WHERE state = 'cancelled'`); n != 1 {
		t.Errorf("%d commands cancelled, want the one not yet sent", n)
	}
}

func hostname(t *testing.T, b *bundle, id uuid.UUID) string {
	t.Helper()
	var h string
	if err := b.pool.QueryRow(ctx, `SELECT hostname FROM nodes WHERE id = $1`, id).Scan(&h); err != nil {
		t.Fatal(err)
	}
	return h
}
