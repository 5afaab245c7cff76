package main_test

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"google.golang.org/protobuf/encoding/protojson"

	"github.com/better-compute/better-compute/gateway"
	"github.com/better-compute/better-compute/gateway/gatewaytest"
	commandsv1 "github.com/better-compute/better-compute/gen/go/bettercompute/commands/v1"
	"github.com/better-compute/better-compute/gen/go/bettercompute/commands/v1/commandsv1connect"
	jointokensv1 "github.com/better-compute/better-compute/gen/go/bettercompute/jointokens/v1"
	"github.com/better-compute/better-compute/gen/go/bettercompute/jointokens/v1/jointokensv1connect"
	nodesv1 "github.com/better-compute/better-compute/gen/go/bettercompute/nodes/v1"
	"github.com/better-compute/better-compute/gen/go/bettercompute/nodes/v1/nodesv1connect"
	"github.com/better-compute/better-compute/internal/daemon"
	"github.com/better-compute/better-compute/internal/daemon/host"
	"github.com/better-compute/better-compute/internal/daemon/state"
	"github.com/better-compute/better-compute/internal/dbtest"
	"github.com/better-compute/better-compute/internal/poll"
	"github.com/better-compute/better-compute/server"
	"github.com/better-compute/better-compute/server/servertest"
)

func TestMain(m *testing.M) { dbtest.Main(m) }

var ctx = context.Background()

// certTTL is the lifetime of node certificates in the test: short, so the daemon renews (and
// saves) its certificate while the test runs (at two thirds of what is left at each start), yet
// long enough that a restart never meets an expired one.
const certTTL = 20 * time.Second

