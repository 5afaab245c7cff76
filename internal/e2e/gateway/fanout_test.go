package gateway_test

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/better-compute/better-compute/gateway"
	"github.com/better-compute/better-compute/gateway/gatewaytest"
	commandsv1 "github.com/better-compute/better-compute/gen/go/bettercompute/commands/v1"
	"github.com/better-compute/better-compute/gen/go/bettercompute/commands/v1/commandsv1connect"
	daemonv1 "github.com/better-compute/better-compute/gen/go/bettercompute/daemon/v1"
	jointokensv1 "github.com/better-compute/better-compute/gen/go/bettercompute/jointokens/v1"
	"github.com/better-compute/better-compute/gen/go/bettercompute/jointokens/v1/jointokensv1connect"
	"github.com/better-compute/better-compute/internal/daemon"
	"github.com/better-compute/better-compute/internal/guard"
	"github.com/better-compute/better-compute/internal/poll"
	"github.com/better-compute/better-compute/internal/quota"
	"github.com/better-compute/better-compute/internal/sim"
	"github.com/better-compute/better-compute/server"
	"github.com/better-compute/better-compute/server/servertest"
)

// fanOutSystem is an API with the notifier, a gateway and a simulated fleet whose echo handler
// counts each command's runs and the runs in progress.
type fanOutSystem struct {
	commands commandsv1connect.CommandsServiceClient
	fleet    *sim.Fleet
	nodes    []string
	mu       sync.Mutex
	runs     map[string]int // command id -> runs
	running  atomic.Int64
	peak     atomic.Int64
	work     time.Duration // how long each echo takes
}

// newFanOutSystem starts it with n machines, each echo taking work, the gateway's dispatch loop
// every dispatch and, when heartbeat is not zero, the daemons' heartbeats that often (gatewaytest's
// 1 second otherwise, which thousands of machines on a small test machine cannot afford). With
// child, the machines run in a child process (startChildFleet) and their runs are not counted.
func newFanOutSystem(tb testing.TB, e *env, n int, work, dispatch, heartbeat time.Duration, child bool) *fanOutSystem {
	tb.Helper()
	notifier, err := gateway.NewNotifier(e.pool, e.bundle, nil)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(notifier.Wait)
	api := servertest.Start(tb, e.pool, func(o *server.Options) {
		o.Notifier = notifier
		o.RateLimits = guard.RateLimits{Tenant: quota.Limits{CommandsPerMinute: 1 << 30}}
	})
	client := api.HTTPClient(api.AdminKey)
	tok, err := jointokensv1connect.NewJoinTokensServiceClient(client, api.URL).Create(ctx, &jointokensv1.CreateRequest{
		Labels: map[string]string{"fleet": "fan"}, MaxUses: int32(n),
	})
	if err != nil {
		tb.Fatal(err)
	}
	gw := e.StartGateway("gw-fan", func(o *gateway.Options) {
		o.DispatchInterval = dispatch
		o.TenantNodes = n + 100
		if heartbeat > 0 {
			o.HeartbeatInterval = heartbeat
		}
	})
	s := &fanOutSystem{commands: commandsv1connect.NewCommandsServiceClient(client, api.URL), runs: map[string]int{}, work: work}
	if child {
		s.nodes = startChildFleet(tb, e, gw, tok.GetToken(), n)
		return s
	}
	fleet, err := sim.New(sim.Options{
		Gateway: gw.Addr, RootPEM: e.bundle.RootPEM(), Token: tok.GetToken(), N: n, Seed: 37,
		Handlers: map[string]daemon.Handler{"echo": s.echo},
	})
	if err != nil {
		tb.Fatal(err)
	}
	fctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = fleet.Run(fctx) }()
	tb.Cleanup(func() { cancel(); <-done })
	if os.Getenv("BENCH_FANOUT_TIMELINE") != "" {
		go reportJoins(fctx, fleet)
	}
	if st, err := fleet.WaitConnected(fctx); err != nil || st.Joined() != n {
		tb.Fatalf("fleet: %+v, %v (%v)", st, err, fleet.JoinErrors())
	}
	s.fleet, s.nodes = fleet, fleet.NodeIDs()
	return s
}

