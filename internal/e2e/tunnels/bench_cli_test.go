package tunnels_test

import (
	"bufio"
	"io"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/better-compute/better-compute/internal/poll"
)

// The CLI's paths in BenchmarkTunnel: the better-compute binary, built from this tree (or the one
// BENCH_TUNNEL_CLI names, to compare two builds in one run), run as its own process as a user
// runs it, beside ssh -L (its own process too).

// cliBinary is the better-compute command the CLI cases run: BENCH_TUNNEL_CLI when set, else one
// built from this tree.
func cliBinary(b *testing.B) string {
	b.Helper()
	if p := os.Getenv("BENCH_TUNNEL_CLI"); p != "" {
		return p
	}
	return buildCLI(b)
}

// cliEnv is the environment that points the CLI at the env's API as its admin.
func (e *env) cliEnv() []string {
	return append(os.Environ(), "BETTER_COMPUTE_URL="+e.api.URL, "BETTER_COMPUTE_API_KEY="+e.api.AdminKey)
}

// cliLocal starts `better-compute tunnel --local 127.0.0.1:0` to port on n until the benchmark
// ends and returns the address it listens on.
func cliLocal(b *testing.B, e *env, cli string, n *node, port int) string {
	b.Helper()
	cmd := exec.Command(cli, "tunnel", "--node", n.id, "--port", strconv.Itoa(port), "--local", "127.0.0.1:0")
	cmd.Env = e.cliEnv()
	out, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	exited := make(chan struct{})
	b.Cleanup(func() { _ = cmd.Process.Kill(); <-exited })
	// "Forwarding 127.0.0.1:P to node N port P"
	line, err := bufio.NewReader(out).ReadString('\n')
	go func() { _, _ = io.Copy(io.Discard, out); _ = cmd.Wait(); close(exited) }()
	fields := strings.Fields(line)
	if err != nil || len(fields) < 2 || fields[0] != "Forwarding" {
		b.Fatalf("better-compute tunnel --local printed %q (%v); stderr:\n%s", line, err, stderr.String())
	}
	return fields[1]
}

// cliStdio runs `better-compute tunnel --stdio` to port on n, a process per connection, and
// returns its standard input and output as the connection once the tunnel is open.
func cliStdio(e *env, cli string, n *node, port int) func(b *testing.B) halfCloser {
	return func(b *testing.B) halfCloser {
		b.Helper()
		before := e.openedTunnels(n)
		cmd := exec.Command(cli, "tunnel", "--node", n.id, "--port", strconv.Itoa(port), "--stdio")
		cmd.Env = e.cliEnv()
		in, err := cmd.StdinPipe()
		if err != nil {
			b.Fatal(err)
		}
		out, err := cmd.StdoutPipe()
		if err != nil {
			b.Fatal(err)
		}
		var stderr strings.Builder
		cmd.Stderr = &stderr
		if err := cmd.Start(); err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
		poll.Until(b, 10*time.Second, "better-compute tunnel --stdio opens its tunnel", func() bool {
			return e.openedTunnels(n) > before
		}, poll.Every(5*time.Millisecond))
		return &pipeConn{in: in, out: out}
	}
}

// openedTunnels counts the tunnels to n that were opened (to wait for one, untimed).
func (e *env) openedTunnels(n *node) int {
	e.t.Helper()
	var c int
	if err := e.Pool.QueryRow(ctx, `SELECT count(*) FROM tunnels WHERE node_id = $1 AND opened_at IS NOT NULL`, n.id).Scan(&c); err != nil {
		e.t.Fatal(err)
	}
	return c
}

// tcpOpened dials addr, a CLI's local listener, and waits until the CLI opened the connection's
// tunnel to n, so that the time measured is the transfer's, as with the SDK's tunnels.
func tcpOpened(e *env, addr string, n *node) func(b *testing.B) halfCloser {
	return func(b *testing.B) halfCloser {
		b.Helper()
		before := e.openedTunnels(n)
		c, err := net.Dial("tcp", addr)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = c.Close() })
		poll.Until(b, 10*time.Second, "better-compute tunnel --local opens the connection's tunnel", func() bool {
			return e.openedTunnels(n) > before
		}, poll.Every(5*time.Millisecond))
		return c.(*net.TCPConn)
	}
}

// pipeConn is a process's standard input and output as a connection: CloseWrite closes its
// input.
type pipeConn struct {
	in  io.WriteCloser
	out io.Reader
}

func (p *pipeConn) Read(b []byte) (int, error)  { return p.out.Read(b) }
func (p *pipeConn) Write(b []byte) (int, error) { return p.in.Write(b) }
func (p *pipeConn) CloseWrite() error           { return p.in.Close() }
