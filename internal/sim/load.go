package sim

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/structpb"

	commandsv1 "github.com/better-compute/better-compute/gen/go/bettercompute/commands/v1"
	"github.com/better-compute/better-compute/gen/go/bettercompute/commands/v1/commandsv1connect"
	daemonv1 "github.com/better-compute/better-compute/gen/go/bettercompute/daemon/v1"
	"github.com/better-compute/better-compute/internal/daemon"
)

// LoadOptions configure a command load.
type LoadOptions struct {
	// Commands is the API's CommandsService, called with a key that may operate commands.
	Commands commandsv1connect.CommandsServiceClient
	// Rate is commands created per second, at fixed intervals (an open loop: a slow answer does
	// not slow the schedule); Duration how long to create them.
	Rate     float64
	Duration time.Duration
	// Timeout of each command (1 minute by default).
	Timeout time.Duration
	// MaxInFlight bounds the create calls waiting for an answer (2,000 by default); a command
	// due while the bound is reached is skipped and counted.
	MaxInFlight int
	// Settle is how long to wait for the last results after the last create (30s by default).
	Settle time.Duration
}

// Load creates commands through the API at a steady rate across the fleet's connected machines
// and measures each one's round trip: from just before its create call to the time the gateway
// recorded its result (finish_time, read back through commands/get once the load is over, so
// polling does not load the system while it is measured). The daemon side is measured too when
// the fleet runs Load's echo handler (Handlers: {command.Echo: load.Echo}).
type Load struct {
	opts LoadOptions
	// handled[i] is when a daemon ran command i (unix nanoseconds), 0 until then.
	handled []atomic.Int64
}

// NewLoad prepares a load.
func NewLoad(opts LoadOptions) (*Load, error) {
	if opts.Commands == nil || opts.Rate <= 0 || opts.Duration <= 0 {
		return nil, errors.New("sim: a load needs a commands client, a positive rate and a duration")
	}
	if opts.Timeout == 0 {
		opts.Timeout = time.Minute
	}
	if opts.MaxInFlight == 0 {
		opts.MaxInFlight = 2000
	}
	if opts.Settle == 0 {
		opts.Settle = 30 * time.Second
	}
	return &Load{opts: opts, handled: make([]atomic.Int64, opts.total())}, nil
}

func (o LoadOptions) total() int { return max(1, int(o.Rate*o.Duration.Seconds())) }

// Echo is the echo handler that also notes when the daemon ran a command of this load (the
// load's commands are echoes whose data holds their sequence number, loadSeq).
func (l *Load) Echo(_ context.Context, c *daemonv1.Command) (*structpb.Struct, error) {
	p := c.GetEcho().GetData()
	if v, ok := p.GetFields()["loadSeq"]; ok {
		if i := int(v.GetNumberValue()); i >= 0 && i < len(l.handled) {
			l.handled[i].CompareAndSwap(0, time.Now().UnixNano())
		}
	}
	if p == nil {
		p = &structpb.Struct{}
	}
	return p, nil
}

var _ daemon.Handler = (*Load)(nil).Echo

// LoadResult is what a load measured.
type LoadResult struct {
	// Planned commands, and of them: Created, CreateErrors (the call failed), Skipped (too
	// many calls in flight), then of the created: Succeeded, Failed, Unfinished (no result
	// within Settle).
	Planned, Created, CreateErrors, Skipped, Succeeded, Failed, Unfinished int
	FirstErrors                                                            []error
	// Elapsed is how long creating took; the achieved rate is Created/Elapsed.
	Elapsed time.Duration
	// RoundTrip: create call start to result recorded, of succeeded commands. CreateCall: the
	// create call alone. Delivered: create call start to the daemon running it (when measured).
	// Recorded: finish_time - create_time, both the database's clock.
	RoundTrip, CreateCall, Delivered, Recorded Latencies
}

// Latencies summarise a sample.
type Latencies struct {
	N                        int
	P50, P90, P99, P999, Max time.Duration
}

func summarise(d []time.Duration) Latencies {
	if len(d) == 0 {
		return Latencies{}
	}
	slices.Sort(d)
	q := func(p float64) time.Duration { return d[max(0, int(math.Ceil(p*float64(len(d))))-1)] }
	return Latencies{N: len(d), P50: q(0.50), P90: q(0.90), P99: q(0.99), P999: q(0.999), Max: d[len(d)-1]}
}

func (l Latencies) String() string {
	if l.N == 0 {
		return "no sample"
	}
	r := func(d time.Duration) string { return d.Round(100 * time.Microsecond).String() }
	return fmt.Sprintf("p50 %s p90 %s p99 %s p99.9 %s max %s (n=%d)", r(l.P50), r(l.P90), r(l.P99), r(l.P999), r(l.Max), l.N)
}

type sent struct {
	id    string
	start time.Time
	call  time.Duration
}

