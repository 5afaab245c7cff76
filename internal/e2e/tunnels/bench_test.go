package tunnels_test

import (
	"context"
	"crypto/rand"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/better-compute/better-compute/client"
	"github.com/better-compute/better-compute/gateway/gatewaytest"
	"github.com/better-compute/better-compute/internal/daemon"
	"github.com/better-compute/better-compute/internal/poll"
	"github.com/better-compute/better-compute/internal/sim"
)

// Benchmarks of one process's tunnel path: the SDK, the API, the gateway and a FakeDaemon (bcd's
// tunnel code) on the loopback, as the tests run it. docs/benchmarks.md ("Tunnels") has the
// command and the figures.
const (
	// benchBytes is what one throughput iteration sends.
	benchBytes = 256 << 20
	// benchTunnels is how many tunnels the open and memory benchmarks open per iteration.
	benchTunnels = 200
	// benchRTT is the round trip injected on the daemon's data plane in the -rtt50ms cases.
	benchRTT = 50 * time.Millisecond
)

// BenchmarkTunnel measures, on one environment:
//
//   - throughput/*: benchBytes from a client to a port on the node that reads them to the end
//     and answers with their count, timed from the first byte to the answer; each iteration on a
//     new connection, opened untimed. raw-tcp connects to the port directly, ssh-L through
//     OpenSSH's own forward (`ssh -N -L`) to a local sshd, tunnel through a tunnel, and
//     tunnel-rtt50ms through a tunnel whose daemon's data plane has benchRTT of injected round
//     trip (sim.DelayConn, the simulator's TunnelRTT), and tunnel-websocket through a tunnel whose
//     daemon reaches the gateway over its WebSocket listener (outer TLS, the gateway's own).
//     cli-local connects to `better-compute tunnel --local` (the binary, its own process, as
//     ssh -L is), which forwards through a tunnel as tunnel does, and cli-stdio writes to and
//     reads from a `better-compute tunnel --stdio` process per iteration (bench_cli_test.go);
//     BENCH_TUNNEL_CLI names the binary (else one is built from this tree), and
//     BENCH_TUNNEL_CLI_BASELINE another, run beside it as cli-*-baseline, to compare two builds
//     in one run. The cases through a process (ssh -L, the CLI) also report its CPU time per
//     byte carried (hop-cpu-ns/B), which the machine's other work changes less than the time.
//   - download/*: the other direction: benchBytes from a port on the node that writes them once
//     the client's first byte came (the time starts then) and half-closes, read to the end by
//     the client, through the same paths (curl of a file through the CLI is this direction).
//   - open/*: benchTunnels tunnels opened one after the other, each timed from tunnels/create to
//     its first byte echoed by the node's port (create, upgrade, the gateway's TunnelOpen, the
//     daemon's dial and data-plane stream, one round trip); reported as p50 and p99, and as
//     ns/op per tunnel.
//   - memory: benchTunnels idle tunnels held open; the growth of the Go heap (HeapInuse) and of
//     goroutine stacks (StackInuse) per tunnel, after garbage collection. Everything shares this
//     process, so the figure covers every hop and both ends: the SDK client, the API, the
//     gateway, the daemon and the node's port. The heap is also attributed to them by the
//     allocations' stacks (a memory profile at rate 1 while the tunnels open), logged and
//     reported per hop.
func BenchmarkTunnel(b *testing.B) {
	e := newEnvWith(b, envOptions{gateway: gatewaytest.WebSocket(b, true)})
	sinkPort, echoPort := listen(b, sink), listen(b, echo)
	data := make([]byte, 1<<20)
	_, _ = rand.Read(data)
	sourcePort := listen(b, source(data))
	ports := []int{sinkPort.port, echoPort.port, sourcePort.port}
	direct := e.startFake(fakeOptions{tunnelPorts: ports})
	// The same daemon protocol inside a WebSocket with the gateway's own outer TLS: two TLS
	// layers, as through a CONNECT proxy.
	overWS := e.startFake(fakeOptions{tunnelPorts: ports, dialer: func(d *daemon.Dialer) {
		d.Transport, d.WebSocketURL = daemon.TransportWebSocket, e.gw.WebSocketURL
	}})
	delayed := e.startFake(fakeOptions{tunnelPorts: ports, tunnelDial: func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := (&net.Dialer{}).DialContext(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return sim.DelayConn(c, benchRTT/2), nil
	}})
	e.allow(direct, ports...)
	e.allow(overWS, ports...)
	e.allow(delayed, ports...)
	sinkAddr, sourceAddr := sinkPort.ln.Addr().String(), sourcePort.ln.Addr().String()

	tcp := func(addr string) func(b *testing.B) halfCloser {
		return func(b *testing.B) halfCloser {
			b.Helper()
			c, err := net.Dial("tcp", addr)
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { _ = c.Close() })
			return c.(*net.TCPConn)
		}
	}
	tcpThrough := func(addr string, pid int) func(b *testing.B) halfCloser {
		dial := tcp(addr)
		return func(b *testing.B) halfCloser {
			b.Helper()
			return procConn{dial(b), pid}
		}
	}
	through := func(n *node, port int) func(b *testing.B) halfCloser {
		return func(b *testing.B) halfCloser {
			b.Helper()
			c, err := e.admin.Tunnel(ctx, n.id, port)
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { _ = c.Close() })
			return c
		}
	}
	b.Run("throughput=raw-tcp", func(b *testing.B) { throughput(b, tcp(sinkAddr), data) })
	b.Run("throughput=ssh-L", func(b *testing.B) {
		sshd := startSSHD(b)
		throughput(b, tcpThrough(sshd.forward(b, sinkPort.port)), data)
	})
	b.Run("throughput=tunnel", func(b *testing.B) { throughput(b, through(direct, sinkPort.port), data) })
	b.Run("throughput=tunnel-websocket", func(b *testing.B) { throughput(b, through(overWS, sinkPort.port), data) })
	b.Run("throughput=tunnel-rtt50ms", func(b *testing.B) { throughput(b, through(delayed, sinkPort.port), data) })
	clis := []struct{ suffix, bin string }{{"", ""}}
	if base := os.Getenv("BENCH_TUNNEL_CLI_BASELINE"); base != "" {
		clis = append(clis, struct{ suffix, bin string }{"-baseline", base})
	}
	cliLocalTo := func(b *testing.B, bin string, port int) func(*testing.B) halfCloser {
		b.Helper()
		if bin == "" {
			bin = cliBinary(b)
		}
		addr, pid := cliLocal(b, e, bin, direct, port)
		return tcpOpened(e, addr, pid, direct)
	}
	cliStdioTo := func(b *testing.B, bin string, port int) func(*testing.B) halfCloser {
		b.Helper()
		if bin == "" {
			bin = cliBinary(b)
		}
		return cliStdio(e, bin, direct, port)
	}
	for _, cli := range clis {
		b.Run("throughput=cli-local"+cli.suffix, func(b *testing.B) { throughput(b, cliLocalTo(b, cli.bin, sinkPort.port), data) })
	}
	for _, cli := range clis {
		b.Run("throughput=cli-stdio"+cli.suffix, func(b *testing.B) { throughput(b, cliStdioTo(b, cli.bin, sinkPort.port), data) })
	}
	b.Run("download=raw-tcp", func(b *testing.B) { download(b, tcp(sourceAddr)) })
	b.Run("download=ssh-L", func(b *testing.B) {
		sshd := startSSHD(b)
		download(b, tcpThrough(sshd.forward(b, sourcePort.port)))
	})
	b.Run("download=tunnel", func(b *testing.B) { download(b, through(direct, sourcePort.port)) })
	for _, cli := range clis {
		b.Run("download=cli-local"+cli.suffix, func(b *testing.B) { download(b, cliLocalTo(b, cli.bin, sourcePort.port)) })
	}
	for _, cli := range clis {
		b.Run("download=cli-stdio"+cli.suffix, func(b *testing.B) { download(b, cliStdioTo(b, cli.bin, sourcePort.port)) })
	}
	b.Run("open=direct", func(b *testing.B) { opens(b, e, direct, echoPort.port) })
	b.Run("open=websocket", func(b *testing.B) { opens(b, e, overWS, echoPort.port) })
	b.Run("open=rtt50ms", func(b *testing.B) { opens(b, e, delayed, echoPort.port) })
	b.Run("memory", func(b *testing.B) { memory(b, e, direct, echoPort.port) })
}

