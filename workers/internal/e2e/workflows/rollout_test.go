// Package workflows_test runs workflows end to end: a real gateway, FakeDaemons that speak the
// real protocol and change version, reboot and fail as asked, the API, and the workflow
// controller in a separate process (this test binary, re-executed) that the tests kill with
// SIGKILL mid-rollout and replace.
package workflows_test

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/better-compute/better-compute/gateway"
	"github.com/better-compute/better-compute/gateway/gatewaytest"
	workflowsv1 "github.com/better-compute/better-compute/gen/go/bettercompute/workflows/v1"
	"github.com/better-compute/better-compute/gen/go/bettercompute/workflows/v1/workflowsv1connect"
	"github.com/better-compute/better-compute/internal/command"
	"github.com/better-compute/better-compute/internal/daemon"
	"github.com/better-compute/better-compute/internal/dbtest"
	"github.com/better-compute/better-compute/internal/locks"
	"github.com/better-compute/better-compute/internal/poll"
	"github.com/better-compute/better-compute/server/servertest"
	"github.com/better-compute/better-compute/workers"
	"github.com/better-compute/better-compute/workers/internal/nodecontrol"
	"github.com/better-compute/better-compute/workers/internal/workflows"
	"github.com/better-compute/better-compute/workers/workerstest"
)

// controllerEnv names the database a re-executed test binary runs the controllers role on.
const controllerEnv = "BC_E2E_WORKFLOW_CONTROLLER_DB"

func TestMain(m *testing.M) {
	if url := os.Getenv(controllerEnv); url != "" {
		runController(url)
		return
	}
	dbtest.Main(m)
}

var ctx = context.Background()

// runController is the child process: the controllers role with the node reconcilers, the
// liveness job and the workflow controller, as `serve --roles controllers` assembles them, until
// it is killed.
func runController(url string) {
	pool, err := pgxpool.New(ctx, url)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	regs := append(nodecontrol.Reconcilers(pool, nodecontrol.Options{Logger: log}),
		workflows.Reconciler(pool, workflows.Options{Poll: 100 * time.Millisecond, Logger: log}))
	rt := workerstest.New(workerstest.Options{
		Pool: pool, Roles: []string{workers.RoleControllers}, Reconcilers: regs,
		Jobs: map[string][]locks.Job{workers.RoleControllers: {
			nodecontrol.LivenessJob(pool, nodecontrol.LivenessOptions{Interval: 100 * time.Millisecond, Threshold: 5 * time.Second, Logger: log}),
		}},
	})
	rt.Run(ctx)
}

// controller starts the controller process; kill stops it with SIGKILL.
func controller(t *testing.T, url string) (kill func()) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), controllerEnv+"="+url)
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	kill = sync.OnceFunc(func() {
		_ = cmd.Process.Signal(syscall.SIGKILL)
		_ = cmd.Wait()
	})
	t.Cleanup(kill)
	return kill
}

// fleet is a database, a gateway, n FakeDaemons on it and the API.
type fleet struct {
	url   string
	pool  *pgxpool.Pool
	api   workflowsv1connect.WorkflowsServiceClient
	fakes []*daemon.Fake
}