// reportJoins prints the fleet's progress every 10 s while it joins (BENCH_FANOUT_TIMELINE), to
// stderr, since a benchmark's log comes only at its end.
func reportJoins(ctx context.Context, fleet *sim.Fleet) {
	tick := time.NewTicker(10 * time.Second)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		st := fleet.Stats()
		fmt.Fprintf(os.Stderr, "%s joined %d (retries %d, errors %d), connected %d, %.0f joins/s\n",
			time.Now().Format(time.TimeOnly), st.Joined(), st.JoinRetries, st.JoinErrors, st.Connected, st.JoinRate())
		if !st.Joining {
			return
		}
	}
}

// echo runs a command: it counts the run, and the runs in progress while it takes s.work.
func (s *fanOutSystem) echo(ctx context.Context, c *daemonv1.Command) (*structpb.Struct, error) {
	s.mu.Lock()
	s.runs[c.GetId()]++
	s.mu.Unlock()
	now := s.running.Add(1)
	for {
		p := s.peak.Load()
		if now <= p || s.peak.CompareAndSwap(p, now) {
			break
		}
	}
	if s.work > 0 {
		t := time.NewTimer(s.work) // the command's simulated work, not a wait for the test
		select {
		case <-t.C:
		case <-ctx.Done():
		}
	}
	s.running.Add(-1)
	return c.GetEcho().GetData(), nil
}

// TestFanOutRunsEveryNodeOnce fans an echo out to a simulated fleet with max_in_flight below
// its size: every node's command runs exactly once, the summary counts them all succeeded, no
// more than max_in_flight ran at once, and commands/list by fan-out pages through all of them.
func TestFanOutRunsEveryNodeOnce(t *testing.T) {
	t.Parallel()
	const n, inFlight = 40, 7
	e := newEnv(t)
	// The dispatch loop is slowed so that only the pokes (the API's, and the gateway's own as
	// commands finish) make progress quickly.
	s := newFanOutSystem(t, e, n, 5*time.Millisecond, 30*time.Second, 0, false)
	data, _ := structpb.NewStruct(map[string]any{"k": "v"})
	res, err := s.commands.FanOut(ctx, &commandsv1.FanOutRequest{
		Selector: &commandsv1.FanOutSelector{Labels: map[string]string{"fleet": "fan"}}, MaxInFlight: inFlight,
		Payload: &commandsv1.FanOutRequest_Echo{Echo: &daemonv1.EchoPayload{Data: data}},
	})
	if err != nil {
		t.Fatal(err)
	}
	if res.GetFanOut().GetTotal() != n {
		t.Fatalf("fan-out reached %d nodes, want %d", res.GetFanOut().GetTotal(), n)
	}
	id := res.GetFanOut().GetId()
	// The database's view of in flight, sampled while the fan-out runs.
	var dbPeak atomic.Int64
	stop := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		for {
			select {
			case <-stop:
				return
			default:
			}
			var k int64
			if err := e.pool.QueryRow(ctx, `SELECT count(*) FROM commands WHERE fan_out_id = $1 AND state IN ('sent', 'acked')`, id).Scan(&k); err == nil && k > dbPeak.Load() {
				dbPeak.Store(k)
			}
		}
	}()
	var sum *commandsv1.GetFanOutResponse
	poll.Until(t, 30*time.Second, "the fan-out is done", func() bool {
		sum, err = s.commands.GetFanOut(ctx, &commandsv1.GetFanOutRequest{Id: id})
		return err == nil && sum.GetDone()
	})
	close(stop)
	<-sampled
	if want := (&commandsv1.FanOutCounts{Succeeded: n}); !proto.Equal(sum.GetCounts(), want) || len(sum.GetFailures()) != 0 {
		t.Errorf("summary %v, want %v", sum, want)
	}
	s.mu.Lock()
	if len(s.runs) != n {
		t.Errorf("%d commands ran, want %d", len(s.runs), n)
	}
	for cmd, k := range s.runs {
		if k != 1 {
			t.Errorf("command %s ran %d times", cmd, k)
		}
	}
	s.mu.Unlock()
	if p := s.peak.Load(); p > inFlight || p < 2 {
		t.Errorf("at most %d commands ran at once, want between 2 and max_in_flight %d", p, inFlight)
	}
	if p := dbPeak.Load(); p > inFlight {
		t.Errorf("%d commands were sent or acked at once, want at most %d", p, inFlight)
	}
	var nodes []string
	token := ""
	for {
		page, err := s.commands.List(ctx, &commandsv1.ListRequest{FanOutId: id, PageSize: 15, PageToken: token})
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range page.GetCommands() {
			nodes = append(nodes, c.GetNodeId())
			if c.GetResult().GetFields()["k"].GetStringValue() != "v" {
				t.Errorf("command %s result %v", c.GetId(), c.GetResult())
			}
		}
		if token = page.GetNextPageToken(); token == "" {
			break
		}
	}
	slices.Sort(nodes)
	want := slices.Clone(s.nodes)
	slices.Sort(want)
	if !slices.Equal(nodes, want) {
		t.Errorf("the fan-out's commands went to %d nodes, the fleet has %d", len(nodes), len(want))
	}
}

