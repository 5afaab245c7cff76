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
// ends and returns the address it listens on and its process id.
func cliLocal(b *testing.B, e *env, cli string, n *node, port int) (string, int) {
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
	return fields[1], cmd.Process.Pid
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
		return procConn{&pipeConn{in: in, out: out}, cmd.Process.Pid}
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

// tcpOpened dials addr, the local listener of a CLI whose process is pid, and waits until the
// CLI opened the connection's tunnel to n, so that the time measured is the transfer's, as with
// the SDK's tunnels.
func tcpOpened(e *env, addr string, pid int, n *node) func(b *testing.B) halfCloser {
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
		return procConn{c.(*net.TCPConn), pid}
	}
}

// procConn is a connection through a process on this machine (ssh -L, the CLI): the
// throughput cases report that process's CPU time per byte carried, which the machine's other
// work does not change as much as it does the time.
type procConn struct {
	halfCloser
	pid int
}

// clockTick is the unit of /proc/PID/stat's times (USER_HZ, 100 on Linux).
const clockTick = 10 * time.Millisecond

// cpu is the process's CPU time so far, user and system, from /proc/PID/stat; -1 when it
// cannot be read (not Linux).
func (p procConn) cpu() time.Duration {
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(p.pid) + "/stat")
	if err != nil {
		return -1
	}
	// The command's name, in parentheses, may hold spaces: the fields are counted after it.
	i := strings.LastIndexByte(string(stat), ')')
	fields := strings.Fields(string(stat[i+1:]))
	if i < 0 || len(fields) < 13 {
		return -1
	}
	utime, err1 := strconv.ParseInt(fields[11], 10, 64) // field 14 of proc(5)
	stime, err2 := strconv.ParseInt(fields[12], 10, 64) // field 15
	if err1 != nil || err2 != nil {
		return -1
	}
	return time.Duration(utime+stime) * clockTick
}

// hopCPU adds up a forwarding process's CPU time over the transfers that go through it.
type hopCPU struct {
	total time.Duration
	ok    bool
}

// around runs transfer on c and counts the CPU time of c's process meanwhile, if it has one.
func (h *hopCPU) around(c halfCloser, transfer func()) {
	p, ok := c.(procConn)
	before := time.Duration(-1)
	if ok {
		before = p.cpu()
	}
	transfer()
	if before < 0 {
		return
	}
	if after := p.cpu(); after >= 0 {
		h.total += after - before
		h.ok = true
	}
}

// report reports the CPU time per byte, as hop-cpu-ns/B, of n transfers of benchBytes.
func (h *hopCPU) report(b *testing.B, n int) {
	b.Helper()
	if h.ok {
		b.ReportMetric(float64(h.total.Nanoseconds())/float64(n)/benchBytes, "hop-cpu-ns/B")
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
