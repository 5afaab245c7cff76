package main

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
	"github.com/better-compute/better-compute/internal/sim"
)

// TestDevSim starts `dev --sim 5` on a fresh data directory, as a developer would, finds the
// five simulated machines as ready, connected nodes through the API, runs a command on one, and
// stops dev with SIGINT.
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
	cmd := exec.Command(os.Args[0], "dev", "--sim", "5", "--port", "0", "--data-dir", filepath.Join(tmp, "pg"))
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
	id := created.GetCommands()[0].GetId()
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		got, err := commands.Get(ctx, &commandsv1.GetRequest{Id: id})
		if err != nil {
			t.Fatal(err)
		}
		if got.GetCommand().GetState() == commandsv1.CommandState_COMMAND_STATE_SUCCEEDED {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("command %s: %v", id, got.GetCommand())
		}
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