func newFleet(t *testing.T, n int, opts daemon.FakeOptions) *fleet {
	t.Helper()
	url := dbtest.URL(t)
	pool, err := pgxpool.New(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	e := gatewaytest.NewOn(t, pool)
	gw := e.StartGateway("gw1", func(o *gateway.Options) { o.DispatchInterval = 100 * time.Millisecond })
	api := servertest.Start(t, pool, nil)
	f := &fleet{url: url, pool: pool, api: workflowsv1connect.NewWorkflowsServiceClient(api.HTTPClient(api.AdminKey), api.URL)}
	token := e.Token(int32(n), time.Now().Add(time.Hour))
	rctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	t.Cleanup(func() { cancel(); wg.Wait() })
	for i := range n {
		o := opts
		o.Dialer = daemon.Dialer{Gateway: gw.Addr}
		o.RebootDowntime = 200 * time.Millisecond
		fk, err := daemon.JoinFake(ctx, e.Bundle.RootPEM(), token, fmt.Sprintf("node-%02d", i), o)
		if err != nil {
			t.Fatal(err)
		}
		f.fakes = append(f.fakes, fk)
		wg.Go(func() { _ = fk.Run(rctx) })
	}
	poll.Until(t, 30*time.Second, "every daemon is ready", func() bool {
		return f.count(t, `SELECT count(*) FROM nodes WHERE state = 'ready' AND daemon_version = $1`, daemon.FakeVersion) == n
	})
	return f
}

func (f *fleet) count(t *testing.T, sql string, args ...any) int {
	t.Helper()
	var n int
	if err := f.pool.QueryRow(ctx, sql, args...).Scan(&n); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	return n
}

func (f *fleet) get(t *testing.T, id string) *workflowsv1.GetResponse {
	t.Helper()
	res, err := f.api.Get(ctx, &workflowsv1.GetRequest{Id: id})
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// watchOutOfService counts, every 20 ms until the test ends, the nodes not in service (not ready
// or offline) and returns a function reporting the most seen at once.
func (f *fleet) watchOutOfService(t *testing.T) func() int {
	t.Helper()
	var most atomic.Int64
	rctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		for rctx.Err() == nil {
			var n int64
			if err := f.pool.QueryRow(rctx, `SELECT count(*) FROM nodes WHERE state <> 'ready' OR NOT online`).Scan(&n); err == nil && n > most.Load() {
				most.Store(n)
			}
			select {
			case <-rctx.Done():
			case <-time.After(20 * time.Millisecond):
			}
		}
	}()
	t.Cleanup(func() { cancel(); <-done })
	return func() int { return int(most.Load()) }
}

func upgrade(v string) *workflowsv1.Action {
	return &workflowsv1.Action{Kind: &workflowsv1.Action_Upgrade{Upgrade: &workflowsv1.UpgradeAction{Version: v}}}
}

func TestRollingUpgradeSurvivesTheControllerDying(t *testing.T) {
	t.Parallel()
	f := newFleet(t, 10, daemon.FakeOptions{})
	kill := controller(t, f.url)
	poll.Until(t, 30*time.Second, "the liveness job marks every node online", func() bool {
		return f.count(t, `SELECT count(*) FROM nodes WHERE online`) == 10
	})
	most := f.watchOutOfService(t)

	res, err := f.api.Create(ctx, &workflowsv1.CreateRequest{
		Name: "fleet to v2", Action: upgrade("v2.0.0"),
		Target: &workflowsv1.Target{LabelSelector: map[string]string{"zone": "a"}},
		Policy: &workflowsv1.Policy{MaxParallel: 2},
	})
	if err != nil {
		t.Fatal(err)
	}
	id := res.GetWorkflow().GetId()
	poll.Until(t, 60*time.Second, "three nodes are upgraded", func() bool {
		return f.get(t, id).GetWorkflow().GetCounts().GetSucceeded() >= 3
	})
	kill() // SIGKILL, mid-rollout
	if c := f.get(t, id).GetWorkflow().GetCounts(); c.GetSucceeded() == 10 {
		t.Fatalf("the rollout finished before the controller was killed: %v", c)
	}
	controller(t, f.url)
	poll.Until(t, 90*time.Second, "the workflow succeeds", func() bool {
		st := f.get(t, id).GetWorkflow().GetState()
		if st == "paused" || st == "failed" {
			t.Fatalf("workflow %s: %v", st, f.get(t, id))
		}
		return st == "succeeded"
	})

	if n := most(); n > 2 {
		t.Errorf("%d nodes were out of service at once; max_parallel is 2", n)
	}
	if n := f.count(t, `SELECT count(*) FROM nodes WHERE state = 'ready' AND daemon_version = 'v2.0.0'`); n != 10 {
		t.Errorf("%d of 10 nodes ready on v2.0.0", n)
	}
	if n := f.count(t, `SELECT count(*) FROM (SELECT node_id FROM commands WHERE type = 'upgrade' GROUP BY node_id HAVING count(*) = 1) x`); n != 10 {
		t.Errorf("%d of 10 nodes got exactly one upgrade command", n)
	}
	for _, fk := range f.fakes {
		if fk.Version() != "v2.0.0" || fk.Runs[command.Upgrade].Load() != 1 {
			t.Errorf("daemon on %s ran %d upgrades", fk.Version(), fk.Runs[command.Upgrade].Load())
		}
	}
}

func TestFailedNodePausesTheRollout(t *testing.T) {
	t.Parallel()
	var failing atomic.Bool
	failing.Store(true)
	f := newFleet(t, 5, daemon.FakeOptions{FailRate: 1, FailTypes: []string{"upgrade"},
		FailNodes: func(host string) bool { return host == "node-01" && failing.Load() }})
	controller(t, f.url)
	res, err := f.api.Create(ctx, &workflowsv1.CreateRequest{
		Action: upgrade("v2.0.0"), Target: &workflowsv1.Target{LabelSelector: map[string]string{"zone": "a"}},
		Policy: &workflowsv1.Policy{MaxParallel: 1, MaxFailures: 0},
	})
	if err != nil {
		t.Fatal(err)
	}
	id := res.GetWorkflow().GetId()
	poll.Until(t, 60*time.Second, "the workflow pauses at the failure", func() bool {
		return f.get(t, id).GetWorkflow().GetState() == "paused"
	})
	got := f.get(t, id)
	if c := got.GetWorkflow().GetCounts(); c.GetFailed() != 1 || c.GetPending() != 3 || c.GetInProgress() != 0 {
		t.Fatalf("counts %v after the pause: want 1 done, 1 failed, 3 not admitted", c)
	}
	// The controller runs again (a resync, a wake) and still admits nothing.
	if _, err := f.pool.Exec(ctx, `INSERT INTO reconcile_queue (kind, key) VALUES ('workflow', $1) ON CONFLICT (kind, key) DO UPDATE SET due_at = now()`, id); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, 10*time.Second, "the controller looks at the paused workflow again", func() bool {
		return f.count(t, `SELECT count(*) FROM reconcile_queue WHERE kind = 'workflow' AND key = $1 AND due_at <= now()`, id) == 0
	})
	if c := f.get(t, id).GetWorkflow().GetCounts(); c.GetPending() != 3 {
		t.Fatalf("a paused workflow admitted nodes: %v", c)
	}
	if n := f.count(t, `SELECT count(*) FROM commands WHERE type = 'upgrade'`); n != 2 {
		t.Errorf("%d upgrade commands while paused after the second node, want 2", n)
	}

	failing.Store(false)
	if _, err := f.api.Resume(ctx, &workflowsv1.ResumeRequest{Id: id, RetryFailed: true}); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, 60*time.Second, "the resumed workflow succeeds", func() bool {
		return f.get(t, id).GetWorkflow().GetState() == "succeeded"
	})
	if n := f.count(t, `SELECT count(*) FROM nodes WHERE state = 'ready' AND daemon_version = 'v2.0.0'`); n != 5 {
		t.Errorf("%d of 5 nodes ready on v2.0.0", n)
	}
}

