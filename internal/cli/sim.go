package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/spf13/cobra"
	"google.golang.org/protobuf/types/known/timestamppb"

	jointokensv1 "github.com/better-compute/better-compute/gen/go/bettercompute/jointokens/v1"
	"github.com/better-compute/better-compute/gen/go/bettercompute/jointokens/v1/jointokensv1connect"
	"github.com/better-compute/better-compute/internal/command"
	"github.com/better-compute/better-compute/internal/config"
	"github.com/better-compute/better-compute/internal/daemon"
	"github.com/better-compute/better-compute/internal/fleet"
	"github.com/better-compute/better-compute/internal/process"
	"github.com/better-compute/better-compute/internal/sim"
)

func newSimCommand(g *globals) *cobra.Command {
	var (
		opts                 sim.Options
		caFile, scenarioFile string
		transport            string
		faults               []string
		every, duration      time.Duration
		apiURL, apiKey       string
		rate                 float64
		loadFor              time.Duration
		control              string
	)
	cmd := &cobra.Command{
		Use:   "sim",
		Short: "Simulate a fleet of machines against a gateway",
		Long: `Run -n simulated machines (FakeDaemons with real keys, certificates and TLS connections, and
varied inventories) that join through --gateway with one join token and hold their sessions,
suffering the faults of --scenario and --fault, until Ctrl-C (or --duration). Every
--metrics-every it prints a line: joined, connected, reconnects, commands handled; at the end a
summary.

Without --token, a join token for -n machines is created through the API (--api, --api-key).
With --commands-rate, once every machine is connected it also creates "echo" commands through
the API at that steady rate for --commands-for, and reports their round trip: from the create
call to the result recorded (see the sim package for the method).

Faults, as a scenario file (YAML or JSON) or repeated --fault flags:
  {"faults":[{"kind":"disconnect","fraction":0.1,"every":"30s"}]}
  --fault disconnect,fraction=0.1,every=30s --fault skew,count=5,skew=-90s
Kinds: disconnect, flap, crash, latency, skew; keys: fraction, count, after, every, for, delay,
skew.

The machines run every workflow command (drain, upgrade, reboot, configure, exec, undrain) as
bcd would, without touching anything: an upgrade restarts a machine's daemon as the new version,
a reboot takes it away for --reboot-downtime. --fail-rate makes that share of upgrade, reboot,
configure and exec commands fail (drawn from --seed): an upgrade rolls back, a reboot comes back
ten times later, configure and exec fail.

GPU faults: --gpu-fault-rate 0.01 makes one GPU in a hundred fail each hour (drawn from --seed,
mostly harmless application Xids, some Xid 79, 48, 94, 95, pending row remaps and thermal
slowdowns); with --control PATH the simulator listens on that unix socket for
"better-compute sim inject --control PATH --node sim-0003 --gpu 3 --xid 79".`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			out := cmd.OutOrStdout()
			var err error
			if opts.Transport, err = daemon.ParseTransport(transport); err != nil {
				return fmt.Errorf("--transport: %w", err)
			}
			if opts.RootPEM, err = os.ReadFile(caFile); err != nil {
				return fmt.Errorf("--ca-file: %w", err)
			}
			if scenarioFile != "" {
				if opts.Scenario, err = sim.LoadScenario(scenarioFile); err != nil {
					return err
				}
			}
			for _, s := range faults {
				f, err := sim.ParseFault(s)
				if err != nil {
					return fmt.Errorf("--fault: %w", err)
				}
				opts.Scenario.Faults = append(opts.Scenario.Faults, f)
			}
			if (opts.Token == "" || rate > 0) && (apiURL == "" || apiKey == "") {
				return errors.New("without --token, and with --commands-rate, the API is needed: set --api and --api-key")
			}
			cfg := config.Default()
			opts.Logger = process.NewLogger(cfg.Log, cmd.ErrOrStderr())
			ctx := cmd.Context()
			if duration > 0 {
				var cancel context.CancelFunc
				ctx, cancel = context.WithTimeout(ctx, duration)
				defer cancel()
			}
			if opts.Token == "" {
				if opts.Token, err = mintJoinToken(ctx, apiURL, apiKey, opts.N); err != nil {
					return err
				}
			}
			var load *sim.Load
			if rate > 0 {
				load, err = sim.NewLoad(sim.LoadOptions{Commands: sim.CommandsClient(apiURL, apiKey), Rate: rate, Duration: loadFor})
				if err != nil {
					return err
				}
				opts.Handlers = map[string]daemon.Handler{command.Echo: load.Echo}
			}
			if opts.GPUUsageInterval == 0 {
				opts.GPUUsageInterval = -1 // off, as bcd's --gpu-usage-interval 0
			}
			fleet, err := sim.New(opts)
			if err != nil {
				return err
			}
			// The fleet outlives ctx until its statistics are taken; stop ends it.
			fctx, stop := context.WithCancel(context.WithoutCancel(ctx))
			defer stop()
			controlDone, err := sim.StartControl(fctx, control, fleet)
			if err != nil {
				return fmt.Errorf("--control: %w", err)
			}
			defer func() { <-controlDone }()
			defer stop() // before waiting for the control socket
			ran := make(chan error, 1)
			start := time.Now()
			go func() { ran <- fleet.Run(fctx) }()
			fmt.Fprintf(out, "Simulating %d machines against %s (seed %d, %d faults)\n", opts.N, opts.Gateway, opts.Seed, len(opts.Scenario.Faults))
			if control != "" {
				fmt.Fprintf(out, "Control: %s\n", control)
			}

			loadDone := make(chan struct{})
			if load == nil {
				close(loadDone)
			} else {
				go func() {
					defer close(loadDone)
					if _, err := fleet.WaitConnected(ctx); err != nil {
						return
					}
					nodes := fleet.NodeIDs()
					fmt.Fprintf(out, "Commands: %.0f/s for %s across %d machines\n", rate, loadFor, len(nodes))
					res, err := load.Run(ctx, nodes)
					printLoad(out, res, err)
				}()
			}
			tick := time.NewTicker(every)
			defer tick.Stop()
			joinReported := false
			for {
				select {
				case <-tick.C:
					s := fleet.Stats()
					fmt.Fprintf(out, "%s %s\n", time.Since(start).Round(time.Second), progress(s))
					if !joinReported && !s.Joining {
						joinReported = true
						printJoin(out, fleet, s)
					}
					continue
				case <-ctx.Done():
				}
				break
			}
			last := fleet.Stats() // before stopping: what the fleet held at the end
			stop()
			err = <-ran
			<-loadDone
			if !joinReported {
				printJoin(out, fleet, last)
			}
			fmt.Fprintf(out, "Summary after %s: %s; %d disconnects, %d crashes and %d GPU signals injected\n",
				time.Since(start).Round(time.Second), progress(last), last.Disconnects, last.Crashes, last.GPUSignals)
			return err
		},
	}
	f := cmd.Flags()
	f.StringVar(&opts.Gateway, "gateway", "", "gateway address host:port (required)")
	f.StringVar(&opts.ServerName, "server-name", "", "name to check the gateway's certificate against (default: the host of --gateway)")
	f.StringVar(&transport, "transport", string(daemon.TransportH2), "how the machines reach the gateway: h2 (direct), websocket, or auto (direct, falling back to the WebSocket), as bcd run --transport")
	f.StringVar(&opts.WebSocketURL, "websocket-url", "", "the gateway's WebSocket listener, ws:// or wss:// (dev prints it as \"Gateway WebSocket:\"; default wss:// on port 443 of the --gateway host)")
	f.StringVar(&caFile, "ca-file", "", "root CA of the deployment's PKI, PEM (dev prints it as \"Root CA:\") (required)")
	f.StringVar(&opts.Token, "token", "", "join token with a use for every machine (default: create one through --api)")
	f.IntVarP(&opts.N, "machines", "n", 100, "number of machines")
	f.Uint64Var(&opts.Seed, "seed", 1, "seed of the inventories, of the faults' choices and of the failed commands")
	f.StringVar(&opts.Prefix, "prefix", "sim", "machine hostnames are <prefix>-0001 and up")
	f.IntVar(&opts.JoinConcurrency, "join-concurrency", sim.DefaultJoinConcurrency, "joins in flight at most")
	f.StringVar(&opts.StateDir, "state-dir", "", "keep the machines' identities here and reuse them on the next run")
	f.StringVar(&scenarioFile, "scenario", "", "scenario file of faults, YAML or JSON")
	f.StringArrayVar(&faults, "fault", nil, "a fault, kind,key=value,... (repeatable)")
	f.Float64Var(&opts.FailRate, "fail-rate", 0, "share (0 to 1) of upgrade, reboot, configure and exec commands that fail")
	f.DurationVar(&opts.RebootDowntime, "reboot-downtime", daemon.DefaultRebootDowntime, "how long a reboot command keeps a machine away")
	f.DurationVar(&opts.GPUUsageInterval, "gpu-usage-interval", daemon.DefaultFakeUsageInterval, "how often the machines sample their GPUs' usage, sending a summary a minute as bcd does (0 off)")
	f.Float64Var(&opts.GPUFaultRate, "gpu-fault-rate", 0, "expected share of all simulated GPUs that get a fault per hour (0.01: one in a hundred), drawn from --seed")
	f.StringVar(&control, "control", "", "serve the control API (sim inject) on this unix socket, mode 0600 (default: none)")
	f.DurationVar(&every, "metrics-every", 10*time.Second, "interval of the progress lines")
	f.DurationVar(&duration, "duration", 0, "stop after this long (default: run until Ctrl-C)")
	f.StringVar(&apiURL, "api", "", "API URL with its base path, as dev prints it (\"API:\")")
	f.StringVar(&apiKey, "api-key", os.Getenv("BETTER_COMPUTE_API_KEY"), "API key (env BETTER_COMPUTE_API_KEY)")
	f.Float64Var(&rate, "commands-rate", 0, "create echo commands through the API at this rate per second once all machines are connected")
	f.DurationVar(&loadFor, "commands-for", time.Minute, "how long to create commands")
	_ = cmd.MarkFlagRequired("gateway")
	_ = cmd.MarkFlagRequired("ca-file")
	_ = g
	cmd.AddCommand(newSimInjectCommand())
	cmd.AddCommand(newSimLoadCommand())
	return cmd
}

