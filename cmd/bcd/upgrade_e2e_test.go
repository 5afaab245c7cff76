package main_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/better-compute/better-compute/gateway"
	"github.com/better-compute/better-compute/gateway/gatewaytest"
	commandsv1 "github.com/better-compute/better-compute/gen/go/bettercompute/commands/v1"
	"github.com/better-compute/better-compute/gen/go/bettercompute/commands/v1/commandsv1connect"
	nodesv1 "github.com/better-compute/better-compute/gen/go/bettercompute/nodes/v1"
	"github.com/better-compute/better-compute/gen/go/bettercompute/nodes/v1/nodesv1connect"
	workflowsv1 "github.com/better-compute/better-compute/gen/go/bettercompute/workflows/v1"
	"github.com/better-compute/better-compute/gen/go/bettercompute/workflows/v1/workflowsv1connect"
	"github.com/better-compute/better-compute/internal/daemon/host"
	"github.com/better-compute/better-compute/internal/daemon/state"
	"github.com/better-compute/better-compute/internal/locks"
	"github.com/better-compute/better-compute/internal/poll"
	"github.com/better-compute/better-compute/internal/release"
	"github.com/better-compute/better-compute/server"
	"github.com/better-compute/better-compute/server/servertest"
	"github.com/better-compute/better-compute/workers"
	"github.com/better-compute/better-compute/workers/workerstest"
)