// Run creates the commands, spread round-robin over nodes, then collects their results.
func (l *Load) Run(ctx context.Context, nodes []string) (LoadResult, error) {
	if len(nodes) == 0 {
		return LoadResult{}, errors.New("sim: no connected machine to send commands to")
	}
	o := l.opts
	total := o.total()
	res := LoadResult{Planned: total}
	records := make([]sent, total)
	var mu sync.Mutex
	var createErrors, skipped int
	fail := func(err error) {
		mu.Lock()
		defer mu.Unlock()
		createErrors++
		if len(res.FirstErrors) < maxJoinErrors {
			res.FirstErrors = append(res.FirstErrors, err)
		}
	}
	interval := time.Duration(float64(time.Second) / o.Rate)
	inflight := make(chan struct{}, o.MaxInFlight)
	var wg sync.WaitGroup
	start := time.Now()
	for i := range total {
		if d := time.Until(start.Add(time.Duration(i) * interval)); d > 0 && !sleep(ctx, d) {
			break
		}
		select {
		case inflight <- struct{}{}:
		default:
			skipped++
			continue
		}
		wg.Go(func() {
			defer func() { <-inflight }()
			payload, _ := structpb.NewStruct(map[string]any{"loadSeq": i})
			t0 := time.Now()
			r, err := o.Commands.Create(ctx, &commandsv1.CreateRequest{
				NodeId:  nodes[i%len(nodes)],
				Payload: &commandsv1.CreateRequest_Echo{Echo: &daemonv1.EchoPayload{Data: payload}},
				Timeout: durationpb.New(o.Timeout),
			})
			if err != nil {
				fail(err)
				return
			}
			if len(r.GetCommands()) != 1 {
				fail(fmt.Errorf("create returned %d commands, want 1", len(r.GetCommands())))
				return
			}
			records[i] = sent{id: r.GetCommands()[0].GetId(), start: t0, call: time.Since(t0)}
		})
	}
	wg.Wait()
	res.Elapsed = time.Since(start)
	res.CreateErrors, res.Skipped = createErrors, skipped

	// Collect: one get per command, more only for those still running.
	deadline := time.Now().Add(o.Settle)
	var roundTrip, calls, delivered, recorded []time.Duration
	work := make(chan int)
	var cwg sync.WaitGroup
	for range 16 {
		cwg.Go(func() {
			for i := range work {
				c, err := l.await(ctx, records[i].id, deadline)
				mu.Lock()
				switch {
				case err != nil || c == nil:
					res.Unfinished++
				case c.GetState() == commandsv1.CommandState_COMMAND_STATE_SUCCEEDED:
					res.Succeeded++
					s := records[i]
					roundTrip = append(roundTrip, c.GetFinishTime().AsTime().Sub(s.start))
					calls = append(calls, s.call)
					recorded = append(recorded, c.GetFinishTime().AsTime().Sub(c.GetCreateTime().AsTime()))
					if at := l.handled[i].Load(); at != 0 {
						delivered = append(delivered, time.Unix(0, at).Sub(s.start))
					}
				default:
					res.Failed++
				}
				mu.Unlock()
			}
		})
	}
	for i, s := range records {
		if s.id != "" {
			res.Created++
			work <- i
		}
	}
	close(work)
	cwg.Wait()
	res.RoundTrip, res.CreateCall, res.Delivered, res.Recorded = summarise(roundTrip), summarise(calls), summarise(delivered), summarise(recorded)
	return res, ctx.Err()
}

// await reads a command until it is finished or the deadline passes.
func (l *Load) await(ctx context.Context, id string, deadline time.Time) (*commandsv1.Command, error) {
	for {
		r, err := l.opts.Commands.Get(ctx, &commandsv1.GetRequest{Id: id})
		if err != nil {
			return nil, err
		}
		switch r.GetCommand().GetState() {
		case commandsv1.CommandState_COMMAND_STATE_PENDING, commandsv1.CommandState_COMMAND_STATE_SENT, commandsv1.CommandState_COMMAND_STATE_ACKED:
		default:
			return r.GetCommand(), nil
		}
		if time.Now().After(deadline) || !sleep(ctx, 100*time.Millisecond) {
			return nil, nil
		}
	}
}

// APIClient is an HTTP client for the API that sends key and the X-Better-Compute header on every
// call.
func APIClient(key string) *http.Client {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConnsPerHost = 256
	return &http.Client{Transport: apiKey{key: key, next: tr}}
}

type apiKey struct {
	key  string
	next http.RoundTripper
}

func (a apiKey) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("X-Better-Compute", "1")
	r.Header.Set("Authorization", "Bearer "+a.key)
	return a.next.RoundTrip(r)
}

// CommandsClient is a CommandsService client for the API at baseURL (with its base path, as
// `dev` prints it) calling with key.
func CommandsClient(baseURL, key string) commandsv1connect.CommandsServiceClient {
	return commandsv1connect.NewCommandsServiceClient(APIClient(key), baseURL)
}
