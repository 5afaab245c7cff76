package cli

import (
	"context"
	"fmt"
	"path"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/better-compute/better-compute/client"
	commandsv1 "github.com/better-compute/better-compute/gen/go/bettercompute/commands/v1"
	daemonv1 "github.com/better-compute/better-compute/gen/go/bettercompute/daemon/v1"
)

// commandsGroup is the generated command group of the commands API that `run` joins.
const commandsGroup = "commands"

// maxStreamedResults is the largest fan-out whose results `commands run` prints one by one as
// they arrive (it pages through the fan-out's finished commands at each poll); above it, only
// the progress line and the failures of commands/getFanOut are printed.
const maxStreamedResults = 2000

// addCommandsRun adds `run` to the generated commands group below root, beside its method
// commands (create, fan-out, get, list, cancel). Without the group it adds nothing.
func addCommandsRun(root *cobra.Command, api *Resolver) {
	if g := findCommand(root, commandsGroup); g != nil {
		g.AddCommand(newCommandsRunCommand(api))
	}
}

// fanOutRunFlags are `commands run`'s flags.
type fanOutRunFlags struct {
	workflowFlags
	labels      map[string]string
	pool        string
	nodes       []string
	gpuModel    string
	states      []string
	limit       int32
	maxInFlight int32
	timeout     time.Duration
	key         string
	quiet       bool
}

func newCommandsRunCommand(api *Resolver) *cobra.Command {
	f := &fanOutRunFlags{workflowFlags: workflowFlags{api: api}}
	cmd := &cobra.Command{
		Use:   "run --selector k=v [flags] -- PATH [ARGS...]",
		Short: "Run a program on every node a selector reaches and stream the results",
		Long: `Run an allow-listed program (exec) on every node a selector reaches, as one fan-out
(commands/fanOut), and follow it: a progress line (pending, in flight, succeeded, failed) and,
for fan-outs of up to 2,000 nodes, each node's result as it arrives (exit code and the first line
of its output; --quiet prints only failures). Ctrl-C stops following, not the fan-out. With
-o json the progress goes to standard error and the last commands/getFanOut answer to standard
output.

	better-compute commands run --selector gpu=h100 -- /usr/bin/nvidia-smi -L
	better-compute commands run --pool train --max-in-flight 50 -- /usr/bin/systemctl restart dcgm

Exits 0 when every command succeeded, 1 when any failed, expired or was cancelled, and as any
API command on an API error.

` + ExitCodesHelp,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := f.check(); err != nil {
				return usageError(err)
			}
			if !path.IsAbs(args[0]) {
				return usageError(fmt.Errorf("the program must be an absolute path (the nodes' allow lists name exact paths), got %q", args[0]))
			}
			c, err := f.client()
			if err != nil {
				return err
			}
			req := &commandsv1.FanOutRequest{
				Selector: &commandsv1.FanOutSelector{
					Labels: f.labels, Pool: f.pool, NodeIds: f.nodes, GpuModel: f.gpuModel, States: f.states, Limit: f.limit,
				},
				Payload:     &commandsv1.FanOutRequest_Exec{Exec: &daemonv1.ExecPayload{Path: args[0], Args: args[1:]}},
				MaxInFlight: f.maxInFlight, IdempotencyKey: f.key,
			}
			if f.timeout > 0 {
				req.Timeout = durationpb.New(f.timeout)
			}
			res, err := c.Commands.FanOut(cmd.Context(), req)
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			progressTo := out
			if f.json() {
				progressTo = cmd.ErrOrStderr()
			}
			last, err := followFanOut(cmd.Context(), c, res.GetFanOut(), newProgress(progressTo), f.quiet)
			if err != nil {
				return err
			}
			if f.json() {
				if err := printJSON(out, last); err != nil {
					return err
				}
			}
			return fanOutOutcome(last)
		},
	}
	fs := cmd.Flags()
	fs.StringToStringVar(&f.labels, "selector", nil, "the nodes whose labels include all of these `k=v,...`")
	fs.StringVar(&f.pool, "pool", "", "only nodes in this pool")
	fs.StringSliceVar(&f.nodes, "node", nil, "only these nodes (ids; repeatable)")
	fs.StringVar(&f.gpuModel, "gpu-model", "", "only nodes with a GPU of exactly this model")
	fs.StringSliceVar(&f.states, "state", nil, "only nodes in these states (repeatable), for example ready")
	fs.Int32Var(&f.limit, "limit", 0, "reach at most this many of the matching nodes (0: all)")
	fs.Int32Var(&f.maxInFlight, "max-in-flight", 0, "at most this many commands sent but unfinished at once (0: 1,000; the server allows 10,000)")
	fs.DurationVar(&f.timeout, "timeout", 0, "how long each command may wait and run (0: the server's default, 5m)")
	fs.StringVar(&f.key, "idempotency-key", "", "names the fan-out: running again with the same key follows the same fan-out")
	fs.BoolVar(&f.quiet, "quiet", false, "print only the failures, not every result")
	fs.StringVarP(&f.output, "output", "o", "table", "table, or json: the last commands/getFanOut answer as protojson")
	return cmd
}

