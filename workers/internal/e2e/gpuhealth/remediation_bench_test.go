package gpuhealth_test

import (
	"encoding/json"
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	poolsv1 "github.com/better-compute/better-compute/gen/go/bettercompute/pools/v1"
	"github.com/better-compute/better-compute/gen/go/bettercompute/pools/v1/poolsv1connect"
	"github.com/better-compute/better-compute/internal/gpuhealth"
	"github.com/better-compute/better-compute/internal/poll"
	"github.com/better-compute/better-compute/internal/reconcile"
	"github.com/better-compute/better-compute/internal/remediation"
	"github.com/better-compute/better-compute/internal/sim"
	"github.com/better-compute/better-compute/workers/internal/remediator"
)

// benchVerifyWindow replaces every verify step's 10-minute window in the remediation benchmarks:
// the window is a policy's choice of how long a GPU must stay clean, not a cost of the system,
// so the benchmarks keep it short and report it.
const benchVerifyWindow = time.Second

// benchPoll is the remediation controller's Options.Poll in the benchmarks (BENCH_REMEDY_POLL, a
// Go duration): how often a step waiting on a command is looked at again. The default is the
// deployment's, remediator.DefaultPoll.
func benchPoll(b *testing.B) time.Duration {
	b.Helper()
	s := os.Getenv("BENCH_REMEDY_POLL")
	if s == "" {
		return remediator.DefaultPoll
	}
	d, err := time.ParseDuration(s)
	if err != nil || d <= 0 {
		b.Fatalf("BENCH_REMEDY_POLL=%q", s)
	}
	return d
}