func TestRebootWorkflowWaitsForEachNodeToComeBack(t *testing.T) {
	t.Parallel()
	f := newFleet(t, 3, daemon.FakeOptions{})
	controller(t, f.url)
	poll.Until(t, 30*time.Second, "the liveness job marks every node online", func() bool {
		return f.count(t, `SELECT count(*) FROM nodes WHERE online`) == 3
	})
	res, err := f.api.Create(ctx, &workflowsv1.CreateRequest{
		Action: &workflowsv1.Action{Kind: &workflowsv1.Action_Reboot{Reboot: &workflowsv1.RebootAction{}}},
		Target: &workflowsv1.Target{LabelSelector: map[string]string{"zone": "a"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	poll.Until(t, 60*time.Second, "the reboot workflow succeeds", func() bool {
		w := f.get(t, res.GetWorkflow().GetId()).GetWorkflow()
		if w.GetState() == "paused" {
			t.Fatalf("paused: %s", w.GetReason())
		}
		return w.GetState() == "succeeded"
	})
	for _, fk := range f.fakes {
		if n := fk.Runs[command.Reboot].Load(); n != 1 || fk.Status().Sessions < 2 {
			t.Errorf("daemon rebooted %d times and held %d sessions; want one reboot and a new session after it", n, fk.Status().Sessions)
		}
	}
	if n := f.count(t, `SELECT count(*) FROM nodes WHERE state = 'ready'`); n != 3 {
		t.Errorf("%d of 3 nodes ready after the reboots", n)
	}
}
