package gpuhealth_test

import (
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/better-compute/better-compute/internal/gpuhealth"
	"github.com/better-compute/better-compute/internal/poll"
	"github.com/better-compute/better-compute/internal/sim"
)

// BenchmarkFaultToQuarantine measures, with a simulated fleet of BENCH_GPU_NODES machines (1,000
// by default) holding sessions through the gateway, how long an Xid 79 takes from its injection
// into a FakeDaemon to its GPU being unhealthy in PostgreSQL: the daemon's snapshot, the
// session, the gateway's statement, the wake, the health reconciler's transaction. Faults are
// injected one at a time on random GPUs of random GPU machines; it reports p50, p99 and max.
func BenchmarkFaultToQuarantine(b *testing.B) {
	nodes := 1000
	if s := os.Getenv("BENCH_GPU_NODES"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			b.Fatalf("BENCH_GPU_NODES=%q", s)
		}
		nodes = n
	}
	sys := newSystem(b, nodes)
	f, err := sim.New(sim.Options{Gateway: sys.gateway, RootPEM: sys.rootPEM, Token: sys.token, N: nodes, Seed: 33})
	if err != nil {
		b.Fatal(err)
	}
	sys.wg.Go(func() { _ = f.Run(sys.ctx) })
	if _, err := f.WaitConnected(sys.ctx); err != nil {
		b.Fatal(err)
	}
	type gpu struct {
		host  string
		index int
	}
	var gpus []gpu
	for i := range f.Len() {
		inv := sim.Inventory(33, i, "sim")
		for g := range inv.GetGpus() {
			gpus = append(gpus, gpu{inv.GetHostname(), g})
		}
	}
	if len(gpus) == 0 {
		b.Fatal("the simulated fleet has no GPUs")
	}
	b.Logf("%d machines, %d GPUs", nodes, len(gpus))
	// Steady state: the machines hold their sessions and beat, nothing fails; the health tables
	// must see no writes at all (health is written on change, never per heartbeat).
	// PostgreSQL's statistics reach pg_stat_user_tables up to 10 s after the writes (an idle
	// backend flushes them then), so each count is read after a pause that long.
	steadyFor := 20 * time.Second
	poll.Until(b, 5*time.Minute, "the fleet's first snapshots are stored", func() bool {
		return sys.count(b, `SELECT count(*) FROM node_gpu_health`) == nodes
	})
	pause(statsLag)
	settled := healthWrites(b, sys)
	pause(steadyFor)
	steady := healthWrites(b, sys) - settled
	b.Logf("health writes in %v of steady state with %d machines: %d", steadyFor, nodes, steady)

	r := rand.New(rand.NewPCG(33, 79))
	var took []time.Duration
	faultsBefore := healthWrites(b, sys)
	for b.Loop() {
		g := gpus[r.IntN(len(gpus))]
		start := time.Now()
		if err := f.InjectGPU(g.host, g.index, gpuhealth.CheckXid, 79, 1, ""); err != nil {
			b.Fatal(err)
		}
		h, err := f.GPUHealth(g.host)
		if err != nil {
			b.Fatal(err)
		}
		uuid := ""
		for _, s := range h.GetSignals() {
			if s.GetCode() == 79 && s.GetCheck() == gpuhealth.CheckXid {
				uuid = s.GetGpuUuid()
			}
		}
		for {
			var n int
			if err := sys.env.Pool.QueryRow(sys.ctx, `SELECT count(*) FROM devices WHERE uuid = $1 AND health = 'unhealthy'`, uuid).Scan(&n); err != nil {
				b.Fatal(err)
			}
			if n == 1 {
				break
			}
			if time.Since(start) > 30*time.Second {
				b.Fatalf("GPU %s of %s not unhealthy after 30s", uuid, g.host)
			}
			time.Sleep(2 * time.Millisecond) // polling the database: the cost of looking, not a wait for a signal we could get
		}
		took = append(took, time.Since(start))
		b.StopTimer()
		if err := f.ClearGPU(g.host); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
	}
	b.StopTimer()
	pause(statsLag)
	perFault := float64(healthWrites(b, sys)-faultsBefore) / float64(len(took))
	slices.Sort(took)
	pct := func(p float64) float64 { return float64(took[int(p*float64(len(took)-1))].Microseconds()) / 1000 }
	b.ReportMetric(pct(0.5), "p50-ms")
	b.ReportMetric(pct(0.99), "p99-ms")
	b.ReportMetric(pct(1), "max-ms")
	b.ReportMetric(float64(nodes), "nodes")
	b.ReportMetric(float64(steady)/steadyFor.Seconds(), "steady-writes/s")
	b.ReportMetric(perFault, "writes/fault")
}

// healthWrites is the rows written (inserted, updated, deleted) to the GPU health tables and the
// health reconciler's queue so far, as PostgreSQL's statistics count them once flushed.
func healthWrites(b *testing.B, sys *system) int64 {
	b.Helper()
	var n int64
	if err := sys.env.Pool.QueryRow(sys.ctx, `SELECT COALESCE(sum(n_tup_ins + n_tup_upd + n_tup_del), 0)::bigint FROM pg_stat_user_tables
		WHERE relname IN ('node_gpu_health', 'devices', 'gpu_health_changes', 'reconcile_queue')`).Scan(&n); err != nil {
		b.Fatal(err)
	}
	return n
}

// statsLag is how long PostgreSQL may take to publish a backend's statistics.
const statsLag = 11 * time.Second

// pause waits d: the benchmark measures what happens in that time.
func pause(d time.Duration) {
	t := time.NewTimer(d)
	<-t.C
}