// TestEndToEnd runs the real bcd binary against the real API and gateway: join with a token
// from joinTokens/create, ready in nodes/get with this machine's CPUs and memory, exec through
// commands/create (allowed and refused), SIGKILL and restart with the same identity and the
// command record kept, a gateway restart, a network drop, the certificate renewed on disk, a
// tampered state directory refused, and bcd status. (TestUpgradeEndToEnd upgrades it.)
func TestEndToEnd(t *testing.T) { //nolint:tparallel // the steps are one story, in order
	t.Parallel()
	bcd := buildBcd(t, "e2e-1")[0]

	env := gatewaytest.New(t)
	notifier, err := gateway.NewNotifier(env.Pool, env.Bundle, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(notifier.Wait)
	api := servertest.Start(t, env.Pool, func(o *server.Options) { o.Notifier = notifier })
	client := api.HTTPClient(api.AdminKey)
	tokens := jointokensv1connect.NewJoinTokensServiceClient(client, api.URL)
	nodes := nodesv1connect.NewNodesServiceClient(client, api.URL)
	commands := commandsv1connect.NewCommandsServiceClient(client, api.URL)
	gw := startGateway(t, env, "127.0.0.1:0")
	// The daemon reaches the gateway through a TCP proxy that can cut its connections.
	network := startProxy(t, gw.addr)

	work := t.TempDir()
	caFile := filepath.Join(work, "root-ca.pem")
	if err := os.WriteFile(caFile, env.Bundle.RootPEM(), 0o644); err != nil {
		t.Fatal(err)
	}
	stateDir := filepath.Join(work, "state")

	// Join with a token from the API.
	tok, err := tokens.Create(ctx, &jointokensv1.CreateRequest{Labels: map[string]string{"e2e": "bcd"}})
	if err != nil {
		t.Fatal(err)
	}
	out := runBcd(t, bcd, 0, "join", "--state-dir", stateDir, "--token", tok.GetToken(), "--gateway", network.addr(), "--ca-file", caFile)
	if !strings.Contains(out, "Joined as node ") {
		t.Fatalf("join said %q", out)
	}
	checkModes(t, stateDir)
	dir, _ := state.New(stateDir)
	joinedAs, err := dir.ReadNode()
	if err != nil {
		t.Fatal(err)
	}
	nodeID := joinedAs.NodeID
	firstChain, _ := os.ReadFile(dir.File(state.ChainFile))
	runBcd(t, bcd, 1, "join", "--state-dir", stateDir, "--token", tok.GetToken(), "--gateway", network.addr(), "--ca-file", caFile) // joined already

	// The allow list: /bin/echo by flag, a counting script by the state directory's file.
	counter, counted := filepath.Join(work, "count.sh"), filepath.Join(work, "counted")
	if err := os.WriteFile(counter, []byte("#!/bin/sh\necho run >> "+counted+"\necho counted\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dir.File(state.AllowExecFile), []byte(counter+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	runArgs := []string{"run", "--state-dir", stateDir, "--allow-exec", "/bin/echo", "--max-backoff", "1s"}
	d := startBcd(t, bcd, work, runArgs...)

	// The story's steps run in order, each from where the last left off, so the first to fail
	// ends it. What must outlive a step (the daemon, the gateway) is started on story.
	story := t
	var countCmd *commandsv1.Command // run before the restart, re-delivered after it

	if !t.Run("ready with its inventory", func(t *testing.T) {
		// Ready, with this machine's real CPUs and memory.
		var node *nodesv1.Node
		poll.Until(t, 15*time.Second, "the node is ready and connected with its inventory", func() bool {
			res, err := nodes.Get(ctx, &nodesv1.GetRequest{Id: nodeID})
			node = res.GetNode()
			return err == nil && node.GetState() == "ready" && node.GetConnected() && node.GetInventory().GetCpus() > 0
		}, poll.Every(25*time.Millisecond), d.logReport())
		inv := node.GetInventory()
		if want := onlineCPUs(t); inv.GetCpus() != want {
			t.Errorf("nodes/get: %d CPUs; this machine has %d online", inv.GetCpus(), want)
		}
		var si syscall.Sysinfo_t
		if err := syscall.Sysinfo(&si); err != nil {
			t.Fatal(err)
		}
		if want := int64(si.Totalram) * int64(si.Unit); inv.GetMemoryBytes() != want {
			t.Errorf("nodes/get: %d bytes of memory; this machine has %d", inv.GetMemoryBytes(), want)
		}
		if h, _ := os.Hostname(); inv.GetHostname() != h || node.GetHostname() != h {
			t.Errorf("hostname %q / %q, want %q", inv.GetHostname(), node.GetHostname(), h)
		}
		if node.GetDaemonVersion() != "e2e-1" || node.GetLabels()["e2e"] != "bcd" || inv.GetKernel() == "" || inv.GetOs() == "" {
			t.Errorf("node %v", node)
		}
		t.Logf("inventory in nodes/get: %v", inv)
		st := status(t, bcd, stateDir, 0)
		if !st.Running || !st.Connected || st.Transport != "h2" || st.NodeID != nodeID || st.PID != d.cmd.Process.Pid || strings.Join(st.AllowExec, ",") != "/bin/echo,"+counter {
			t.Errorf("bcd status: %+v", st)
		}
		if text := runBcd(t, bcd, 0, "status", "--state-dir", stateDir); !strings.Contains(text, nodeID) || !strings.Contains(text, "connected via h2") {
			t.Errorf("bcd status:\n%s", text)
		}
	}) {
		t.FailNow()
	}
	if !t.Run("exec through the allow list", func(t *testing.T) {
		// exec: output back through the API.
		c := runCommand(t, commands, nodeID, "exec", map[string]any{"argv": []any{"/bin/echo", "hello"}}, "", d)
		if c.GetState() != commandsv1.CommandState_COMMAND_STATE_SUCCEEDED || c.GetResult().GetFields()["stdout"].GetStringValue() != "hello\n" ||
			c.GetResult().GetFields()["exitCode"].GetNumberValue() != 0 {
			t.Fatalf("exec /bin/echo hello: %v", c)
		}

		// exec off the allow list: refused, reported failed, not run.
		marker := filepath.Join(work, "touched")
		c = runCommand(t, commands, nodeID, "exec", map[string]any{"argv": []any{"/usr/bin/touch", marker}}, "", d)
		if c.GetState() != commandsv1.CommandState_COMMAND_STATE_FAILED || !strings.Contains(c.GetError(), "not allowed") {
			t.Errorf("exec /usr/bin/touch: %v", c)
		}
		if _, err := os.Stat(marker); err == nil {
			t.Error("a program off the allow list ran")
		}

		// A command to re-deliver after a restart.
		countCmd = runCommand(t, commands, nodeID, "exec", map[string]any{"argv": []any{counter}}, "count-once", d)
		if countCmd.GetState() != commandsv1.CommandState_COMMAND_STATE_SUCCEEDED || runs(t, counted) != 1 {
			t.Fatalf("count: %v, %d runs", countCmd, runs(t, counted))
		}
	}) {
		t.FailNow()
	}
	if !t.Run("restart re-delivers without re-running", func(t *testing.T) {
		// SIGKILL, then re-deliver the count command (as the sweeper does with an unacked one) while
		// the daemon is down: the restarted daemon is the same node and answers from its record.
		d.kill(t)
		poll.Until(t, 10*time.Second, "the gateway sees the session end", func() bool {
			res, err := nodes.Get(ctx, &nodesv1.GetRequest{Id: nodeID})
			return err == nil && !res.GetNode().GetConnected()
		}, poll.Every(25*time.Millisecond), d.logReport())
		if _, err := env.Pool.Exec(ctx, `UPDATE commands SET state = 'pending', result = NULL, error = '', acked_at = NULL, finished_at = NULL WHERE id = $1`, countCmd.GetId()); err != nil {
			t.Fatal(err)
		}
		if st := status(t, bcd, stateDir, 3); st.Running || st.NodeID != nodeID || st.StateError != "" {
			t.Errorf("bcd status of a killed daemon: %+v", st)
		}
		d = startBcd(story, bcd, work, runArgs...)
		poll.Until(t, 15*time.Second, "the re-delivered command is answered", func() bool {
			res, err := commands.Get(ctx, &commandsv1.GetRequest{Id: countCmd.GetId()})
			return err == nil && res.GetCommand().GetState() == commandsv1.CommandState_COMMAND_STATE_SUCCEEDED && res.GetCommand().GetAttempts() == 2
		}, poll.Every(25*time.Millisecond), d.logReport())
		if n := runs(t, counted); n != 1 {
			t.Errorf("the re-delivered command ran again: %d runs", n)
		}
		list, err := nodes.List(ctx, &nodesv1.ListRequest{})
		if err != nil || len(list.GetNodes()) != 1 || list.GetNodes()[0].GetId() != nodeID || !list.GetNodes()[0].GetConnected() {
			t.Fatalf("after the restart: nodes %v, %v", list.GetNodes(), err)
		}
		if again, _ := dir.ReadNode(); again.NodeID != nodeID {
			t.Errorf("node id changed to %s", again.NodeID)
		}
	}) {
		t.FailNow()
	}
	if !t.Run("reconnect after a gateway restart", func(t *testing.T) {
		// A gateway restart on the same address: the daemon reconnects by itself.
		gw.stop()
		restarted := time.Now()
		startGateway(story, env, gw.addr)
		poll.Until(t, 15*time.Second, "the daemon reconnects to the restarted gateway", func() bool {
			res, err := nodes.Get(ctx, &nodesv1.GetRequest{Id: nodeID})
			return err == nil && res.GetNode().GetConnected() && res.GetNode().GetConnectTime().AsTime().After(restarted)
		}, poll.Every(25*time.Millisecond), d.logReport())
		c := runCommand(t, commands, nodeID, "exec", map[string]any{"argv": []any{"/bin/echo", "still", "here"}}, "", d)
		if c.GetState() != commandsv1.CommandState_COMMAND_STATE_SUCCEEDED || c.GetResult().GetFields()["stdout"].GetStringValue() != "still here\n" {
			t.Fatalf("exec after the gateway restart: %v", c)
		}
	}) {
		t.FailNow()
	}
	if !t.Run("reconnect after a network drop", func(t *testing.T) {
		// A network drop: every connection reset at once, no goodbye. The daemon reconnects by itself.
		dropped := time.Now()
		if n := network.cut(); n == 0 {
			t.Fatal("no connection to cut")
		}
		poll.Until(t, 15*time.Second, "the daemon reconnects after the drop", func() bool {
			res, err := nodes.Get(ctx, &nodesv1.GetRequest{Id: nodeID})
			return err == nil && res.GetNode().GetConnected() && res.GetNode().GetConnectTime().AsTime().After(dropped)
		}, poll.Every(25*time.Millisecond), d.logReport())
		c := runCommand(t, commands, nodeID, "exec", map[string]any{"argv": []any{"/bin/echo", "reconnected"}}, "", d)
		if c.GetState() != commandsv1.CommandState_COMMAND_STATE_SUCCEEDED {
			t.Fatalf("exec after the network drop: %v", c)
		}
	}) {
		t.FailNow()
	}
	if !t.Run("renewal", func(t *testing.T) {
		// Renewals replace the chain on disk, with the same key and mode.
		poll.Until(t, 2*certTTL, "a renewed certificate is saved", func() bool {
			chain, err := os.ReadFile(dir.File(state.ChainFile))
			return err == nil && !bytes.Equal(chain, firstChain)
		}, poll.Every(25*time.Millisecond), d.logReport())
		checkModes(t, stateDir)
		if _, _, err := dir.Load(); err != nil {
			t.Errorf("state after renewal: %v", err)
		}
	}) {
		t.FailNow()
	}
	if !t.Run("tampered state refused", func(t *testing.T) {
		// Tampered copies of the state directory: bcd run refuses to start, naming the file.
		for _, tc := range []struct {
			name   string
			tamper func(dir string)
			want   string
		}{
			{"another key", func(dir string) {
				k, _ := daemon.NewKey()
				der, _ := x509.MarshalECPrivateKey(k)
				if err := os.WriteFile(filepath.Join(dir, state.KeyFile), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: der}), 0o600); err != nil {
					t.Fatal(err)
				}
			}, "key.pem: the key does not belong to the certificate"},
			{"key readable by others", func(dir string) {
				if err := os.Chmod(filepath.Join(dir, state.KeyFile), 0o644); err != nil {
					t.Fatal(err)
				}
			}, "key.pem: permissions 0644"},
		} {
			copyDir := copyState(t, stateDir)
			tc.tamper(copyDir)
			res := runBcd(t, bcd, 1, "run", "--state-dir", copyDir)
			if want := filepath.Join(copyDir, tc.want); !strings.Contains(res, want) {
				t.Errorf("%s: bcd run said %q; want %q", tc.name, res, want)
			}
		}
	}) {
		t.FailNow()
	}
	if !t.Run("SIGTERM", func(t *testing.T) {
		// SIGTERM stops it cleanly; then status reads the state directory.
		if code := d.terminate(t); code != 0 {
			t.Errorf("bcd run exited %d after SIGTERM", code)
		}
		if _, err := os.Stat(dir.File(state.SocketFile)); err == nil {
			t.Error("the health socket is left behind")
		}
		if text := runBcd(t, bcd, 3, "status", "--state-dir", stateDir); !strings.Contains(text, "not running") || !strings.Contains(text, nodeID) {
			t.Errorf("bcd status of a stopped daemon:\n%s", text)
		}
	}) {
		t.FailNow()
	}
}

// buildBcd builds bcd once per version (buildinfo.Version set at link time), each alone in a
// directory of its own, with the race detector when the test has it. The go command's build
// cache is shared, so each version after the first is a link.
func buildBcd(t *testing.T, versions ...string) []string {
	t.Helper()
	goBin := goCommand(t)
	var paths []string
	for _, v := range versions {
		out := filepath.Join(t.TempDir(), "bcd")
		args := []string{"build", "-trimpath", "-o", out, "-ldflags", "-X github.com/better-compute/better-compute/internal/buildinfo.Version=" + v}
		if raceEnabled {
			args = append(args, "-race")
		}
		start := time.Now()
		cmd := exec.Command(goBin, append(args, ".")...)
		if b, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("go build bcd: %v\n%s", err, b)
		}
		t.Logf("built bcd %s in %v", v, time.Since(start).Round(time.Millisecond))
		paths = append(paths, out)
	}
	return paths
}