// BenchmarkFanOut fans an instant command (echo) out to N simulated nodes (BENCH_FANOUT_NODES,
// 1,000 by default) through the API, one gateway and its notifier, with max_in_flight at the
// server's limit (or BENCH_FANOUT_MAX_IN_FLIGHT). The machines run in a child process: 10,000 of
// them and the gateway's end of their connections would not fit one process's 20,000 files. Reported are the call's
// latency, the time from the call until the p99 (and the last) command was acked, and until every result was recorded. Run with -benchtime 1x.
func BenchmarkFanOut(b *testing.B) {
	n := 1000
	if v := os.Getenv("BENCH_FANOUT_NODES"); v != "" {
		k, err := strconv.Atoi(v)
		if err != nil || k < 1 {
			b.Fatalf("BENCH_FANOUT_NODES=%q", v)
		}
		n = k
	}
	inFlight := int32(1000)
	if v := os.Getenv("BENCH_FANOUT_MAX_IN_FLIGHT"); v != "" {
		k, err := strconv.Atoi(v)
		if err != nil || k < 1 {
			b.Fatalf("BENCH_FANOUT_MAX_IN_FLIGHT=%q", v)
		}
		inFlight = int32(k)
	}
	joinStart := time.Now()
	ge := gatewaytest.New(b)
	e := &env{Env: ge, pool: ge.Pool, bundle: ge.Bundle, tenant: ge.Tenant}
	s := newFanOutSystem(b, e, n, 0, time.Second, 10*time.Second, true)
	b.Logf("%d simulated nodes connected in %v", n, time.Since(joinStart).Round(time.Millisecond))
	// The gateway records each new session's hello (inventory, events) after the session is up;
	// the fan-out is measured on a settled fleet, not behind that backlog.
	poll.Until(b, 10*time.Minute, "every node's hello is recorded", func() bool {
		var ready int
		_ = e.pool.QueryRow(ctx, `SELECT count(*) FROM nodes WHERE state = 'ready'`).Scan(&ready)
		return ready == n
	}, poll.Every(100*time.Millisecond))
	b.Logf("settled after %v", time.Since(joinStart).Round(time.Millisecond))
	b.ResetTimer()
	for i := range b.N {
		start := time.Now()
		res, err := s.commands.FanOut(ctx, &commandsv1.FanOutRequest{
			Selector: &commandsv1.FanOutSelector{Labels: map[string]string{"fleet": "fan"}}, MaxInFlight: inFlight,
			Payload: &commandsv1.FanOutRequest_Echo{Echo: &daemonv1.EchoPayload{}}, IdempotencyKey: fmt.Sprint("bench-", i),
		})
		called := time.Since(start)
		if err != nil {
			b.Fatal(err)
		}
		if res.GetFanOut().GetTotal() != int32(n) {
			b.Fatalf("reached %d nodes, want %d", res.GetFanOut().GetTotal(), n)
		}
		id := res.GetFanOut().GetId()
		poll.Until(b, 10*time.Minute, "every result is recorded", func() bool {
			var open int
			_ = e.pool.QueryRow(ctx, `SELECT count(*) FROM commands WHERE fan_out_id = $1 AND finished_at IS NULL`, id).Scan(&open)
			return open == 0
		}, poll.Every(5*time.Millisecond))
		recorded := time.Since(start)
		// Acks and results are stamped by the database's clock; measured from the fan-out's
		// creation, also the database's, less the call's own time before it.
		var ackP99, ackLast, finLast float64
		if err := e.pool.QueryRow(ctx, `
			SELECT percentile_disc(0.99) WITHIN GROUP (ORDER BY extract(epoch FROM COALESCE(c.acked_at, c.finished_at) - f.created_at)),
			       max(extract(epoch FROM COALESCE(c.acked_at, c.finished_at) - f.created_at)),
			       max(extract(epoch FROM c.finished_at - f.created_at))
			FROM commands c JOIN fan_outs f ON f.id = c.fan_out_id WHERE c.fan_out_id = $1`, id).Scan(&ackP99, &ackLast, &finLast); err != nil {
			b.Fatal(err)
		}
		if os.Getenv("BENCH_FANOUT_TIMELINE") != "" {
			rows, err := e.pool.Query(ctx, `
				SELECT floor(extract(epoch FROM c.sent_at - f.created_at) * 10)::int AS t, count(*), max(c.attempts),
				       (max(extract(epoch FROM c.acked_at - c.sent_at)) * 1000)::int, (max(extract(epoch FROM c.finished_at - c.sent_at)) * 1000)::int
				FROM commands c JOIN fan_outs f ON f.id = c.fan_out_id WHERE c.fan_out_id = $1 GROUP BY 1 ORDER BY 1`, id)
			if err != nil {
				b.Fatal(err)
			}
			for rows.Next() {
				var t, k, att int
				var ack, fin *int
				_ = rows.Scan(&t, &k, &att, &ack, &fin)
				b.Logf("sent at %d00 ms: %d (attempts up to %d), acked within %v ms, finished within %v ms", t, k, att, deref(ack), deref(fin))
			}
			rows.Close()
		}
		var failed int
		_ = e.pool.QueryRow(ctx, `SELECT count(*) FROM commands WHERE fan_out_id = $1 AND state <> 'succeeded'`, id).Scan(&failed)
		if failed > 0 {
			b.Fatalf("%d commands did not succeed", failed)
		}
		b.ReportMetric(float64(called.Microseconds())/1000, "call-ms")
		b.ReportMetric(ackP99*1000, "acked-p99-ms")
		b.ReportMetric(ackLast*1000, "acked-all-ms")
		b.ReportMetric(finLast*1000, "db-recorded-all-ms")
		b.ReportMetric(float64(recorded.Milliseconds()), "recorded-all-ms")
		// Each command was sent once (its daemon, in the child, is not asked how often it ran).
		var resent int
		_ = e.pool.QueryRow(ctx, `SELECT count(*) FROM commands WHERE fan_out_id = $1 AND attempts <> 1`, id).Scan(&resent)
		if resent > 0 {
			b.Errorf("%d commands were sent more than once", resent)
		}
	}
}

func deref(p *int) any {
	if p == nil {
		return "-"
	}
	return *p
}