// throughput sends benchBytes (data, repeated) on a new connection per iteration and waits for
// the sink's count.
func throughput(b *testing.B, dial func(*testing.B) halfCloser, data []byte) {
	b.Helper()
	b.SetBytes(benchBytes)
	var cpu hopCPU
	b.ResetTimer()
	for range b.N {
		b.StopTimer()
		c := dial(b)
		b.StartTimer()
		cpu.around(c, func() {
			for sent := 0; sent < benchBytes; sent += len(data) {
				if _, err := c.Write(data); err != nil {
					b.Fatal(err)
				}
			}
			if err := c.CloseWrite(); err != nil {
				b.Fatal(err)
			}
			got, err := io.ReadAll(c)
			if err != nil || string(got) != strconv.Itoa(benchBytes) {
				b.Fatalf("the sink read %q bytes (%v), want %d", got, err, benchBytes)
			}
		})
	}
	cpu.report(b, b.N)
}

// source is the node's end of the download benchmarks: after the client's first byte it writes
// benchBytes (data, repeated), half-closes, and reads to the end.
func source(data []byte) func(*net.TCPConn) {
	return func(c *net.TCPConn) {
		if _, err := io.ReadFull(c, make([]byte, 1)); err != nil {
			return
		}
		for sent := 0; sent < benchBytes; sent += len(data) {
			if _, err := c.Write(data); err != nil {
				return
			}
		}
		_ = c.CloseWrite()
		_, _ = io.Copy(io.Discard, c)
	}
}