// goCommand is the go command of the toolchain running the test, or the one on PATH; the test is
// skipped without one.
func goCommand(t *testing.T) string {
	t.Helper()
	goBin := filepath.Join(runtime.GOROOT(), "bin", "go") //nolint:staticcheck // the toolchain running the test builds bcd
	if _, err := os.Stat(goBin); err == nil {
		return goBin
	}
	p, err := exec.LookPath("go")
	if err != nil {
		t.Skip("the go command is not available to build bcd")
	}
	return p
}

// runningGateway is a gateway on a fixed address, so it can be restarted where daemons expect it.
type runningGateway struct {
	addr string
	stop func()
}

func startGateway(t *testing.T, env *gatewaytest.Env, addr string) *runningGateway {
	t.Helper()
	certPEM, keyPEM, err := env.Bundle.IssueGateway("test", "gw1", nil, []net.IP{net.ParseIP("127.0.0.1")})
	if err != nil {
		t.Fatal(err)
	}
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	var ln net.Listener
	poll.Until(t, 5*time.Second, "listen on "+addr, func() bool {
		ln, err = net.Listen("tcp", addr)
		return err == nil
	}, poll.Every(25*time.Millisecond))
	control, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	g := gateway.New(gateway.Options{
		Pool: env.Pool, Authority: env.Bundle, ID: "gw1", Region: "test", Certificate: cert,
		HeartbeatInterval: time.Second, DispatchInterval: time.Second, CertTTL: certTTL,
		ControlURL: "https://" + control.Addr().String(),
	})
	gctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() {
		if err := g.Serve(gctx, ln); err != nil {
			t.Errorf("gateway: %v", err)
		}
	})
	wg.Go(func() {
		if err := g.ServeControl(gctx, control, env.Bundle, "127.0.0.1"); err != nil {
			t.Errorf("gateway control API: %v", err)
		}
	})
	stop := sync.OnceFunc(func() { cancel(); wg.Wait() })
	t.Cleanup(stop)
	return &runningGateway{addr: ln.Addr().String(), stop: stop}
}