// TestUpgradeEndToEnd upgrades the real bcd (through commands/create, then an upgrade workflow),
// from signed releases served
// on loopback, under a supervisor that restarts it whenever it exits (as systemd's
// Restart=always does):
//
//   - a release signed by another key fails, naming the key, with nothing fetched beyond the
//     checksums and nothing replaced;
//   - a release whose signed SHA256SUMS does not match its binary fails with a checksum mismatch;
//   - a release whose binary answers "version" but exits at once otherwise is exec'd, exits,
//     and the old binary, started again, reports the command failed with the reason;
//   - a good release, rolled out by an upgrade workflow, is exec'd in place (same PID), holds a
//     session, replaces the binary on disk and reports the command succeeded; the node reports
//     the new version and is back in service.
func TestUpgradeEndToEnd(t *testing.T) {
	t.Parallel()
	bins := buildBcd(t, "up-1", "up-2")
	bcd := bins[0]
	v1, err := os.ReadFile(bcd)
	if err != nil {
		t.Fatal(err)
	}
	v2, err := os.ReadFile(bins[1])
	if err != nil {
		t.Fatal(err)
	}
	quitter := buildQuitter(t, "up-bad")

	env := gatewaytest.New(t)
	notifier, err := gateway.NewNotifier(env.Pool, env.Bundle, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(notifier.Wait)
	api := servertest.Start(t, env.Pool, func(o *server.Options) { o.Notifier = notifier })
	client := api.HTTPClient(api.AdminKey)
	nodes := nodesv1connect.NewNodesServiceClient(client, api.URL)
	commands := commandsv1connect.NewCommandsServiceClient(client, api.URL)
	gw := startGateway(t, env, "127.0.0.1:0")
	work := t.TempDir()
	stateDir, nodeID := joinBcd(t, bcd, work, env, gw.addr)

	pub, key, err := release.GenerateKey(nil)
	if err != nil {
		t.Fatal(err)
	}
	_, otherKey, err := release.GenerateKey(nil)
	if err != nil {
		t.Fatal(err)
	}
	keyFile := filepath.Join(work, "release.pub")
	if err := os.WriteFile(keyFile, pub.Encode(), 0o644); err != nil {
		t.Fatal(err)
	}
	rs := newReleases(t)
	rs.publish(t, key, "up-2", v2, nil)
	rs.publish(t, otherKey, "up-other", v2, nil)
	rs.publish(t, key, "up-3", v2, func(bin []byte) []byte { return v1 })
	rs.publish(t, key, "up-bad", quitter, nil)

	sup := supervise(t, bcd, work, "run", "--state-dir", stateDir, "--max-backoff", "1s",
		"--release-url", rs.URL+"/bc", "--release-key", keyFile)
	logs := sup.logs()
	runsVersion := func(version string) {
		t.Helper()
		poll.Until(t, 20*time.Second, "the node is connected with version "+version, func() bool {
			res, err := nodes.Get(ctx, &nodesv1.GetRequest{Id: nodeID})
			return err == nil && res.GetNode().GetConnected() && res.GetNode().GetDaemonVersion() == version
		}, poll.Every(25*time.Millisecond), logs.logReport())
	}
	upgrade := func(version string) *commandsv1.Command {
		t.Helper()
		return runCommand(t, commands, nodeID, "upgrade", map[string]any{"version": version}, "", logs)
	}
	failed := func(c *commandsv1.Command, want string) {
		t.Helper()
		if c.GetState() != commandsv1.CommandState_COMMAND_STATE_FAILED || !strings.Contains(c.GetError(), want) {
			t.Errorf("upgrade to %s: %s %q; want it failed with %q", c.GetUpgrade().GetVersion(), c.GetState(), c.GetError(), want)
		}
	}
	// Nothing but bcd itself, unchanged, in its directory, and no upgrade pending.
	untouched := func(what string) {
		t.Helper()
		if got, _ := os.ReadFile(bcd); !bytes.Equal(got, v1) {
			t.Fatalf("%s: the binary was replaced", what)
		}
		if entries, _ := os.ReadDir(filepath.Dir(bcd)); len(entries) != 1 {
			t.Errorf("%s: bcd's directory holds %d files", what, len(entries))
		}
		if st := status(t, bcd, stateDir, 0); st.Version != "up-1" || st.Upgrade != nil {
			t.Errorf("%s: bcd status says version %s, upgrade %+v", what, st.Version, st.Upgrade)
		}
	}
	runsVersion("up-1")
	st := status(t, bcd, stateDir, 0)
	if !st.AllowUpgrade || st.ReleaseURL != rs.URL+"/bc" || strings.Join(st.ReleaseKeys, ",") != pub.ID.String() || st.UpgradeDeadline != "2m0s" {
		t.Errorf("bcd status: %+v", st)
	}

	failed(upgrade("up-other"), "signed by key "+otherKey.ID.String()+", none of this node's release keys ("+pub.ID.String()+")")
	if n := rs.hitsOf("up-other"); n != 0 {
		t.Errorf("the binary of a release signed by another key was fetched %d times", n)
	}
	untouched("another key")

	failed(upgrade("up-3"), "checksum mismatch for "+rs.URL+"/bc/up-3/bcd_up-3_")
	untouched("checksum mismatch")

	// The quitter passes every check, is exec'd, and exits: the supervisor starts bcd (up-1)
	// again, which reports the upgrade failed.
	c := upgrade("up-bad")
	failed(c, "upgrade to up-bad failed: "+host.ReasonExitedOnTrial+"; up-1 runs again")
	if n := sup.starts(); n != 2 {
		t.Errorf("bcd was started %d times; want twice (once again after the new binary exited)", n)
	}
	runsVersion("up-1")
	untouched("a new binary that exits")

	// The good release goes out as an operator rolls out a fleet: an upgrade workflow, run by the
	// workflow controller (with the node controllers and the liveness job, as the controllers
	// role runs them), cordons the node, sends the command, waits for the new version and puts
	// the node back in service.
	pid, starts := sup.pid(), sup.starts()
	runControllers(t, env.Pool)
	flows := workflowsv1connect.NewWorkflowsServiceClient(client, api.URL)
	wf, err := flows.Create(ctx, &workflowsv1.CreateRequest{
		Action: &workflowsv1.Action{Kind: &workflowsv1.Action_Upgrade{Upgrade: &workflowsv1.UpgradeAction{Version: "up-2"}}},
		Target: &workflowsv1.Target{NodeIds: []string{nodeID}},
	})
	if err != nil {
		t.Fatal(err)
	}
	var progress *workflowsv1.GetResponse
	poll.Until(t, 60*time.Second, "the upgrade workflow succeeds", func() bool {
		progress, err = flows.Get(ctx, &workflowsv1.GetRequest{Id: wf.GetWorkflow().GetId()})
		if err == nil && progress.GetWorkflow().GetState() == "paused" {
			t.Fatalf("the workflow paused: %v", progress.GetNodes())
		}
		return err == nil && progress.GetWorkflow().GetState() == "succeeded"
	}, poll.Every(50*time.Millisecond), logs.logReport())
	got, err := commands.Get(ctx, &commandsv1.GetRequest{Id: progress.GetNodes()[0].GetCommandId()})
	if err != nil {
		t.Fatal(err)
	}
	c = got.GetCommand()
	if n, err := nodes.Get(ctx, &nodesv1.GetRequest{Id: nodeID}); err != nil || n.GetNode().GetState() != "ready" {
		t.Errorf("after the workflow the node is %s (%v), want ready", n.GetNode().GetState(), err)
	}
	if c.GetState() != commandsv1.CommandState_COMMAND_STATE_SUCCEEDED || c.GetResult().GetFields()["version"].GetStringValue() != "up-2" ||
		c.GetResult().GetFields()["previousVersion"].GetStringValue() != "up-1" {
		t.Fatalf("upgrade to up-2: %v", c)
	}
	runsVersion("up-2")
	st = status(t, bcd, stateDir, 0)
	if st.PID != pid || sup.pid() != pid || sup.starts() != starts || st.Version != "up-2" {
		t.Errorf("after the upgrade: pid %d (supervised %d, %d starts), version %s; want pid %d (exec'd in place), %d starts, up-2",
			st.PID, sup.pid(), sup.starts(), st.Version, pid, starts)
	}
	if st.Upgrade == nil || st.Upgrade.State != state.UpgradeDone || st.Upgrade.From != "up-1" || st.Upgrade.To != "up-2" || st.Upgrade.CommandID != c.GetId() {
		t.Errorf("bcd status: upgrade %+v", st.Upgrade)
	}
	if got, _ := os.ReadFile(bcd); !bytes.Equal(got, v2) {
		t.Error("the binary was not replaced with up-2")
	}
	if entries, _ := os.ReadDir(filepath.Dir(bcd)); len(entries) != 1 {
		t.Errorf("bcd's directory holds %d files after the upgrade", len(entries))
	}
	// Asked again, the node has nothing to do.
	if c := upgrade("up-2"); c.GetState() != commandsv1.CommandState_COMMAND_STATE_SUCCEEDED {
		t.Errorf("upgrade to the running version: %v", c)
	}
}

// runControllers runs the controllers role's node controllers, liveness job and workflow
// controller until the test ends.
func runControllers(t *testing.T, pool *pgxpool.Pool) {
	t.Helper()
	regs := append(workerstest.NodeControl(pool, workerstest.NodeControlOptions{}), workerstest.Workflows(pool, workerstest.WorkflowOptions{Poll: 100 * time.Millisecond}))
	workerstest.Run(t, workerstest.Options{
		Pool: pool, Roles: []string{workers.RoleControllers}, Reconcilers: regs,
		Jobs: map[string][]locks.Job{workers.RoleControllers: {
			workerstest.Liveness(pool, workerstest.LivenessOptions{Interval: 100 * time.Millisecond, Threshold: 10 * time.Second}),
		}},
	})
}

// buildQuitter builds a program that answers "version" as bcd of version does, and exits 1
// for anything else: a release that passes every check but cannot run the daemon.
func buildQuitter(t *testing.T, version string) []byte {
	t.Helper()
	dir := t.TempDir()
	src := `package main

import (
	"fmt"
	"os"
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == "version" {
		fmt.Println("bcd ` + version + ` (quitter)")
		return
	}
	fmt.Fprintln(os.Stderr, "quitter: exiting at once")
	os.Exit(1)
}
`
	if err := os.WriteFile(filepath.Join(dir, "main.go"), []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "go.mod"), []byte("module quitter\n\ngo 1.22\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "quitter")
	cmd := exec.Command(goCommand(t), "build", "-trimpath", "-o", out, ".")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOFLAGS=")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build the quitter: %v\n%s", err, b)
	}
	data, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// releases serves signed releases under /bc/ as `better-compute release build` lays them out,
// and counts the requests of each path.
type releases struct {
	*httptest.Server
	mu    sync.Mutex
	files map[string][]byte
	hits  map[string]int
}

func newReleases(t *testing.T) *releases {
	t.Helper()
	rs := &releases{files: map[string][]byte{}, hits: map[string]int{}}
	rs.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rs.mu.Lock()
		rs.hits[r.URL.Path]++
		data, ok := rs.files[r.URL.Path]
		rs.mu.Unlock()
		if !ok {
			http.NotFound(w, r)
			return
		}
		http.ServeContent(w, r, "", time.Time{}, bytes.NewReader(data))
	}))
	t.Cleanup(rs.Close)
	return rs
}

