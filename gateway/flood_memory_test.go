package gateway_test

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"runtime"
	"runtime/pprof"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/better-compute/better-compute/gen/go/bettercompute/daemon/v1/daemonv1connect"
	"github.com/better-compute/better-compute/internal/limit"
	"github.com/better-compute/better-compute/internal/poll"
)

// The memory figure of docs/benchmarks.md ("Unauthenticated connections"): the gateway's memory
// before and under BC_FLOOD_CONNS connections without a certificate doing their worst, from a
// separate process, while a connected node keeps completing commands. Run alone:
//
//	BC_FLOOD_CONNS=1000 go test -count=1 -run '^TestAnonymousFloodMemory$' -v ./gateway
//
// The flood runs in a child process (this test binary again, TestAnonymousFloodClient), so that
// this process's memory is the gateway's (with the test's database pool and one FakeDaemon).

// floodEnv names the child's settings.
const (
	floodConnsEnv = "BC_FLOOD_CONNS"
	floodAddrEnv  = "BC_FLOOD_ADDR"
	floodRootEnv  = "BC_FLOOD_ROOT_CA"
)

// floodAddressConns is how many connections the child opens from each loopback address: under
// the default per-address cap (64), so that the default total (512) is what bounds them.
const floodAddressConns = 50

//nolint:paralleltest // measures the whole process's memory; run alone
func TestAnonymousFloodMemory(t *testing.T) {
	n, _ := strconv.Atoi(os.Getenv(floodConnsEnv))
	if n == 0 {
		t.Skip(floodConnsEnv + " is not set")
	}
	e := newEnv(t)
	g := e.StartGateway("gw1", nil) // the default limits
	f := e.startFake(g.Addr, e.token(1, time.Now().Add(time.Hour)))
	node := f.Status().NodeID
	root := t.TempDir() + "/root.pem"
	if err := os.WriteFile(root, e.bundle.RootPEM(), 0o600); err != nil {
		t.Fatal(err)
	}
	rssBefore, heapBefore := rss(t), heapInUse()

	cctx, stop := context.WithCancel(ctx)
	defer stop()
	child := exec.CommandContext(cctx, os.Args[0], "-test.run=^TestAnonymousFloodClient$", "-test.v")
	child.Env = append(os.Environ(), floodAddrEnv+"="+g.Addr, floodRootEnv+"="+root)
	var out bytes.Buffer
	child.Stdout, child.Stderr = &out, &out
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { stop(); _ = child.Wait() }()
	started := time.Now()
	held := min(n, limit.DefaultGatewayAnonymousConns)
	poll.Until(t, 5*time.Minute, "the flood's connections are held", func() bool { return g.AnonymousConns() >= held })
	t.Logf("%d anonymous connections held after %s", g.AnonymousConns(), time.Since(started).Round(time.Millisecond))
	// Let every stream send what its windows let it.
	time.Sleep(10 * time.Second) // a measurement, not a wait for a condition
	id := e.command(node, "echo", `{"data":{"during":"flood"}}`, "flood")
	g.Poke(uuid.MustParse(node))
	took := poll.Until(t, 30*time.Second, "the node's command succeeds during the flood", func() bool { s, _ := e.commandState(id); return s == "succeeded" })
	rssUnder, heapUnder := rss(t), heapInUse()
	if p := os.Getenv("BC_FLOOD_HEAP_PROFILE"); p != "" {
		if f, err := os.Create(p); err == nil {
			_ = pprof.WriteHeapProfile(f)
			_ = f.Close()
		}
	}
	t.Logf("RSS %d MiB before, %d MiB under the flood (+%d MiB); Go heap %d MiB before, %d MiB under; %d goroutines",
		rssBefore>>20, rssUnder>>20, (int64(rssUnder)-int64(rssBefore))>>20, heapBefore>>20, heapUnder>>20, runtime.NumGoroutine())
	t.Logf("refused: %d connections (total), %d (address), %d requests in flight (total), %d (address), %d read timeouts; command round trip %s",
		g.AnonymousRefusals("connections"), g.AnonymousRefusals("address_connections"), g.AnonymousRefusals("joins"),
		g.AnonymousRefusals("address_joins"), g.AnonymousRefusals("read_timeout"), took)
	if rssUnder > rssBefore+256<<20 {
		t.Errorf("the flood took the process from %d MiB to %d MiB, want under +256 MiB", rssBefore>>20, rssUnder>>20)
	}
	stop()
	_ = child.Wait()
	if t.Failed() {
		t.Log(out.String())
	}
}

// TestAnonymousFloodClient is TestAnonymousFloodMemory's child: it opens BC_FLOOD_CONNS
// connections without a certificate to BC_FLOOD_ADDR, floodAddressConns from each of
// 127.0.0.2, 127.0.0.3, …, each sending Joins of 65,000 bytes that never end, until it is
// killed.
//
//nolint:paralleltest // a child process of TestAnonymousFloodMemory
func TestAnonymousFloodClient(t *testing.T) {
	addr := os.Getenv(floodAddrEnv)
	if addr == "" {
		t.Skip("run by TestAnonymousFloodMemory")
	}
	n, _ := strconv.Atoi(os.Getenv(floodConnsEnv))
	rootPEM, err := os.ReadFile(os.Getenv(floodRootEnv))
	if err != nil {
		t.Fatal(err)
	}
	for i := range n {
		from := fmt.Sprintf("127.0.%d.%d", (2+i/floodAddressConns)/250, 2+(i/floodAddressConns)%250)
		c := floodClient(addr, from, rootPEM)
		for range 8 {
			go func() {
				for { // a refused or cut-off Join is sent again
					flood1(c, addr, 65_000)
					time.Sleep(100 * time.Millisecond) // the attacker's pace
				}
			}()
		}
	}
	time.Sleep(time.Hour) // until killed
}

// flood1 sends one Join of bodyBytes that never ends, and returns when it is answered or fails.
func flood1(c *http.Client, addr string, bodyBytes int) {
	body := newEndlessBody(bodyBytes, nil)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "https://"+addr+daemonv1connect.DaemonServiceJoinProcedure, body)
	if err != nil {
		return
	}
	req.Header.Set("Content-Type", "application/proto")
	if res, err := c.Do(req); err == nil {
		_, _ = io.Copy(io.Discard, res.Body)
		_ = res.Body.Close()
	}
}

// rss is this process's resident set (VmRSS).
func rss(t *testing.T) uint64 {
	t.Helper()
	runtime.GC()
	f, err := os.Open("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		if v, ok := strings.CutPrefix(s.Text(), "VmRSS:"); ok {
			kb, err := strconv.ParseUint(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return kb << 10
		}
	}
	t.Fatal("no VmRSS")
	return 0
}
