package gateway_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"runtime/pprof"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/better-compute/better-compute/gateway"
	"github.com/better-compute/better-compute/internal/daemon"
	"github.com/better-compute/better-compute/internal/poll"
)

// The figure of docs/benchmarks.md "Gateway memory per idle session": what a gateway at its
// default configuration holds for each connected, idle daemon. Run alone:
//
//	BC_SESSION_MEM=1000 go test -count=1 -run '^TestIdleSessionMemory$' -v ./gateway
//
// The daemons (FakeDaemons) run in a child process (this test binary again,
// TestIdleSessionClient), so that this process's memory is the gateway's (with the test's
// database pool). BC_SESSION_HEAP_PROFILE names a file for a heap profile taken with all the
// sessions held. It reports; it asserts no figure.

// The settings of the child.
const (
	sessionMemEnv   = "BC_SESSION_MEM"
	sessionAddrEnv  = "BC_SESSION_ADDR"
	sessionRootEnv  = "BC_SESSION_ROOT_CA"
	sessionTokenEnv = "BC_SESSION_TOKEN"
)

// memSample is the process's memory at one moment, after a collection.
type memSample struct {
	rss, heap, stack uint64
	goroutines       int
}

func sampleMemory(t *testing.T) memSample {
	t.Helper()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return memSample{rss: rss(t), heap: m.HeapAlloc, stack: m.StackInuse, goroutines: runtime.NumGoroutine()}
}

//nolint:paralleltest // measures the whole process's memory; run alone
func TestIdleSessionMemory(t *testing.T) {
	n, _ := strconv.Atoi(os.Getenv(sessionMemEnv))
	if n == 0 {
		t.Skip(sessionMemEnv + " is not set")
	}
	if os.Getenv("BC_SESSION_HEAP_PROFILE") != "" {
		runtime.MemProfileRate = 256 // every allocation of the sessions, near enough
	}
	e := newEnv(t)
	// The default configuration, but for the tenant's node cap.
	g := e.StartGateway("gw1", func(o *gateway.Options) {
		o.HeartbeatInterval, o.DispatchInterval, o.TenantNodes = 0, 0, n+100
	})
	dir := t.TempDir()
	root := dir + "/root.pem"
	if err := os.WriteFile(root, e.bundle.RootPEM(), 0o600); err != nil {
		t.Fatal(err)
	}
	before := sampleMemory(t)

	cctx, stop := context.WithCancel(ctx)
	defer stop()
	child := exec.CommandContext(cctx, os.Args[0], "-test.run=^TestIdleSessionClient$", "-test.v")
	child.Env = append(os.Environ(), sessionAddrEnv+"="+g.Addr, sessionRootEnv+"="+root,
		sessionTokenEnv+"="+e.token(int32(n), time.Now().Add(time.Hour)))
	var out bytes.Buffer
	child.Stdout, child.Stderr = &out, &out
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { stop(); _ = child.Wait() }()
	started := time.Now()
	poll.Until(t, 10*time.Minute, "the daemons hold their sessions", func() bool { return g.Sessions() >= n })
	t.Logf("%d sessions held after %s", g.Sessions(), time.Since(started).Round(time.Millisecond))
	// Let the joins' garbage go and a round of heartbeats pass.
	time.Sleep(15 * time.Second) // a measurement, not a wait for a condition
	held := sampleMemory(t)
	if p := os.Getenv("BC_SESSION_HEAP_PROFILE"); p != "" {
		if f, err := os.Create(p); err == nil {
			_ = pprof.WriteHeapProfile(f)
			_ = f.Close()
		}
	}
	per := func(a, b uint64) float64 { return (float64(b) - float64(a)) / float64(n) / 1024 }
	t.Logf("per session: RSS %.1f KiB, Go heap %.1f KiB, stacks %.1f KiB, %.2f goroutines (RSS %d → %d MiB, heap %d → %d MiB)",
		per(before.rss, held.rss), per(before.heap, held.heap), per(before.stack, held.stack),
		float64(held.goroutines-before.goroutines)/float64(n), before.rss>>20, held.rss>>20, before.heap>>20, held.heap>>20)
	stop()
	_ = child.Wait()
	if t.Failed() {
		t.Log(out.String())
	}
}

// TestIdleSessionClient is TestIdleSessionMemory's child: it joins BC_SESSION_MEM FakeDaemons
// through BC_SESSION_ADDR, 16 at a time, and runs them until it is killed.
//
//nolint:paralleltest // a child process of TestIdleSessionMemory
func TestIdleSessionClient(t *testing.T) {
	addr := os.Getenv(sessionAddrEnv)
	if addr == "" {
		t.Skip("run by TestIdleSessionMemory")
	}
	n, _ := strconv.Atoi(os.Getenv(sessionMemEnv))
	rootPEM, err := os.ReadFile(os.Getenv(sessionRootEnv))
	if err != nil {
		t.Fatal(err)
	}
	token := os.Getenv(sessionTokenEnv)
	next := make(chan int)
	go func() {
		for i := range n {
			next <- i
		}
		close(next)
	}()
	var wg sync.WaitGroup
	for range 16 {
		wg.Go(func() {
			for i := range next {
				f, err := daemon.JoinFake(ctx, rootPEM, token, fmt.Sprintf("idle-%d", i), daemon.FakeOptions{Dialer: daemon.Dialer{Gateway: addr}})
				if err != nil {
					t.Error(err)
					continue
				}
				go func() { _ = f.Run(ctx) }()
			}
		})
	}
	wg.Wait()
	time.Sleep(time.Hour) // until killed
}
