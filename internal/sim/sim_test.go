package sim_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/better-compute/better-compute/gateway"
	"github.com/better-compute/better-compute/gateway/gatewaytest"
	"github.com/better-compute/better-compute/gen/db"
	daemonv1 "github.com/better-compute/better-compute/gen/go/bettercompute/daemon/v1"
	"github.com/better-compute/better-compute/internal/command"
	"github.com/better-compute/better-compute/internal/daemon"
	"github.com/better-compute/better-compute/internal/dbtest"
	"github.com/better-compute/better-compute/internal/poll"
	"github.com/better-compute/better-compute/internal/sim"
	"github.com/better-compute/better-compute/server"
	"github.com/better-compute/better-compute/server/servertest"
)

func TestMain(m *testing.M) { dbtest.Main(m) }

var ctx = context.Background()

// logBuffer collects a gateway's JSON log lines.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

// records are the log records with message msg.
func (l *logBuffer) records(msg string) []map[string]any {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []map[string]any
	sc := bufio.NewScanner(bytes.NewReader(l.buf.Bytes()))
	for sc.Scan() {
		var r map[string]any
		if json.Unmarshal(sc.Bytes(), &r) == nil && r["msg"] == msg {
			out = append(out, r)
		}
	}
	return out
}

// runFleet runs a fleet until the test ends.
func runFleet(t *testing.T, opts sim.Options) *sim.Fleet {
	t.Helper()
	f, err := sim.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	fctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); _ = f.Run(fctx) }()
	t.Cleanup(func() { cancel(); <-done })
	return f
}

func waitConnected(t *testing.T, f *sim.Fleet) sim.Stats {
	t.Helper()
	wctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	s, err := f.WaitConnected(wctx)
	if err != nil {
		t.Fatalf("the fleet did not connect: %v; %+v; join errors %v", err, s, f.JoinErrors())
	}
	return s
}