// mintJoinToken creates a join token for n machines through the API, labelling them
// simulated=true.
func mintJoinToken(ctx context.Context, apiURL, apiKey string, n int) (string, error) {
	if n > fleet.MaxJoinTokenUses {
		return "", fmt.Errorf("a join token has at most %d uses: pass --token, or run several simulators", fleet.MaxJoinTokenUses)
	}
	client := jointokensv1connect.NewJoinTokensServiceClient(sim.APIClient(apiKey), apiURL)
	res, err := client.Create(ctx, &jointokensv1.CreateRequest{
		Description: "better-compute sim", MaxUses: int32(n), ExpireTime: timestamppb.New(time.Now().Add(24 * time.Hour)),
		// As dev --sim labels its machines, so that a pool's selector finds them.
		Labels: map[string]string{"simulated": "true"},
	})
	if err != nil {
		return "", fmt.Errorf("create a join token through %s: %w", apiURL, err)
	}
	return res.GetToken(), nil
}

func progress(s sim.Stats) string {
	return fmt.Sprintf("joined %d/%d (%d errors) connected %d down %d sessions %d reconnects %d commands %d",
		s.Joined(), s.Machines, s.JoinErrors, s.Connected, s.Down, s.Sessions, s.Reconnects, s.Commands)
}