// publish signs release version of bin with key, in release.Build's format (SHA256SUMS over the
// binary and a manifest, its minisign signature with the version's trusted comment); swap, when
// set, replaces the binary served after signing.
func (rs *releases) publish(t *testing.T, key *release.SecretKey, version string, bin []byte, swap func([]byte) []byte) {
	t.Helper()
	name := release.ArtifactName("bcd", version, runtime.GOOS, runtime.GOARCH)
	m := &release.Manifest{Version: version, Artifacts: []release.Artifact{{
		Name: name, Program: "bcd", OS: runtime.GOOS, Arch: runtime.GOARCH, SHA256: hexSum(bin), Size: int64(len(bin)),
	}}}
	manifest, err := m.Encode()
	if err != nil {
		t.Fatal(err)
	}
	sums := release.FormatChecksums(map[string]string{name: hexSum(bin), release.ManifestFile: hexSum(manifest)})
	sig, err := release.Sign(key, sums, release.TrustedComment(version))
	if err != nil {
		t.Fatal(err)
	}
	if swap != nil {
		bin = swap(bin)
	}
	rs.mu.Lock()
	defer rs.mu.Unlock()
	dir := "/bc/" + version + "/"
	rs.files[dir+release.ManifestFile], rs.files[dir+release.ChecksumsFile], rs.files[dir+release.SignatureFile], rs.files[dir+name] =
		manifest, sums, sig, bin
}

