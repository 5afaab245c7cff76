package cli

import (
	"bufio"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	commandsv1 "github.com/better-compute/better-compute/gen/go/bettercompute/commands/v1"
	daemonv1 "github.com/better-compute/better-compute/gen/go/bettercompute/daemon/v1"
	nodesv1 "github.com/better-compute/better-compute/gen/go/bettercompute/nodes/v1"
	"github.com/better-compute/better-compute/gen/go/bettercompute/nodes/v1/nodesv1connect"
	"github.com/better-compute/better-compute/internal/poll"
	"github.com/better-compute/better-compute/internal/sim"
)

// TestDevSim starts `dev --sim 5` on a fresh data directory, as a developer would, finds the
// five simulated machines as ready, connected nodes through the API, runs a command on one,
// upgrades another (its node reports the new version), and stops dev with SIGINT.
func TestDevSim(t *testing.T) {
	t.Parallel()
	// Not t.TempDir: its parent is private, and PostgreSQL may run as the postgres user.
	tmp, err := os.MkdirTemp("", "bc-devsim-") //nolint:usetesting // see above
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(tmp) })
	if err := os.Chmod(tmp, 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0], "dev", "--sim", "5", "--port", "0", "--data-dir", filepath.Join(tmp, "pg"),
		"--sim-fail-rate", "0", "--sim-reboot-downtime", "200ms")
	cmd.Env = append(os.Environ(), "BETTER_COMPUTE_RUN_MAIN=1", "BETTER_COMPUTE_DATABASE_URL=", "BETTER_COMPUTE_SECRET=", "BETTER_COMPUTE_CONFIG=")
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	lines := make(chan string, 100)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
		exited <- cmd.Wait()
	}()
	t.Cleanup(func() { _ = cmd.Process.Kill() }) // after a failure; a no-op once it exited

	var apiURL, key string
	timeout := time.After(3 * time.Minute)
	for joined := false; !joined; {
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatalf("dev exited early: %v\n%s", <-exited, stderr.String())
			}
			t.Log(l)
			switch {
			case strings.HasPrefix(l, "API: "):
				apiURL = strings.TrimPrefix(l, "API: ")
			case strings.HasPrefix(l, "API key: "):
				key = strings.TrimPrefix(l, "API key: ")
			case l == "Simulated machines: 5 joined":
				joined = true
			case strings.HasPrefix(l, "Simulated machines:"):
				t.Fatalf("unexpected %q", l)
			}
		case <-timeout:
			t.Fatalf("no \"Simulated machines: 5 joined\" within 3 minutes\n%s", stderr.String())
		}
	}
	if apiURL == "" || key == "" {
		t.Fatalf("API %q, key %q", apiURL, key)
	}

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	client := nodesv1connect.NewNodesServiceClient(sim.APIClient(key), apiURL)
	res, err := client.List(ctx, &nodesv1.ListRequest{LabelSelector: map[string]string{"simulated": "true"}})
	if err != nil {
		t.Fatal(err)
	}
	hosts := map[string]bool{}
	for _, n := range res.GetNodes() {
		if n.GetState() != "ready" || !n.GetConnected() {
			t.Errorf("node %s (%s): state %q, connected %v", n.GetId(), n.GetHostname(), n.GetState(), n.GetConnected())
		}
		hosts[n.GetHostname()] = true
	}
	if len(res.GetNodes()) != 5 || !hosts["sim-0001"] || !hosts["sim-0005"] {
		t.Fatalf("nodes %v", hosts)
	}

	// A command reaches a simulated machine and its result is readable.
	commands := sim.CommandsClient(apiURL, key)
	created, err := commands.Create(ctx, &commandsv1.CreateRequest{NodeId: res.GetNodes()[0].GetId(), Payload: &commandsv1.CreateRequest_Echo{Echo: &daemonv1.EchoPayload{}}})
	if err != nil {
		t.Fatal(err)
	}
	succeeds := func(id string) {
		t.Helper()
		poll.Until(t, 30*time.Second, "command "+id+" succeeds", func() bool {
			got, err := commands.Get(ctx, &commandsv1.GetRequest{Id: id})
			if err != nil {
				t.Fatal(err)
			}
			if s := got.GetCommand().GetState(); s != commandsv1.CommandState_COMMAND_STATE_SUCCEEDED && s != commandsv1.CommandState_COMMAND_STATE_PENDING &&
				s != commandsv1.CommandState_COMMAND_STATE_SENT && s != commandsv1.CommandState_COMMAND_STATE_ACKED {
				t.Fatalf("command %s: %v", id, got.GetCommand())
			}
			return got.GetCommand().GetState() == commandsv1.CommandState_COMMAND_STATE_SUCCEEDED
		}, poll.Every(50*time.Millisecond))
	}
	succeeds(created.GetCommands()[0].GetId())

	// A simulated machine upgrades: it comes back as the new version.
	node := res.GetNodes()[1].GetId()
	created, err = commands.Create(ctx, &commandsv1.CreateRequest{NodeId: node, Payload: &commandsv1.CreateRequest_Upgrade{Upgrade: &daemonv1.UpgradePayload{Version: "v9.9.9"}}})
	if err != nil {
		t.Fatal(err)
	}
	succeeds(created.GetCommands()[0].GetId())
	got, err := client.Get(ctx, &nodesv1.GetRequest{Id: node})
	if err != nil {
		t.Fatal(err)
	}
	if v := got.GetNode().GetDaemonVersion(); v != "v9.9.9" {
		t.Errorf("node %s reports version %q after the upgrade, want v9.9.9", node, v)
	}

	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-exited:
		if err != nil {
			t.Fatalf("dev exited with %v after SIGINT\n%s", err, stderr.String())
		}
	case <-time.After(time.Minute):
		t.Fatalf("dev did not stop within a minute of SIGINT")
	}
}

// TestDevSimRefusesABadFailRate: dev checks --sim-fail-rate before it starts anything.
func TestDevSimRefusesABadFailRate(t *testing.T) {
	t.Parallel()
	_, stderr, code := runMain(t, "dev", "--sim", "1", "--sim-fail-rate", "1.5", "--data-dir", filepath.Join(t.TempDir(), "pg"))
	if code == 0 || !strings.Contains(stderr, "--sim-fail-rate") {
		t.Fatalf("exit code %d, stderr %q", code, stderr)
	}
}

// TestSimRefusesAnUnknownTransport: sim and dev check --transport and --sim-transport first.
func TestSimRefusesAnUnknownTransport(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{
		{"sim", "--transport", "quic", "--gateway", "127.0.0.1:1", "--ca-file", "none.pem", "--token", "x"},
		{"dev", "--sim", "1", "--sim-transport", "quic", "--data-dir", filepath.Join(t.TempDir(), "pg")},
	} {
		_, stderr, code := runMain(t, args...)
		if code == 0 || !strings.Contains(stderr, "transport") {
			t.Errorf("%v: exit code %d, stderr %q", args, code, stderr)
		}
	}
}