func printJoin(out io.Writer, fleet *sim.Fleet, s sim.Stats) {
	fmt.Fprintf(out, "Join phase: %d joined in %s (%.1f joins/s), %d reused identities, %d errors, %d retries\n",
		s.Joins, s.JoinElapsed.Round(time.Millisecond), s.JoinRate(), s.Reused, s.JoinErrors, s.JoinRetries)
	for _, err := range fleet.JoinErrors() {
		fmt.Fprintf(out, "  join error: %v\n", err)
	}
}

func printLoad(out io.Writer, r sim.LoadResult, err error) {
	fmt.Fprintf(out, "Commands: %d planned, %d created in %s (%.1f/s), %d create errors, %d skipped; %d succeeded, %d failed, %d unfinished\n",
		r.Planned, r.Created, r.Elapsed.Round(time.Millisecond), float64(r.Created)/max(r.Elapsed.Seconds(), 1e-9),
		r.CreateErrors, r.Skipped, r.Succeeded, r.Failed, r.Unfinished)
	fmt.Fprintf(out, "  round trip (create call to result recorded): %v\n", r.RoundTrip)
	fmt.Fprintf(out, "  delivered (create call to the daemon running it): %v\n", r.Delivered)
	fmt.Fprintf(out, "  create call: %v\n", r.CreateCall)
	fmt.Fprintf(out, "  recorded (finish_time - create_time, database clock): %v\n", r.Recorded)
	for _, e := range r.FirstErrors {
		fmt.Fprintf(out, "  error: %v\n", e)
	}
	if err != nil {
		fmt.Fprintf(out, "  load stopped: %v\n", err)
	}
}