// envInt is the positive integer in the environment variable name, or def.
func envInt(b *testing.B, name string, def int) int {
	b.Helper()
	s := os.Getenv(name)
	if s == "" {
		return def
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 {
		b.Fatalf("%s=%q", name, s)
	}
	return n
}

// simGPU is one GPU of the simulated fleet.
type simGPU struct {
	host  string
	index int
}

// remedyFleet is a simulated fleet of n machines (seed seed) holding sessions through the
// gateway of a system with the remediation controller, every machine ready and online, and a
// pool "fleet" selecting all of them. It returns the system, the fleet, the pool's id and the
// fleet's GPUs by machine (machines without GPUs left out).
func remedyFleet(b *testing.B, n int, seed uint64, pollEvery time.Duration) (*system, *sim.Fleet, string, map[string][]simGPU) {
	b.Helper()
	sys := newSystemWith(b, n, func(pool *pgxpool.Pool, poke func(kind string)) []reconcile.Registration {
		return []reconcile.Registration{remediator.Registration(pool, remediator.Options{
			Wake: poke, VerifyWindow: benchVerifyWindow, Poll: pollEvery,
		})}
	})
	// RebootDowntime is left at its default: daemon.DefaultRebootDowntime (2 s).
	f, err := sim.New(sim.Options{Gateway: sys.gateway, RootPEM: sys.rootPEM, Token: sys.token, N: n, Seed: seed})
	if err != nil {
		b.Fatal(err)
	}
	sys.wg.Go(func() { _ = f.Run(sys.ctx) })
	start := time.Now()
	if _, err := f.WaitConnected(sys.ctx); err != nil {
		b.Fatal(err)
	}
	poll.Until(b, 5*time.Minute, "the fleet is ready and online with its first GPU snapshots", func() bool {
		return sys.count(b, `SELECT count(*) FROM nodes WHERE state = 'ready' AND online`) == n &&
			sys.count(b, `SELECT count(*) FROM node_gpu_health`) == n
	})
	b.Logf("%d machines connected, ready and online in %v", n, time.Since(start).Round(time.Millisecond))
	res, err := poolsv1connect.NewPoolsServiceClient(sys.env.HTTPClient(sys.env.AdminKey), sys.env.URL).Create(sys.ctx, &poolsv1.CreateRequest{
		Name: "fleet", NodeSelector: map[string]string{"gpu": "h100"},
	})
	if err != nil {
		b.Fatal(err)
	}
	gpus := map[string][]simGPU{}
	for i := range f.Len() {
		inv := sim.Inventory(seed, i, "sim")
		for g := range inv.GetGpus() {
			gpus[inv.GetHostname()] = append(gpus[inv.GetHostname()], simGPU{inv.GetHostname(), g})
		}
	}
	if len(gpus) == 0 {
		b.Fatal("the simulated fleet has no GPUs")
	}
	return sys, f, res.GetPool().GetId(), gpus
}

// remediationRow is a remediation as the benchmarks read it.
type remediationRow struct {
	host, ladder, state, nodeState string
	ended                          bool
	history                        []remediation.Entry
}

// remediations reads every remediation with its node's hostname and state.
func remediations(b *testing.B, sys *system) []remediationRow {
	b.Helper()
	rows, err := sys.env.Pool.Query(sys.ctx, `SELECT n.hostname, r.ladder, r.state, n.state::text, r.ended_at IS NOT NULL, r.history
		FROM remediations r JOIN nodes n ON n.id = r.node_id ORDER BY r.created_at`)
	if err != nil {
		b.Fatal(err)
	}
	defer rows.Close()
	var out []remediationRow
	for rows.Next() {
		var r remediationRow
		var h []byte
		if err := rows.Scan(&r.host, &r.ladder, &r.state, &r.nodeState, &r.ended, &h); err != nil {
			b.Fatal(err)
		}
		if err := json.Unmarshal(h, &r.history); err != nil {
			b.Fatal(err)
		}
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		b.Fatal(err)
	}
	return out
}

// dumpNode logs what the database says of host: its state, its remediations, its commands.
func dumpNode(b *testing.B, sys *system, host string) {
	b.Helper()
	var state string
	var online bool
	var health []byte
	if err := sys.env.Pool.QueryRow(sys.ctx, `SELECT n.state::text, n.online, COALESCE((SELECT jsonb_agg(jsonb_build_object('uuid', d.uuid, 'health', d.health)) FROM devices d WHERE d.node_id = n.id AND d.health <> 'healthy'), '[]')::text
		FROM nodes n WHERE n.hostname = $1`, host).Scan(&state, &online, &health); err != nil {
		b.Logf("%s: %v", host, err)
		return
	}
	b.Logf("%s: node %s online %v, unhealthy GPUs %s", host, state, online, health)
	for _, q := range []string{
		`SELECT to_jsonb(r) - 'steps' FROM remediations r JOIN nodes n ON n.id = r.node_id WHERE n.hostname = $1`,
		`SELECT jsonb_build_object('type', c.type, 'state', c.state, 'created', c.created_at, 'updated', c.updated_at, 'key', c.idempotency_key, 'error', c.error) FROM commands c JOIN nodes n ON n.id = c.node_id WHERE n.hostname = $1 ORDER BY c.created_at`,
		`SELECT to_jsonb(q) FROM reconcile_queue q WHERE q.kind = 'gpu.remediation' AND $1::text <> ''`,
	} {
		rows, err := sys.env.Pool.Query(sys.ctx, q, host)
		if err != nil {
			b.Logf("%s: %v", host, err)
			continue
		}
		for rows.Next() {
			var j []byte
			if err := rows.Scan(&j); err == nil {
				b.Logf("  %s", j)
			}
		}
		rows.Close()
	}
}

// steps is a history as "action:outcome" words.
func steps(h []remediation.Entry) string {
	var s []string
	for _, e := range h {
		s = append(s, e.Action+":"+e.Outcome)
	}
	return strings.Join(s, " ")
}

// stepTimes adds each step's length in h to sum, by action (an action done twice counted as
// "action#2").
func stepTimes(b *testing.B, h []remediation.Entry, sum map[string]time.Duration) {
	b.Helper()
	seen := map[string]int{}
	for _, e := range h {
		from, err1 := time.Parse(time.RFC3339Nano, e.StartedAt)
		to, err2 := time.Parse(time.RFC3339Nano, e.EndedAt)
		if err1 != nil || err2 != nil {
			b.Fatalf("history entry %+v", e)
		}
		seen[e.Action]++
		k := e.Action
		if seen[e.Action] > 1 {
			k = fmt.Sprintf("%s#%d", e.Action, seen[e.Action])
		}
		sum[k] += to.Sub(from)
	}
}

// percentiles is p50, p99 and max of took, in seconds.
func percentiles(took []time.Duration) (p50, p99, maximum float64) {
	s := slices.Clone(took)
	slices.Sort(s)
	at := func(p float64) float64 { return s[int(p*float64(len(s)-1))].Seconds() }
	return at(0.5), at(0.99), at(1)
}

// BenchmarkFaultToService measures, with a simulated fleet of BENCH_GPU_NODES machines (200 by
// default) holding sessions through the gateway and the remediation controller running, how long
// a GPU fault takes from its injection into a FakeDaemon to its remediation having succeeded with
// the node ready again. The pool over the fleet has its budget raised (remediation_max_nodes
// 10000, no failure domain) so that no remediation waits for another. BENCH_REMEDY_FAULTS faults
// of each kind (20 by default) are injected, one every 200 ms, alternating Xid 79 (the reboot
// ladder) and Xid 48 (the reset ladder), each on a random GPU of a different GPU machine. Verify
// windows are benchVerifyWindow (1 s, where the policy says 10 min); the controller polls
// waiting steps every BENCH_REMEDY_POLL (2 s by default, the deployment's); the FakeDaemons'
// reboot keeps them away 2 s (daemon.DefaultRebootDowntime). The simulator does not script
// FakeDaemon.SetRemedy, so a gpuReset succeeds without clearing the Xid; the verify step
// acknowledges the signals it finds and fails only on a new occurrence, so the reset ladder
// passes on its first rung all the same (the benchmark logs the steps each ladder took).
// It reports p50, p99 and max per ladder, in seconds, and logs where the time went, step by step.
func BenchmarkFaultToService(b *testing.B) {
	nodes := envInt(b, "BENCH_GPU_NODES", 200)
	perLadder := envInt(b, "BENCH_REMEDY_FAULTS", 20)
	pollEvery := benchPoll(b)
	sys, f, pool, gpus := remedyFleet(b, nodes, 35, pollEvery)
	if _, err := sys.env.Pool.Exec(sys.ctx, `UPDATE pools SET remediation_max_nodes = 10000, remediation_domain = '' WHERE id = $1`, pool); err != nil {
		b.Fatal(err)
	}
	hosts := make([]string, 0, len(gpus))
	for h := range gpus {
		hosts = append(hosts, h)
	}
	slices.Sort(hosts)
	r := rand.New(rand.NewPCG(35, 79))
	r.Shuffle(len(hosts), func(i, j int) { hosts[i], hosts[j] = hosts[j], hosts[i] })
	b.Logf("%d machines, %d with GPUs; %d faults per ladder; verify window %v, poll %v, reboot downtime 2s",
		nodes, len(gpus), perLadder, benchVerifyWindow, pollEvery)

	type fault struct {
		ladder string
		at     time.Time
		took   time.Duration
	}
	faults := map[string]*fault{} // by host
	var toStart []time.Duration   // injection to the first step's start, both ladders
	// observe records the faults whose remediation succeeded with the node ready since it last
	// looked, and reports how many of batch have not.
	observe := func(batch []string) int {
		for _, row := range remediations(b, sys) {
			ft := faults[row.host]
			if ft == nil || ft.took > 0 {
				continue
			}
			if row.ended && row.state != remediation.StateSucceeded {
				b.Fatalf("%s (%s ladder): remediation ended %s: %s", row.host, row.ladder, row.state, steps(row.history))
			}
			if row.state == remediation.StateSucceeded && row.nodeState == "ready" {
				ft.took = time.Since(ft.at)
				if first, err := time.Parse(time.RFC3339Nano, row.history[0].StartedAt); err == nil {
					toStart = append(toStart, first.Sub(ft.at))
				}
			}
		}
		left := 0
		for _, h := range batch {
			if faults[h].took == 0 {
				left++
			}
		}
		return left
	}
	next := 0
	for b.Loop() {
		var batch []string
		at := time.Now()
		for i := range 2 * perLadder {
			if next == len(hosts) {
				b.Fatalf("the fleet has %d GPU machines: too few for another %d faults", len(hosts), 2*perLadder)
			}
			h := hosts[next]
			next++
			code, ladder := int64(79), "reboot"
			if i%2 == 1 {
				code, ladder = 48, "reset"
			}
			g := gpus[h][r.IntN(len(gpus[h]))]
			faults[h] = &fault{ladder: ladder, at: time.Now()}
			if err := f.InjectGPU(g.host, g.index, gpuhealth.CheckXid, code, 1, ""); err != nil {
				b.Fatal(err)
			}
			batch = append(batch, h)
			// Look every 20 ms (polling the database: the cost of looking) until the next one.
			for at = at.Add(200 * time.Millisecond); time.Now().Before(at); {
				observe(batch)
				time.Sleep(20 * time.Millisecond)
			}
		}
		deadline := time.Now().Add(time.Minute)
		for {
			left := observe(batch)
			if left == 0 {
				break
			}
			if time.Now().After(deadline) {
				for _, h := range batch {
					if faults[h].took == 0 {
						dumpNode(b, sys, h)
					}
				}
				b.Fatalf("%d remediations not succeeded within a minute of the last fault", left)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	b.StopTimer()

	byLadder := map[string][]time.Duration{}
	for _, ft := range faults {
		byLadder[ft.ladder] = append(byLadder[ft.ladder], ft.took)
	}
	stepSum := map[string]map[string]time.Duration{"reboot": {}, "reset": {}}
	paths := map[string]map[string]int{"reboot": {}, "reset": {}}
	for _, row := range remediations(b, sys) {
		if faults[row.host] == nil {
			continue
		}
		stepTimes(b, row.history, stepSum[row.ladder])
		paths[row.ladder][steps(row.history)]++
	}
	for _, ladder := range []string{"reboot", "reset"} {
		took := byLadder[ladder]
		p50, p99, mx := percentiles(took)
		b.ReportMetric(p50, ladder+"-p50-s")
		b.ReportMetric(p99, ladder+"-p99-s")
		b.ReportMetric(mx, ladder+"-max-s")
		b.Logf("%s ladder, %d faults: p50 %.2fs p99 %.2fs max %.2fs", ladder, len(took), p50, p99, mx)
		for p, n := range paths[ladder] {
			b.Logf("  %d× %s", n, p)
		}
		var actions []string
		for a := range stepSum[ladder] {
			actions = append(actions, a)
		}
		slices.Sort(actions)
		for _, a := range actions {
			b.Logf("  mean %-12s %.2fs", a, stepSum[ladder][a].Seconds()/float64(len(took)))
		}
	}
	p50, p99, mx := percentiles(toStart)
	b.Logf("injection to the first step's start (the snapshot, the health reconciler, the opening, the controller's take), both ladders: p50 %.2fs p99 %.2fs max %.2fs", p50, p99, mx)
	b.ReportMetric(float64(nodes), "nodes")
}

// BenchmarkFaultStorm injects Xid 79 at once on 2% of the GPUs of a simulated fleet of
// BENCH_STORM_NODES machines (1,000 by default) in 50 racks (the label rack, machines in order of
// hostname, BENCH_STORM_NODES/50 to a rack), with the remediation controller running and a pool
// over the whole fleet whose budget is the default (one node per rack) except
// remediation_max_nodes = 25. Every 150 ms until every remediation has ended it samples the nodes
// out of service (state not ready, or in a running remediation), the remediations running and
// the most running in one rack; it fails if a rack ever has two running (sampled, and from the
// histories: no two remediations of a rack overlap from their first step's start to their end)
// or more than 25 run at once, and reports the peak out of service (count and fraction of the
// fleet), the peak running and how long the storm took to clear. Verify windows are 1 s, the
// controller polls every BENCH_REMEDY_POLL (2 s by default) and reboots keep a FakeDaemon away
// 2 s, as in BenchmarkFaultToService.
func BenchmarkFaultStorm(b *testing.B) {
	const racks, maxNodes = 50, 25
	nodes := envInt(b, "BENCH_STORM_NODES", 1000)
	pollEvery := benchPoll(b)
	sys, f, pool, gpus := remedyFleet(b, nodes, 36, pollEvery)
	perRack := (nodes + racks - 1) / racks
	// One node a statement: a statement over the whole fleet takes its rows' locks in an order
	// of its own and deadlocks with the gateway's writes to the same rows.
	for i := range nodes {
		if _, err := sys.env.Pool.Exec(sys.ctx, `UPDATE nodes SET labels = labels || jsonb_build_object('rack', 'r' || ($2::int / $3::int)) WHERE hostname = $1`,
			sim.Hostname("sim", i), i, perRack); err != nil {
			b.Fatal(err)
		}
	}
	if n := sys.count(b, `SELECT count(DISTINCT labels ->> 'rack') FROM nodes WHERE labels ? 'rack'`); n != racks {
		b.Fatalf("%d racks labelled, want %d", n, racks)
	}
	if _, err := sys.env.Pool.Exec(sys.ctx, `UPDATE pools SET remediation_max_nodes = $2 WHERE id = $1`, pool, maxNodes); err != nil {
		b.Fatal(err)
	}
	var all []simGPU
	for _, g := range gpus {
		all = append(all, g...)
	}
	slices.SortFunc(all, func(x, y simGPU) int {
		if c := strings.Compare(x.host, y.host); c != 0 {
			return c
		}
		return x.index - y.index
	})
	r := rand.New(rand.NewPCG(36, 79))
	r.Shuffle(len(all), func(i, j int) { all[i], all[j] = all[j], all[i] })
	hit := all[:max(1, len(all)/50)]
	faulted := map[string]bool{}
	for _, g := range hit {
		faulted[g.host] = true
	}
	b.Logf("%d machines in %d racks of %d, %d with GPUs, %d GPUs; Xid 79 on %d GPUs of %d machines; budget %d nodes, one per rack; verify window %v, poll %v, reboot downtime 2s",
		nodes, racks, perRack, len(gpus), len(all), len(hit), len(faulted), maxNodes, benchVerifyWindow, pollEvery)

	var peakOut, peakRunning, peakRack, samples int
	var cleared time.Duration
	for b.Loop() {
		start := time.Now()
		for _, g := range hit {
			if err := f.InjectGPU(g.host, g.index, gpuhealth.CheckXid, 79, 1, ""); err != nil {
				b.Fatal(err)
			}
		}
		b.Logf("injected in %v", time.Since(start).Round(time.Millisecond))
		deadline := start.Add(10 * time.Minute)
		for {
			var out, running, rack, opened, active int
			if err := sys.env.Pool.QueryRow(sys.ctx, `SELECT
				(SELECT count(*) FROM nodes n WHERE n.state <> 'ready' OR EXISTS (SELECT 1 FROM remediations r WHERE r.node_id = n.id AND r.state = 'running')),
				(SELECT count(*) FROM remediations WHERE state = 'running'),
				(SELECT COALESCE(max(c), 0) FROM (SELECT count(*) AS c FROM remediations r JOIN nodes n ON n.id = r.node_id
					WHERE r.state = 'running' GROUP BY n.labels ->> 'rack') x),
				(SELECT count(DISTINCT node_id) FROM remediations),
				(SELECT count(*) FROM remediations WHERE ended_at IS NULL)`).Scan(&out, &running, &rack, &opened, &active); err != nil {
				b.Fatal(err)
			}
			samples++
			peakOut, peakRunning, peakRack = max(peakOut, out), max(peakRunning, running), max(peakRack, rack)
			if rack > 1 {
				b.Errorf("%d remediations running at once in one rack", rack)
			}
			if running > maxNodes {
				b.Errorf("%d remediations running at once, budget %d", running, maxNodes)
			}
			if opened == len(faulted) && active == 0 {
				cleared = time.Since(start)
				if out != 0 {
					b.Errorf("every remediation ended, %d nodes out of service", out)
				}
				break
			}
			if time.Now().After(deadline) {
				b.Fatalf("the storm did not clear in 10 minutes: %d of %d nodes with remediations, %d not ended, %d nodes out of service", opened, len(faulted), active, out)
			}
			pause(150 * time.Millisecond)
		}
	}
	b.StopTimer()

	// The exact check: in each rack, no two remediations overlap from their first step's start
	// to their end.
	rows, err := sys.env.Pool.Query(sys.ctx, `SELECT n.labels ->> 'rack', r.state, r.created_at, (r.history -> 0 ->> 'startedAt')::timestamptz, r.ended_at
		FROM remediations r JOIN nodes n ON n.id = r.node_id ORDER BY 1, 4`)
	if err != nil {
		b.Fatal(err)
	}
	lastRack, lastEnd := "", time.Time{}
	states := map[string]int{}
	perRackFaults := map[string]int{}
	var waited, ran []time.Duration
	for rows.Next() {
		var rack, state string
		var created, from, to time.Time
		if err := rows.Scan(&rack, &state, &created, &from, &to); err != nil {
			b.Fatal(err)
		}
		states[state]++
		perRackFaults[rack]++
		waited, ran = append(waited, from.Sub(created)), append(ran, to.Sub(from))
		if rack == lastRack && from.Before(lastEnd) {
			b.Errorf("rack %s: a remediation started at %v, before the one before it ended (%v)", rack, from, lastEnd)
		}
		lastRack, lastEnd = rack, to
	}
	if err := rows.Err(); err != nil {
		b.Fatal(err)
	}
	rows.Close()
	b.Logf("remediations by end state: %v; most in one rack %d", states, slices.Max(slices.Collect(maps.Values(perRackFaults))))
	w50, w99, wmax := percentiles(waited)
	r50, r99, rmax := percentiles(ran)
	b.Logf("waiting for the budget (opened to first step): p50 %.2fs p99 %.2fs max %.2fs; running (first step to end): p50 %.2fs p99 %.2fs max %.2fs",
		w50, w99, wmax, r50, r99, rmax)
	b.Logf("peak out of service %d of %d (%.1f%%), peak running %d (budget %d, one per rack), most in one rack %d; cleared in %v (%d samples)",
		peakOut, nodes, 100*float64(peakOut)/float64(nodes), peakRunning, maxNodes, peakRack, cleared.Round(time.Millisecond), samples)
	b.ReportMetric(float64(nodes), "nodes")
	b.ReportMetric(float64(len(faulted)), "faulted-nodes")
	b.ReportMetric(float64(peakOut), "peak-out")
	b.ReportMetric(100*float64(peakOut)/float64(nodes), "peak-out-%")
	b.ReportMetric(float64(peakRunning), "peak-running")
	b.ReportMetric(float64(peakRack), "peak-per-rack")
	b.ReportMetric(cleared.Seconds(), "clear-s")
}