// proxy forwards TCP connections to a gateway and can reset them all, as a network drop does.
type proxy struct {
	ln       net.Listener
	upstream string
	mu       sync.Mutex
	conns    map[*net.TCPConn]bool
}

func startProxy(t *testing.T, upstream string) *proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &proxy{ln: ln, upstream: upstream, conns: map[*net.TCPConn]bool{}}
	var wg sync.WaitGroup
	t.Cleanup(func() { ln.Close(); p.cut(); wg.Wait() })
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			u, err := net.Dial("tcp", p.upstream)
			if err != nil {
				c.Close()
				continue
			}
			down, up := c.(*net.TCPConn), u.(*net.TCPConn)
			p.mu.Lock()
			p.conns[down], p.conns[up] = true, true
			p.mu.Unlock()
			pipe := func(dst, src *net.TCPConn) {
				_, _ = io.Copy(dst, src)
				dst.Close()
				src.Close()
				p.mu.Lock()
				delete(p.conns, dst)
				delete(p.conns, src)
				p.mu.Unlock()
			}
			wg.Go(func() { pipe(up, down) })
			wg.Go(func() { pipe(down, up) })
		}
	})
	return p
}

func (p *proxy) addr() string { return p.ln.Addr().String() }

// cut resets every connection (RST, not FIN) and returns how many there were.
func (p *proxy) cut() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := len(p.conns)
	for c := range p.conns {
		_ = c.SetLinger(0)
		c.Close()
	}
	return n
}

