package daemon_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/better-compute/better-compute/gateway/gatewaytest"
	"github.com/better-compute/better-compute/gen/db"
	"github.com/better-compute/better-compute/internal/daemon"
	"github.com/better-compute/better-compute/internal/dbtest"
	"github.com/better-compute/better-compute/internal/poll"
)

func TestMain(m *testing.M) { dbtest.Main(m) }

// fakeEnv is a real gateway on a fresh database, for FakeDaemons to hold sessions with.
type fakeEnv struct {
	*gatewaytest.Env
	t  *testing.T
	gw *gatewaytest.Gateway
}

func newFakeEnv(t *testing.T) *fakeEnv {
	t.Helper()
	e := gatewaytest.New(t)
	return &fakeEnv{Env: e, t: t, gw: e.StartGateway("gw1", nil)}
}

// start joins a FakeDaemon as hostname and runs it until the test ends.
func (e *fakeEnv) start(hostname string, opts daemon.FakeOptions) *daemon.Fake {
	e.t.Helper()
	opts.Dialer = daemon.Dialer{Gateway: e.gw.Addr}
	f, err := daemon.JoinFake(e.t.Context(), e.Bundle.RootPEM(), e.Token(1, time.Now().Add(time.Hour)), hostname, opts)
	if err != nil {
		e.t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = f.Run(ctx) }()
	e.t.Cleanup(func() { cancel(); <-done })
	poll.Until(e.t, 10*time.Second, hostname+" connects", func() bool { return f.Status().Connected })
	return f
}

// commandResult is a finished command as the gateway recorded it.
type commandResult struct {
	State  string
	Error  string
	Result map[string]any
}

// run creates a command for f's node, pokes the gateway and waits until it finishes.
func (e *fakeEnv) run(f *daemon.Fake, typ, payload string) commandResult {
	e.t.Helper()
	node := uuid.MustParse(f.Status().NodeID)
	c, err := db.New(e.Pool).CreateCommand(context.Background(), db.CreateCommandParams{
		ID: uuid.Must(uuid.NewV7()), TenantID: e.Tenant, NodeID: node, Type: typ, Payload: []byte(payload),
		IdempotencyKey: uuid.NewString(), Deadline: time.Now().Add(time.Minute),
	})
	if err != nil {
		e.t.Fatal(err)
	}
	e.gw.Poke(node)
	var r commandResult
	poll.Until(e.t, 20*time.Second, typ+" finishes", func() bool {
		var raw []byte
		if err := e.Pool.QueryRow(context.Background(), "SELECT state, error, result FROM commands WHERE id = $1", c.ID).Scan(&r.State, &r.Error, &raw); err != nil {
			e.t.Fatal(err)
		}
		r.Result = nil
		if raw != nil {
			if err := json.Unmarshal(raw, &r.Result); err != nil {
				e.t.Fatal(err)
			}
		}
		return r.State == "succeeded" || r.State == "failed"
	})
	return r
}

// daemonVersion is the version the gateway recorded from the node's last hello.
func (e *fakeEnv) daemonVersion(f *daemon.Fake) string {
	e.t.Helper()
	var v string
	if err := e.Pool.QueryRow(context.Background(), "SELECT daemon_version FROM nodes WHERE id = $1", f.Status().NodeID).Scan(&v); err != nil {
		e.t.Fatal(err)
	}
	return v
}