// followFanOut polls the fan-out until it is done, drawing a progress line and printing each
// node's result as it arrives (for fan-outs of up to maxStreamedResults) or, above that, the
// failures that commands/getFanOut lists; it returns the last answer.
func followFanOut(ctx context.Context, c *client.Client, f *commandsv1.FanOut, p *progressView, quiet bool) (*commandsv1.GetFanOutResponse, error) {
	p.println(fmt.Sprintf("Fan-out %s: %s to %d nodes, at most %d at once (Ctrl-C stops following, not the fan-out)",
		f.GetId(), f.GetType(), f.GetTotal(), f.GetMaxInFlight()))
	start := time.Now()
	printed := map[string]bool{}
	stream := f.GetTotal() <= maxStreamedResults
	last, err := pollUntil(ctx,
		func(ctx context.Context) (*commandsv1.GetFanOutResponse, error) {
			res, err := c.Commands.GetFanOut(ctx, &commandsv1.GetFanOutRequest{Id: f.GetId()})
			if err != nil || !stream {
				return res, err
			}
			return res, printFinished(ctx, c, f.GetId(), res.GetCounts(), printed, p, quiet)
		},
		func(res *commandsv1.GetFanOutResponse) bool {
			p.line(fanOutLine(res.GetCounts(), f.GetTotal(), time.Since(start)))
			return res.GetDone()
		},
		"follow fan-out "+f.GetId(),
		func() error {
			return fmt.Errorf("stopped following fan-out %s, which goes on (better-compute commands get-fan-out --id %s)", f.GetId(), f.GetId())
		})
	p.end()
	if err != nil {
		return last, err
	}
	if !stream {
		for _, cmd := range last.GetFailures() {
			fmt.Fprintln(p.w, resultLine(cmd))
		}
	}
	fmt.Fprintln(p.w, fanOutFinal(f.GetId(), last.GetCounts(), time.Since(start)))
	return last, nil
}

// printFinished prints the fan-out's finished commands not printed yet: it pages through those
// that succeeded and those that failed or expired, only while counts say some are new.
func printFinished(ctx context.Context, c *client.Client, id string, counts *commandsv1.FanOutCounts, printed map[string]bool, p *progressView, quiet bool) error {
	finished := int(counts.GetSucceeded() + counts.GetFailed() + counts.GetExpired() + counts.GetCancelled())
	if finished == len(printed) {
		return nil
	}
	states := []commandsv1.CommandState{commandsv1.CommandState_COMMAND_STATE_FAILED, commandsv1.CommandState_COMMAND_STATE_EXPIRED,
		commandsv1.CommandState_COMMAND_STATE_CANCELLED, commandsv1.CommandState_COMMAND_STATE_SUCCEEDED}
	for _, st := range states {
		token := ""
		for {
			page, err := c.Commands.List(ctx, &commandsv1.ListRequest{FanOutId: id, State: st, PageSize: 500, PageToken: token})
			if err != nil {
				return err
			}
			for _, cmd := range page.GetCommands() {
				if printed[cmd.GetId()] {
					continue
				}
				printed[cmd.GetId()] = true
				if !quiet || st != commandsv1.CommandState_COMMAND_STATE_SUCCEEDED {
					p.println(resultLine(cmd))
				}
			}
			if token = page.GetNextPageToken(); token == "" {
				break
			}
		}
	}
	return nil
}

// resultLine is one node's result: "node 0190…  succeeded  exit 0  GPU 0: NVIDIA H100 …".
func resultLine(cmd *commandsv1.Command) string {
	st := strings.ToLower(strings.TrimPrefix(cmd.GetState().String(), "COMMAND_STATE_"))
	line := fmt.Sprintf("node %s  %-9s", cmd.GetNodeId(), st)
	fields := cmd.GetResult().GetFields()
	if code, ok := fields["exitCode"]; ok {
		line += fmt.Sprintf("  exit %d", int(code.GetNumberValue()))
	}
	out := oneLine(fields["stdout"].GetStringValue())
	if out == "" {
		out = oneLine(fields["stderr"].GetStringValue())
	}
	if out == "" {
		out = oneLine(cmd.GetError())
	}
	if out != "" {
		line += "  " + out
	}
	return line
}

// fanOutLine is the progress line: "[####------] 412/1000 · 37 in flight · 551 pending · 3 failed · 4s".
func fanOutLine(c *commandsv1.FanOutCounts, total int32, elapsed time.Duration) string {
	done := c.GetSucceeded() + c.GetFailed() + c.GetExpired() + c.GetCancelled()
	const width = 20
	filled := 0
	if total > 0 {
		filled = int(int64(done) * width / int64(total))
	}
	line := fmt.Sprintf("[%s%s] %d/%d · %d in flight · %d pending", strings.Repeat("#", filled), strings.Repeat("-", width-filled),
		done, total, c.GetSent()+c.GetAcked(), c.GetPending())
	if bad := c.GetFailed() + c.GetExpired() + c.GetCancelled(); bad > 0 {
		line += fmt.Sprintf(" · %d failed", bad)
	}
	return line + " · " + elapsed.Round(time.Second).String()
}

// fanOutFinal is the line a followed fan-out ends with.
func fanOutFinal(id string, c *commandsv1.FanOutCounts, elapsed time.Duration) string {
	return fmt.Sprintf("Fan-out %s done after %s: %d succeeded, %d failed, %d expired, %d cancelled",
		id, elapsed.Round(time.Millisecond), c.GetSucceeded(), c.GetFailed(), c.GetExpired(), c.GetCancelled())
}

// fanOutOutcome is how a done fan-out ends `run`: nil when every command succeeded, exit code 1
// otherwise.
func fanOutOutcome(res *commandsv1.GetFanOutResponse) error {
	c := res.GetCounts()
	if bad := c.GetFailed() + c.GetExpired() + c.GetCancelled(); bad > 0 {
		return &ExitError{Code: ExitOther, Err: fmt.Errorf("fan-out %s: %d of %d commands did not succeed", res.GetFanOut().GetId(), bad, res.GetFanOut().GetTotal())}
	}
	return nil
}