func TestFleetJoinsReconnectsAndReportsSkew(t *testing.T) {
	t.Parallel()
	e := gatewaytest.New(t)
	logs := &logBuffer{}
	gw := e.StartGateway("gw1", func(o *gateway.Options) { o.Logger = slog.New(slog.NewJSONHandler(logs, nil)) })
	const n = 20
	scenario, err := sim.ParseScenario([]byte(`{"faults":[{"kind":"skew","count":3,"skew":"-90s"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	f := runFleet(t, sim.Options{
		Gateway: gw.Addr, RootPEM: e.Bundle.RootPEM(), Token: e.Token(n, time.Now().Add(time.Hour)),
		N: n, Seed: 7, Scenario: scenario, JoinConcurrency: 8,
	})
	s := waitConnected(t, f)
	if s.Joins != n || s.JoinErrors != 0 || s.Connected != n {
		t.Fatalf("stats %+v, join errors %v", s, f.JoinErrors())
	}
	t.Logf("%d machines joined in %v (%.0f joins/s)", s.Joins, s.JoinElapsed, s.JoinRate())

	// Every machine is a node with the inventory it reported, and the fleet is varied.
	models := map[string]int{}
	gpuUUIDs := map[string]bool{}
	shapes := map[[2]int32]bool{}
	for i := range n {
		m := f.Machine(i)
		var hostname string
		var raw []byte
		if err := e.Pool.QueryRow(ctx, "SELECT hostname, inventory FROM nodes WHERE id = $1", m.NodeID).Scan(&hostname, &raw); err != nil {
			t.Fatalf("%s: %v", m.Hostname, err)
		}
		var inv daemonv1.Inventory
		if err := protojson.Unmarshal(raw, &inv); err != nil {
			t.Fatal(err)
		}
		if hostname != sim.Hostname("sim", i) || inv.GetHostname() != hostname || inv.GetCpus() != m.Inventory.GetCpus() || len(inv.GetGpus()) != len(m.Inventory.GetGpus()) {
			t.Errorf("node %s: hostname %q, inventory %v; want %v", m.NodeID, hostname, &inv, m.Inventory)
		}
		if c := inv.GetCpus(); c < 8 || c > 192 || inv.GetMemoryBytes() <= 0 || len(inv.GetDisks()) == 0 || len(inv.GetNics()) == 0 {
			t.Errorf("%s: implausible inventory %v", hostname, &inv)
		}
		shapes[[2]int32{inv.GetCpus(), int32(len(inv.GetGpus()))}] = true
		models[""]++
		for _, g := range inv.GetGpus() {
			models[g.GetModel()]++
			if gpuUUIDs[g.GetUuid()] {
				t.Errorf("GPU UUID %s twice", g.GetUuid())
			}
			gpuUUIDs[g.GetUuid()] = true
		}
	}
	if len(models) < 3 || len(shapes) < 5 {
		t.Errorf("fleet not varied: GPU models %v, %d shapes", models, len(shapes))
	}

	// The skewed machines' clocks show in the gateway's report of their hellos.
	skewed := 0
	for i := range n {
		m := f.Machine(i)
		if m.Skew == 0 {
			continue
		}
		skewed++
		found := false
		for _, r := range logs.records("session started") {
			if r["node_id"] == m.NodeID {
				got := time.Duration(r["clock_skew"].(float64))
				if got > -85*time.Second || got < -95*time.Second {
					t.Errorf("%s: clock_skew %v, want about -90s", m.Hostname, got)
				}
				found = true
			}
		}
		if !found {
			t.Errorf("%s: no session start logged", m.Hostname)
		}
	}
	if skewed != 3 {
		t.Errorf("%d machines skewed, want 3", skewed)
	}
	if w := len(logs.records("the daemon's clock is off")); w < 3 {
		t.Errorf("%d clock warnings, want 3", w)
	}

	// A broken connection: the daemons reconnect with the same identity.
	if got := f.Disconnect(0, 1); got != 2 {
		t.Errorf("disconnected %d, want 2", got)
	}
	poll.Until(t, 15*time.Second, "the disconnected machines reconnect", func() bool {
		a, b := f.Machine(0), f.Machine(1)
		return a.Connected && a.Sessions == 2 && b.Connected && b.Sessions == 2
	})

	// A crash: the gateway sees the session die; a new daemon with the same identity comes
	// back without joining again.
	crashed := f.Machine(2)
	if !f.Crash(2) {
		t.Fatal("machine 2 was not up")
	}
	if m := f.Machine(2); m.Up || m.Connected {
		t.Fatalf("crashed machine: %+v", m)
	}
	poll.Until(t, 10*time.Second, "the gateway drops the crashed machine's session", func() bool { return gw.Sessions() == n-1 })
	if err := f.Restart(2); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, 15*time.Second, "the restarted machine reconnects", func() bool {
		m := f.Machine(2)
		return m.Up && m.Connected && m.Sessions == crashed.Sessions+1
	})
	poll.Until(t, 10*time.Second, "the gateway holds every session", func() bool { return gw.Sessions() == n })
	if m := f.Machine(2); m.NodeID != crashed.NodeID {
		t.Errorf("node %s came back as %s", crashed.NodeID, m.NodeID)
	}
	var nodes int
	if err := e.Pool.QueryRow(ctx, "SELECT count(*) FROM nodes").Scan(&nodes); err != nil || nodes != n {
		t.Errorf("%d nodes (%v), want %d", nodes, err, n)
	}

	// The machines run commands.
	node := uuid.MustParse(f.Machine(2).NodeID)
	c, err := db.New(e.Pool).CreateCommand(ctx, db.CreateCommandParams{
		ID: uuid.Must(uuid.NewV7()), TenantID: e.Tenant, NodeID: node, Type: "echo", Payload: []byte(`{"data":{"x":1}}`),
		IdempotencyKey: "k", Deadline: time.Now().Add(time.Minute),
	})
	if err != nil {
		t.Fatal(err)
	}
	gw.Poke(node)
	poll.Until(t, 10*time.Second, "the command succeeds", func() bool {
		var state string
		_ = e.Pool.QueryRow(ctx, "SELECT state FROM commands WHERE id = $1", c.ID).Scan(&state)
		return state == "succeeded"
	})
	s = f.Stats()
	if s.Commands != 1 || s.Reconnects != 3 || s.Disconnects != 2 || s.Crashes != 1 || s.Down != 0 {
		t.Errorf("stats %+v", s)
	}
}

func TestScenarioFaults(t *testing.T) {
	t.Parallel()
	e := gatewaytest.New(t)
	gw := e.StartGateway("gw1", nil)
	const n = 8
	scenario, err := sim.ParseScenario([]byte(`
faults:
  - {kind: disconnect, count: 2}
  - {kind: crash, count: 1, for: 300ms}
  - {kind: flap, count: 1, every: 1s, for: 2500ms}
  - {kind: latency, fraction: 0.25, delay: 20ms}
`))
	if err != nil {
		t.Fatal(err)
	}
	f := runFleet(t, sim.Options{
		Gateway: gw.Addr, RootPEM: e.Bundle.RootPEM(), Token: e.Token(n, time.Now().Add(time.Hour)), N: n, Seed: 3, Scenario: scenario,
	})
	// Flapping hits its machine up to 3 times (at 0s, 1s and 2s); the other faults once. The
	// commands below go out only once nothing more is injected: no command sweep runs here to
	// resend one sent to a session that a later flap ends.
	poll.Until(t, 30*time.Second, "the faults are injected", func() bool {
		s := f.Stats()
		return s.Injecting == 0 && s.Crashes == 1 && s.Disconnects >= 3
	})
	poll.Until(t, 30*time.Second, "every machine is back", func() bool {
		s := f.Stats()
		return s.Connected == n && s.Down == 0 && gw.Sessions() == n
	})
	// The machines with latency still hold sessions and run commands.
	for i := range n {
		m := f.Machine(i)
		node := uuid.MustParse(m.NodeID)
		if _, err := db.New(e.Pool).CreateCommand(ctx, db.CreateCommandParams{
			ID: uuid.Must(uuid.NewV7()), TenantID: e.Tenant, NodeID: node, Type: "echo", Payload: []byte(`{}`),
			IdempotencyKey: "k", Deadline: time.Now().Add(time.Minute),
		}); err != nil {
			t.Fatal(err)
		}
		gw.Poke(node)
	}
	poll.Until(t, 20*time.Second, "every command succeeds", func() bool {
		var done int
		_ = e.Pool.QueryRow(ctx, "SELECT count(*) FROM commands WHERE state = 'succeeded'").Scan(&done)
		return done == n
	})
	t.Logf("stats %+v", f.Stats())
}

func TestStateDirKeepsIdentities(t *testing.T) {
	t.Parallel()
	e := gatewaytest.New(t)
	gw := e.StartGateway("gw1", nil)
	dir := t.TempDir()
	token := e.Token(3, time.Now().Add(time.Hour))
	opts := sim.Options{Gateway: gw.Addr, RootPEM: e.Bundle.RootPEM(), Token: token, N: 3, StateDir: dir, Prefix: "keep"}
	first, err := sim.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	fctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); _ = first.Run(fctx) }()
	waitConnected(t, first)
	ids := []string{first.Machine(0).NodeID, first.Machine(1).NodeID, first.Machine(2).NodeID}
	cancel()
	<-done

	// The token is used up: the second fleet can only come back with the kept identities.
	second := runFleet(t, opts)
	s := waitConnected(t, second)
	if s.Reused != 3 || s.Joins != 0 {
		t.Fatalf("stats %+v, join errors %v", s, second.JoinErrors())
	}
	for i, id := range ids {
		if got := second.Machine(i).NodeID; got != id {
			t.Errorf("machine %d is node %s, was %s", i, got, id)
		}
	}
}

func TestLoadThroughTheAPI(t *testing.T) {
	t.Parallel()
	pool := dbtest.Pool(t)
	e := gatewaytest.NewOn(t, pool)
	gw := e.StartGateway("gw1", func(o *gateway.Options) { o.DispatchInterval = time.Hour }) // only pokes deliver
	notifier, err := gateway.NewNotifier(pool, e.Bundle, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(notifier.Wait)
	api := servertest.Start(t, pool, func(o *server.Options) { o.Notifier = notifier })
	load, err := sim.NewLoad(sim.LoadOptions{Commands: sim.CommandsClient(api.URL, api.AdminKey), Rate: 40, Duration: time.Second, Settle: 20 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	f := runFleet(t, sim.Options{
		Gateway: gw.Addr, RootPEM: e.Bundle.RootPEM(), Token: e.Token(4, time.Now().Add(time.Hour)), N: 4,
		Handlers: map[string]daemon.Handler{command.Echo: load.Echo},
	})
	waitConnected(t, f)
	res, err := load.Run(ctx, f.NodeIDs())
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("load: %+v\nround trip %v\ndelivered %v\ncreate call %v", res, res.RoundTrip, res.Delivered, res.CreateCall)
	if res.Planned != 40 || res.Created != 40 || res.Succeeded != 40 || res.CreateErrors != 0 || res.Skipped != 0 {
		t.Fatalf("load result %+v", res)
	}
	if res.RoundTrip.N != 40 || res.Delivered.N != 40 || res.RoundTrip.P50 <= 0 || res.Delivered.P50 > res.RoundTrip.Max {
		t.Errorf("latencies: round trip %v, delivered %v", res.RoundTrip, res.Delivered)
	}
	if s := f.Stats(); s.Commands != 40 {
		t.Errorf("the daemons ran %d commands, want 40", s.Commands)
	}
}

// TestRenewalLeavesOneConnection: a daemon that renews its certificate during a session uses a
// new connection for its next session, and the old one is closed, not left idle.
func TestRenewalLeavesOneConnection(t *testing.T) {
	t.Parallel()
	e := gatewaytest.New(t)
	gw := e.StartGateway("gw1", func(o *gateway.Options) { o.CertTTL = 6 * time.Second }) // renewed after 4s
	f := runFleet(t, sim.Options{Gateway: gw.Addr, RootPEM: e.Bundle.RootPEM(), Token: e.Token(1, time.Now().Add(time.Hour)), N: 1})
	waitConnected(t, f)
	node := f.Machine(0).NodeID
	var first time.Time
	if err := e.Pool.QueryRow(ctx, "SELECT cert_not_after FROM nodes WHERE id = $1", node).Scan(&first); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, 15*time.Second, "the certificate is renewed", func() bool {
		var now time.Time
		_ = e.Pool.QueryRow(ctx, "SELECT cert_not_after FROM nodes WHERE id = $1", node).Scan(&now)
		return now.After(first)
	})
	if m := f.Machine(0); m.Sessions != 1 || m.Conns != 1 {
		t.Fatalf("after the renewal: %d sessions, %d connections", m.Sessions, m.Conns)
	}
	// Another session claims the node: the gateway ends this one with a goodbye, leaving the
	// connection up, and the daemon opens its next session with the renewed certificate.
	if _, err := e.Pool.Exec(ctx, "UPDATE node_sessions SET session_id = 'elsewhere' WHERE node_id = $1", node); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, 15*time.Second, "the daemon holds its next session on one connection", func() bool {
		m := f.Machine(0)
		return m.Connected && m.Sessions == 2 && m.Conns == 1
	})
}

// TestWorkflowCommands: the machines run a workflow's commands, an upgrade survives a crash,
// a reboot brings a new session, and FailRate fails the chosen types.
func TestWorkflowCommands(t *testing.T) {
	t.Parallel()
	e := gatewaytest.New(t)
	gw := e.StartGateway("gw1", nil)
	f := runFleet(t, sim.Options{
		Gateway: gw.Addr, RootPEM: e.Bundle.RootPEM(), Token: e.Token(3, time.Now().Add(time.Hour)), N: 3,
		RebootDowntime: 100 * time.Millisecond, FailRate: 1, FailTypes: []string{command.Configure},
	})
	waitConnected(t, f)
	run := func(i int, typ, payload string) (state, errMsg string) {
		t.Helper()
		node := uuid.MustParse(f.Machine(i).NodeID)
		c, err := db.New(e.Pool).CreateCommand(ctx, db.CreateCommandParams{
			ID: uuid.Must(uuid.NewV7()), TenantID: e.Tenant, NodeID: node, Type: typ, Payload: []byte(payload),
			IdempotencyKey: uuid.NewString(), Deadline: time.Now().Add(time.Minute),
		})
		if err != nil {
			t.Fatal(err)
		}
		gw.Poke(node)
		poll.Until(t, 20*time.Second, typ+" finishes", func() bool {
			_ = e.Pool.QueryRow(ctx, "SELECT state, error FROM commands WHERE id = $1", c.ID).Scan(&state, &errMsg)
			return state == "succeeded" || state == "failed"
		})
		return state, errMsg
	}
	version := func(i int) string {
		t.Helper()
		var v string
		if err := e.Pool.QueryRow(ctx, "SELECT daemon_version FROM nodes WHERE id = $1", f.Machine(i).NodeID).Scan(&v); err != nil {
			t.Fatal(err)
		}
		return v
	}

	if s, msg := run(0, "upgrade", `{"version": "v2.0.0"}`); s != "succeeded" || version(0) != "v2.0.0" || f.Machine(0).Version != "v2.0.0" {
		t.Fatalf("upgrade: %s %q; version %q, machine %+v", s, msg, version(0), f.Machine(0))
	}
	// The upgraded binary is what the machine runs after a crash.
	if !f.Crash(0) {
		t.Fatal("machine 0 was not up")
	}
	if err := f.Restart(0); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, 15*time.Second, "the crashed machine is back", func() bool {
		m := f.Machine(0)
		return m.Connected && m.Sessions == 3
	})
	if v := version(0); v != "v2.0.0" {
		t.Errorf("after the crash: version %q", v)
	}

	if s, msg := run(1, "drain", `{}`); s != "succeeded" || !f.Machine(1).Draining {
		t.Errorf("drain: %s %q", s, msg)
	}
	if s, msg := run(1, "reboot", `{}`); s != "succeeded" {
		t.Errorf("reboot: %s %q", s, msg)
	}
	poll.Until(t, 15*time.Second, "the rebooted machine is back", func() bool {
		m := f.Machine(1)
		return m.Connected && m.Sessions == 2
	})
	if s, msg := run(2, "configure", `{"config": {"a": 1}}`); s != "failed" || !strings.Contains(msg, "injected failure") {
		t.Errorf("configure: %s %q", s, msg)
	}
	if s, msg := run(2, "exec", `{"path": "/bin/true"}`); s != "succeeded" {
		t.Errorf("exec: %s %q", s, msg)
	}
	if st := f.Stats(); st.Reconnects != 3 || st.Commands != 5 {
		t.Errorf("stats %+v", st)
	}
}