// download reads benchBytes from a source port on a new connection per iteration, timed from the
// byte that starts it to the end of the stream.
func download(b *testing.B, dial func(*testing.B) halfCloser) {
	b.Helper()
	b.SetBytes(benchBytes)
	buf := make([]byte, 1<<20)
	var cpu hopCPU
	b.ResetTimer()
	for range b.N {
		b.StopTimer()
		c := dial(b)
		b.StartTimer()
		cpu.around(c, func() {
			if _, err := c.Write([]byte{1}); err != nil {
				b.Fatal(err)
			}
			n, err := io.CopyBuffer(io.Discard, struct{ io.Reader }{c}, buf)
			if err != nil || n != benchBytes {
				b.Fatalf("read %d bytes from the source (%v), want %d", n, err, benchBytes)
			}
		})
		b.StopTimer()
		if err := c.CloseWrite(); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
	}
	cpu.report(b, b.N)
}

// opens opens benchTunnels tunnels per iteration, one at a time, and reports the open time's
// percentiles.
func opens(b *testing.B, e *env, n *node, port int) {
	b.Helper()
	var took []time.Duration
	one := make([]byte, 1)
	for range b.N {
		for range benchTunnels {
			start := time.Now()
			c, err := e.admin.Tunnel(ctx, n.id, port)
			if err != nil {
				b.Fatal(err)
			}
			if _, err := c.Write(one); err != nil {
				b.Fatal(err)
			}
			if _, err := io.ReadFull(c, one); err != nil {
				b.Fatal(err)
			}
			took = append(took, time.Since(start))
			b.StopTimer()
			closeTunnel(b, c)
			b.StartTimer()
		}
	}
	slices.Sort(took)
	var sum time.Duration
	for _, d := range took {
		sum += d
	}
	b.ReportMetric(float64(sum.Nanoseconds())/float64(len(took)), "ns/op")
	b.ReportMetric(ms(took[len(took)/2]), "p50-ms")
	b.ReportMetric(ms(took[(len(took)*99-1)/100]), "p99-ms")
	b.ReportMetric(ms(took[len(took)-1]), "max-ms")
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// closeTunnel ends a tunnel to the echo port cleanly: half-close, read its hash to the end,
// close.
func closeTunnel(b *testing.B, c *client.TunnelConn) {
	b.Helper()
	if err := c.CloseWrite(); err != nil {
		b.Fatal(err)
	}
	if _, err := io.Copy(io.Discard, c); err != nil {
		b.Fatal(err)
	}
	if err := c.Close(); err != nil {
		b.Fatal(err)
	}
}

// memory holds benchTunnels idle tunnels open per iteration and reports what the process grew by
// per tunnel, in all and by hop.
func memory(b *testing.B, e *env, n *node, port int) {
	b.Helper()
	rate := runtime.MemProfileRate
	runtime.MemProfileRate = 1 // every allocation from here on, for the attribution to hops
	defer func() { runtime.MemProfileRate = rate }()
	var heap, stack, goroutines float64
	byHop := map[string]float64{}
	goroutinesByHop := map[string]float64{}
	for range b.N {
		before, heapBefore, gBefore := settle()
		conns := make([]*client.TunnelConn, 0, benchTunnels)
		for range benchTunnels {
			c, err := e.admin.Tunnel(ctx, n.id, port)
			if err != nil {
				b.Fatal(err)
			}
			if _, err := c.Write([]byte{1}); err != nil {
				b.Fatal(err)
			}
			if _, err := io.ReadFull(c, make([]byte, 1)); err != nil {
				b.Fatal(err)
			}
			conns = append(conns, c)
		}
		poll.Until(b, 10*time.Second, "the gateway and the daemon hold every tunnel", func() bool {
			return e.gw.Tunnels() == benchTunnels && n.fake.Status().Tunnels == benchTunnels
		})
		after, heapAfter, gAfter := settle()
		heap += float64(after.HeapInuse) - float64(before.HeapInuse)
		stack += float64(after.StackInuse) - float64(before.StackInuse)
		goroutines += float64(len(gAfter.all) - len(gBefore.all))
		for hop, v := range heapAfter {
			byHop[hop] += float64(v - heapBefore[hop])
		}
		for hop, v := range gAfter.byHop {
			goroutinesByHop[hop] += float64(v - gBefore.byHop[hop])
		}
		b.StopTimer()
		for _, c := range conns {
			closeTunnel(b, c)
		}
		b.StartTimer()
	}
	per := float64(b.N * benchTunnels)
	b.ReportMetric(heap/per, "heap-B/tunnel")
	b.ReportMetric(stack/per, "stack-B/tunnel")
	b.ReportMetric(goroutines/per, "goroutines/tunnel")
	var lines []string
	for _, hop := range hops {
		b.ReportMetric(byHop[hop.name]/per, hop.name+"-heap-B/tunnel")
		lines = append(lines, fmt.Sprintf("%-9s heap %8.0f B/tunnel, %5.2f goroutines/tunnel", hop.name, byHop[hop.name]/per, goroutinesByHop[hop.name]/per))
	}
	b.Logf("per open idle tunnel, by hop (the heap by the allocations' stacks, as of the last GC):\n%s", strings.Join(lines, "\n"))
}

// hop is a part of the path, recognised in a stack by a part of its functions' names: the
// first hop named by a frame, innermost first, is the allocation's or goroutine's; the
// standard library's HTTP servers and clients are placed by which of them only one hop runs.
type hop struct {
	name  string
	funcs []string // checked before the standard library's
	std   []string
}

var hops = []hop{
	{"client", []string{"/better-compute/client."}, []string{"net/http.(*persistConn)"}},
	// The API is the process's only HTTP/1.1 server with long-lived connections: the WebSockets.
	{"api", []string{"/server/internal/tunnels.", "/internal/tunnelhop.(*Dialer)"}, []string{"net/http.(*conn)"}},
	// The gateway runs the process's only HTTP/2 servers.
	{"gateway", []string{"/gateway."}, []string{"net/http.(*http2serverConn)", "net/http.(*http2Server)", "net/http.(*http2responseWriter", "net/http.(*http2requestBody)"}},
	{"daemon", []string{"/internal/daemon."}, nil},
	// The API's and the daemon's HTTP/2 streams to the gateway share the transport's code (the
	// API's relay reads its response body from it).
	{"h2client", nil, []string{"net/http.(*http2ClientConn)", "net/http.(*http2clientConnReadLoop)", "net/http.(*http2clientStream)",
		"net/http.(*http2Transport)", "net/http.http2transportResponseBody"}},
	{"port", []string{"/internal/e2e/tunnels_test."}, nil},
	{"other", nil, nil},
}

// hopOf places a stack, its functions' names innermost first, one per line.
func hopOf(stack string) string {
	for _, std := range []bool{false, true} {
		best, at := "", -1
		for _, h := range hops {
			pats := h.funcs
			if std {
				pats = h.std
			}
			for _, p := range pats {
				if i := strings.Index(stack, p); i >= 0 && (at < 0 || i < at) {
					best, at = h.name, i
				}
			}
		}
		if best != "" {
			return best
		}
	}
	return "other"
}

// goroutineCensus is the process's goroutines, placed by hop.
type goroutineCensus struct {
	all   []string
	byHop map[string]int
}

// settle collects garbage until the memory profile reflects it, and returns the memory
// statistics, the profiled heap in use by hop, and the goroutines.
func settle() (runtime.MemStats, map[string]int64, goroutineCensus) {
	for range 3 { // the profile is published a cycle late
		runtime.GC()
	}
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms, profiledHeap(), goroutines()
}

// profiledHeap is the in-use heap of the memory profile, by hop.
func profiledHeap() map[string]int64 {
	var recs []runtime.MemProfileRecord
	for n := 1024; ; n *= 2 {
		recs = make([]runtime.MemProfileRecord, n)
		got, ok := runtime.MemProfile(recs, true)
		if ok {
			recs = recs[:got]
			break
		}
	}
	out := map[string]int64{}
	var names strings.Builder
	for _, r := range recs {
		names.Reset()
		frames := runtime.CallersFrames(r.Stack())
		for {
			f, more := frames.Next()
			names.WriteString(f.Function)
			names.WriteByte('\n')
			if !more {
				break
			}
		}
		out[hopOf(names.String())] += r.InUseBytes()
	}
	return out
}

// goroutines dumps every goroutine's stack, with its creator, and places each by hop.
func goroutines() goroutineCensus {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	c := goroutineCensus{all: strings.Split(strings.TrimSpace(string(buf)), "\n\n"), byHop: map[string]int{}}
	for _, g := range c.all {
		c.byHop[hopOf(g)]++
	}
	return c
}

// forward starts OpenSSH's own forward of a local port to port on this machine through the
// server (`ssh -N -L`), until the benchmark ends, and returns the local address and the ssh
// process's id.
func (s *sshd) forward(b *testing.B, port int) (string, int) {
	b.Helper()
	local := "127.0.0.1:" + strconv.Itoa(freePort(b))
	args := append(s.clientArgs(), "-N", "-o", "ExitOnForwardFailure=yes", "-L", local+":127.0.0.1:"+strconv.Itoa(port),
		"-p", strconv.Itoa(s.port), s.user+"@127.0.0.1")
	cmd := exec.Command("ssh", args...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	b.Cleanup(func() { _ = cmd.Process.Kill(); <-exited })
	poll.Until(b, 10*time.Second, "ssh forwards "+local, func() bool {
		select {
		case <-exited:
			b.Fatalf("ssh -L exited: %s", stderr.String())
		default:
		}
		c, err := net.Dial("tcp", local)
		if err != nil {
			return false
		}
		_ = c.Close()
		return true
	}, poll.Every(50*time.Millisecond))
	return local, cmd.Process.Pid
}