// hitsOf counts the requests for version's bcd binary.
func (rs *releases) hitsOf(version string) int {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	return rs.hits["/bc/"+version+"/"+release.ArtifactName("bcd", version, runtime.GOOS, runtime.GOARCH)]
}

func hexSum(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// supervisor runs bcd, and runs it again whenever it exits, as systemd's Restart=always does,
// until the test ends. Every run logs to the same file.
type supervisor struct {
	t    *testing.T
	bin  string
	args []string
	log  string
	stop chan struct{}
	done chan struct{}

	mu       sync.Mutex
	cmd      *exec.Cmd
	started  int
	stopping bool
}

func supervise(t *testing.T, bin, work string, args ...string) *supervisor {
	t.Helper()
	logFile, err := os.CreateTemp(work, "bcd-supervised-*.log")
	if err != nil {
		t.Fatal(err)
	}
	logFile.Close()
	s := &supervisor{t: t, bin: bin, args: args, log: logFile.Name(), stop: make(chan struct{}), done: make(chan struct{})}
	started := make(chan error, 1)
	go s.loop(started)
	if err := <-started; err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		s.mu.Lock()
		s.stopping = true
		cmd := s.cmd
		s.mu.Unlock()
		close(s.stop)
		_ = cmd.Process.Kill()
		<-s.done
		if t.Failed() {
			t.Logf("bcd log (%s):\n%s", s.log, s.logs().tail(80))
		}
	})
	return s
}

// loop starts bcd until the test ends, reporting the first start's error on started.
func (s *supervisor) loop(started chan<- error) {
	defer close(s.done)
	for first := true; ; first = false {
		f, err := os.OpenFile(s.log, os.O_WRONLY|os.O_APPEND, 0o600)
		cmd := exec.Command(s.bin, s.args...)
		cmd.Stdout, cmd.Stderr = f, f
		s.mu.Lock()
		if s.stopping {
			s.mu.Unlock()
			f.Close()
			return
		}
		if err == nil {
			err = cmd.Start()
		}
		if err == nil {
			s.cmd = cmd
			s.started++
		}
		s.mu.Unlock()
		f.Close()
		if first {
			started <- err
		}
		if err != nil {
			return // the first start failed the test; a later one shows in the waits' reports
		}
		_ = cmd.Wait()
		select {
		case <-s.stop:
			return
		case <-time.After(100 * time.Millisecond): // systemd's RestartSec, shortened
		}
	}
}

// pid is the process bcd runs as now.
func (s *supervisor) pid() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cmd.Process.Pid
}

// starts counts the times bcd was started.
func (s *supervisor) starts() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.started
}

// logs is the supervised runs' log, for the reports of waits.
func (s *supervisor) logs() *daemonProc { return &daemonProc{log: s.log} }