// TestFakeRunsWorkflowCommands: drain, exec refused while drained, configure, upgrade (a new
// hello with the new version before the result), reboot (a new session after the result),
// undrain and exec, against a real gateway.
func TestFakeRunsWorkflowCommands(t *testing.T) {
	t.Parallel()
	e := newFakeEnv(t)
	f := e.start("fake-work", daemon.FakeOptions{RebootDowntime: 200 * time.Millisecond})
	if v := e.daemonVersion(f); v != daemon.FakeVersion || f.Version() != daemon.FakeVersion {
		t.Fatalf("version %q (gateway %q), want %q", f.Version(), v, daemon.FakeVersion)
	}

	if r := e.run(f, "drain", `{}`); r.State != "succeeded" || r.Result["draining"] != true || !f.Draining() {
		t.Fatalf("drain: %+v, draining %v", r, f.Draining())
	}
	if r := e.run(f, "exec", `{"path": "/bin/true"}`); r.State != "failed" || !strings.HasPrefix(r.Error, "draining: ") {
		t.Errorf("exec while drained: %+v", r)
	}

	r := e.run(f, "configure", `{"config": {"b": 1, "a": {"z": true, "y": "x"}}}`)
	want := "{\n  \"a\": {\n    \"y\": \"x\",\n    \"z\": true\n  },\n  \"b\": 1\n}\n"
	if r.State != "succeeded" || string(f.Config()) != want || r.Result["sha256"] != daemon.ConfigSHA256([]byte(want)) || r.Result["changed"] != true {
		t.Errorf("configure: %+v, config %q", r, f.Config())
	}

	// Upgrade, accepted while drained: the daemon comes back as the new version, whose hello
	// the gateway has recorded by the time the result arrives.
	r = e.run(f, "upgrade", `{"version": "v2.0.0"}`)
	if r.State != "succeeded" || r.Result["version"] != "v2.0.0" || r.Result["previousVersion"] != daemon.FakeVersion {
		t.Fatalf("upgrade: %+v", r)
	}
	if v := e.daemonVersion(f); v != "v2.0.0" || f.Version() != "v2.0.0" {
		t.Errorf("after the upgrade: version %q, gateway %q", f.Version(), v)
	}
	if s := f.Status(); s.Sessions != 2 {
		t.Errorf("after the upgrade: %d sessions, want 2", s.Sessions)
	}
	if r := e.run(f, "upgrade", `{"version": "v2.0.0"}`); r.State != "succeeded" || f.Status().Sessions != 2 {
		t.Errorf("upgrade to the running version: %+v, %d sessions", r, f.Status().Sessions)
	}
	if r := e.run(f, "upgrade", `{"version": "not a version"}`); r.State != "failed" || !strings.Contains(r.Error, "version") {
		t.Errorf("upgrade to a bad version: %+v", r)
	}

	// Reboot: the result, then a new session with the same version.
	r = e.run(f, "reboot", `{}`)
	if r.State != "succeeded" || r.Result["rebooting"] != true {
		t.Fatalf("reboot: %+v", r)
	}
	poll.Until(t, 10*time.Second, "the daemon comes back from the reboot", func() bool {
		s := f.Status()
		return s.Connected && s.Sessions == 3
	})
	var helloAfterResult bool
	if err := e.Pool.QueryRow(context.Background(), `SELECT s.connected_at > c.finished_at FROM node_sessions s, commands c
		WHERE s.node_id = $1 AND c.type = 'reboot'`, f.Status().NodeID).Scan(&helloAfterResult); err != nil {
		t.Fatal(err)
	}
	if !helloAfterResult || e.daemonVersion(f) != "v2.0.0" || !f.Draining() {
		t.Errorf("after the reboot: session after the result %v, version %q, draining %v", helloAfterResult, e.daemonVersion(f), f.Draining())
	}

	if r := e.run(f, "undrain", `{}`); r.State != "succeeded" || f.Draining() {
		t.Errorf("undrain: %+v", r)
	}
	if r := e.run(f, "exec", `{"path": "/bin/true"}`); r.State != "succeeded" || r.Result["exitCode"] != 0.0 || r.Result["stdout"] != "" {
		t.Errorf("exec: %+v", r)
	}
	if n := f.Runs["upgrade"].Load(); n != 3 {
		t.Errorf("%d upgrades run, want 3", n)
	}
}

// TestFakeInjectedFailures: FailNodes picks one daemon, on which every workflow command fails
// as documented; the other's succeed.
func TestFakeInjectedFailures(t *testing.T) {
	t.Parallel()
	e := newFakeEnv(t)
	const downtime = 100 * time.Millisecond
	opts := daemon.FakeOptions{RebootDowntime: downtime, FailRate: 1, Seed: 1, FailNodes: func(h string) bool { return h == "fails" }}
	bad, good := e.start("fails", opts), e.start("works", opts)

	if r := e.run(good, "configure", `{"config": {}}`); r.State != "succeeded" {
		t.Errorf("configure on the other daemon: %+v", r)
	}
	if r := e.run(bad, "configure", `{"config": {}}`); r.State != "failed" || !strings.Contains(r.Error, "injected failure") || bad.Config() != nil {
		t.Errorf("configure: %+v", r)
	}
	if r := e.run(bad, "exec", `{"path": "/bin/true"}`); r.State != "failed" || r.Error != "exec /bin/true: exit status 1" || r.Result["exitCode"] != 1.0 {
		t.Errorf("exec: %+v", r)
	}

	// A failed upgrade is rolled back: the daemon comes back as the old version and says so.
	r := e.run(bad, "upgrade", `{"version": "v3"}`)
	if r.State != "failed" || !strings.Contains(r.Error, "rolled back: the new binary held no session within") {
		t.Errorf("upgrade: %+v", r)
	}
	if s := bad.Status(); bad.Version() != daemon.FakeVersion || e.daemonVersion(bad) != daemon.FakeVersion || s.Sessions != 2 {
		t.Errorf("after the failed upgrade: version %q (gateway %q), %d sessions", bad.Version(), e.daemonVersion(bad), s.Sessions)
	}

	// A failed reboot succeeds but takes ten times as long.
	if r := e.run(bad, "reboot", `{}`); r.State != "succeeded" {
		t.Fatalf("reboot: %+v", r)
	}
	poll.Until(t, 10*time.Second, "the daemon goes down", func() bool { return !bad.Status().Connected })
	took := poll.Until(t, 20*time.Second, "the daemon comes back", func() bool {
		s := bad.Status()
		return s.Connected && s.Sessions == 3
	})
	if took < 9*downtime {
		t.Errorf("back after %v, want about %v", took, 10*downtime)
	}
	if r := e.run(good, "upgrade", `{"version": "v3"}`); r.State != "succeeded" || good.Version() != "v3" {
		t.Errorf("upgrade on the other daemon: %+v", r)
	}
}