// daemonProc is a running bcd run.
type daemonProc struct {
	cmd  *exec.Cmd
	log  string
	done chan struct{}
}

func startBcd(t *testing.T, bin, work string, args ...string) *daemonProc {
	t.Helper()
	return startBcdEnv(t, bin, work, nil, args...)
}

// startBcdEnv starts bcd with env added to the test's environment.
func startBcdEnv(t *testing.T, bin, work string, env []string, args ...string) *daemonProc {
	t.Helper()
	logFile, err := os.CreateTemp(work, "bcd-*.log")
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, args...)
	if env != nil {
		cmd.Env = append(os.Environ(), env...)
	}
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	logFile.Close()
	d := &daemonProc{cmd: cmd, log: logFile.Name(), done: make(chan struct{})}
	go func() { _ = cmd.Wait(); close(d.done) }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-d.done
		if t.Failed() {
			t.Logf("bcd log (%s):\n%s", d.log, d.tail(60))
		}
	})
	return d
}

func (d *daemonProc) tail(n int) string {
	data, _ := os.ReadFile(d.log)
	lines := strings.Split(strings.TrimSpace(string(data)), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

func (d *daemonProc) kill(t *testing.T) {
	t.Helper()
	if err := d.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-d.done
}

// terminate sends SIGTERM and returns the exit code.
func (d *daemonProc) terminate(t *testing.T) int {
	t.Helper()
	if err := d.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-d.done:
	case <-time.After(20 * time.Second):
		t.Fatal("bcd did not stop after SIGTERM")
	}
	return d.cmd.ProcessState.ExitCode()
}

// runBcd runs a bcd command to its end, expecting exit code want, and returns its output.
func runBcd(t *testing.T, bin string, want int, args ...string) string {
	t.Helper()
	return runBcdEnv(t, bin, want, nil, args...)
}

// runBcdEnv is runBcd with env added to the test's environment.
func runBcdEnv(t *testing.T, bin string, want int, env []string, args ...string) string {
	t.Helper()
	cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(cctx, bin, args...)
	if env != nil {
		cmd.Env = append(os.Environ(), env...)
	}
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	code := 0
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	if code != want {
		t.Fatalf("bcd %s: exit %d, want %d:\n%s", strings.Join(args, " "), code, want, out)
	}
	return string(out)
}

func status(t *testing.T, bin, stateDir string, want int) host.Status {
	t.Helper()
	var s host.Status
	if err := json.Unmarshal([]byte(runBcd(t, bin, want, "status", "--json", "--state-dir", stateDir)), &s); err != nil {
		t.Fatal(err)
	}
	return s
}

// runCommand creates a command through the API and waits for it to finish. The payload is the
// typed payload of typ as JSON, with "argv" standing for an exec's path and args.
func runCommand(t *testing.T, commands commandsv1connect.CommandsServiceClient, nodeID, typ string, payload map[string]any, key string, d *daemonProc) *commandsv1.Command {
	t.Helper()
	payload = maps.Clone(payload)
	if argv, ok := payload["argv"].([]any); ok && len(argv) > 0 {
		delete(payload, "argv")
		payload["path"], payload["args"] = argv[0], argv[1:]
	}
	b, err := json.Marshal(map[string]any{"nodeId": nodeID, typ: payload, "idempotencyKey": key})
	if err != nil {
		t.Fatal(err)
	}
	req := &commandsv1.CreateRequest{}
	if err := protojson.Unmarshal(b, req); err != nil {
		t.Fatalf("%s: %v", b, err)
	}
	res, err := commands.Create(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	id := res.GetCommands()[0].GetId()
	var c *commandsv1.Command
	poll.Until(t, 20*time.Second, fmt.Sprintf("%s command %s finishes", typ, id), func() bool {
		got, err := commands.Get(ctx, &commandsv1.GetRequest{Id: id})
		c = got.GetCommand()
		return err == nil && c.GetFinishTime() != nil
	}, poll.Every(25*time.Millisecond), d.logReport())
	return c
}

// checkModes checks the state directory is 0700 and its files 0600.
func checkModes(t *testing.T, dir string) {
	t.Helper()
	fi, err := os.Stat(dir)
	if err != nil || fi.Mode().Perm() != 0o700 {
		t.Fatalf("state directory: %v, %v", fi.Mode().Perm(), err)
	}
	for _, f := range []string{state.KeyFile, state.ChainFile, state.RootCAFile, state.NodeFile} {
		fi, err := os.Stat(filepath.Join(dir, f))
		if err != nil || fi.Mode().Perm() != 0o600 {
			t.Errorf("%s: %v, %v; want 0600", f, fi.Mode().Perm(), err)
		}
	}
}

// copyState copies the identity files of a state directory, modes included.
func copyState(t *testing.T, from string) string {
	t.Helper()
	to := filepath.Join(t.TempDir(), "state")
	if err := os.Mkdir(to, 0o700); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{state.KeyFile, state.ChainFile, state.RootCAFile, state.NodeFile} {
		data, err := os.ReadFile(filepath.Join(from, f))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(to, f), data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return to
}

// runs counts the lines the counting script appended.
func runs(t *testing.T, path string) int {
	t.Helper()
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return 0
	}
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	n := 0
	for sc := bufio.NewScanner(f); sc.Scan(); {
		n++
	}
	return n
}

// onlineCPUs parses /sys/devices/system/cpu/online ("0-3,8-11").
func onlineCPUs(t *testing.T) int32 {
	t.Helper()
	data, err := os.ReadFile("/sys/devices/system/cpu/online")
	if err != nil {
		t.Fatal(err)
	}
	var n int32
	for r := range strings.SplitSeq(strings.TrimSpace(string(data)), ",") {
		lo, hi, found := strings.Cut(r, "-")
		a, _ := strconv.Atoi(lo)
		b := a
		if found {
			b, _ = strconv.Atoi(hi)
		}
		n += int32(b - a + 1)
	}
	return n
}

// logReport adds the end of bcd's log to the failure of a wait.
func (d *daemonProc) logReport() poll.Option {
	return poll.Report(func() string { return "bcd log:\n" + d.tail(30) })
}
