package cli

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/structpb"

	daemonv1 "github.com/better-compute/better-compute/gen/go/bettercompute/daemon/v1"
	workflowsv1 "github.com/better-compute/better-compute/gen/go/bettercompute/workflows/v1"
	"github.com/better-compute/better-compute/internal/workflow"
)

// maxConfigureFile bounds what --configure reads; the API takes at most 64 KiB of JSON.
const maxConfigureFile = 1 << 20

// runFlags are the flags of workflow run.
type runFlags struct {
	upgrade, configure, exec string
	reboot, drain            bool

	pool     string
	selector map[string]string
	nodes    []string

	maxParallel, maxFailures               int32
	minHealthy, drainDeadline, stepTimeout time.Duration

	name           string
	paused, detach bool
}

func (f *runFlags) add(fs *pflag.FlagSet) {
	fs.StringVar(&f.upgrade, "upgrade", "", "action: upgrade the daemon to this release `VERSION`")
	fs.BoolVar(&f.reboot, "reboot", false, "action: reboot the host (daemons run with --allow-reboot)")
	fs.BoolVar(&f.drain, "drain", false, "action: only drain, then uncordon")
	fs.StringVar(&f.configure, "configure", "", "action: send the daemon the configuration in `FILE.json` (a JSON object; - for standard input)")
	fs.StringVar(&f.exec, "exec", "", "action: run `PATH` of the nodes' exec allow lists, with the arguments after --")
	fs.StringVar(&f.pool, "pool", "", "target: the members of this pool `ID`")
	fs.StringToStringVar(&f.selector, "selector", nil, "target: the nodes whose labels include all of these `k=v,...`")
	fs.Lookup("selector").DefValue = "" // not "[]" in the help
	fs.StringSliceVar(&f.nodes, "nodes", nil, "target: these nodes, in this order (`ID,ID,...`)")
	fs.Int32Var(&f.maxParallel, "max-parallel", 1, fmt.Sprintf("nodes in their steps at once, 1 to %d", workflow.MaxParallelLimit))
	fs.Int32Var(&f.maxFailures, "max-failures", 0, "failed nodes tolerated; one more pauses the workflow")
	fs.DurationVar(&f.minHealthy, "min-healthy", 0, "how long a node must be ready after uncordon before the next may start, 0 to 1h")
	fs.DurationVar(&f.drainDeadline, "drain-deadline", workflow.DefaultDrainDeadline, "how long the drain step waits for leases to end before ending them, 0 to 168h")
	fs.DurationVar(&f.stepTimeout, "step-timeout", workflow.DefaultStepTimeout, "how long the act and verify steps may take, 1m to 24h")
	fs.StringVar(&f.name, "name", "", "a name for people (default: the action)")
	fs.BoolVar(&f.paused, "paused", false, "create it paused, to look at the nodes it took before any is touched")
	fs.BoolVar(&f.detach, "detach", false, "print the workflow's id and exit instead of following it")
}

// createRequest is workflows/create's request for the flags set in fs and the arguments of
// run (args, of which those from dash on came after "--"; dash is -1 without "--"). Its errors
// name the flag at fault. stdin is read for --configure -.
func (f *runFlags) createRequest(fs *pflag.FlagSet, args []string, dash int, stdin io.Reader) (*workflowsv1.CreateRequest, error) {
	var execArgs []string
	if dash >= 0 {
		args, execArgs = args[:dash], args[dash:]
	}
	if len(args) > 0 {
		return nil, fmt.Errorf("unexpected argument %q: run takes flags, and --exec's arguments after --", args[0])
	}
	action, err := f.action(fs, execArgs, stdin)
	if err != nil {
		return nil, err
	}
	target, err := f.target(fs)
	if err != nil {
		return nil, err
	}
	policy, err := f.policy(fs)
	if err != nil {
		return nil, err
	}
	name := f.name
	if !fs.Changed("name") {
		name = actionText(action)
		if len(name) > workflow.MaxName {
			name = name[:workflow.MaxName]
		}
	}
	if len(name) > workflow.MaxName {
		return nil, fmt.Errorf("--name must be at most %d bytes, got %d", workflow.MaxName, len(name))
	}
	return &workflowsv1.CreateRequest{Name: name, Action: action, Target: target, Policy: policy, Paused: f.paused}, nil
}

// given lists the flags of names set on fs (a bool flag only when true), as "--name".
func given(fs *pflag.FlagSet, names ...string) []string {
	var set []string
	for _, n := range names {
		fl := fs.Lookup(n)
		if fl == nil || !fl.Changed || (fl.Value.Type() == "bool" && fl.Value.String() != "true") {
			continue
		}
		set = append(set, "--"+n)
	}
	return set
}

// exactlyOne refuses anything but one flag of a group, saying which were given.
func exactlyOne(what, usage string, set []string) error {
	switch len(set) {
	case 1:
		return nil
	case 0:
		return fmt.Errorf("give one %s: %s", what, usage)
	}
	return fmt.Errorf("give only one %s, not %s: %s", what, strings.Join(set, " and "), usage)
}

func (f *runFlags) action(fs *pflag.FlagSet, execArgs []string, stdin io.Reader) (*workflowsv1.Action, error) {
	set := given(fs, "upgrade", "reboot", "drain", "configure", "exec")
	if err := exactlyOne("action", "--upgrade VERSION, --reboot, --drain, --configure FILE.json or --exec PATH -- ARGS...", set); err != nil {
		return nil, err
	}
	if len(execArgs) > 0 && set[0] != "--exec" {
		return nil, fmt.Errorf("the arguments after -- are for --exec, not %s", set[0])
	}
	a := &workflowsv1.Action{}
	switch set[0] {
	case "--upgrade":
		a.Kind = &workflowsv1.Action_Upgrade{Upgrade: &workflowsv1.UpgradeAction{Version: f.upgrade}}
	case "--reboot":
		a.Kind = &workflowsv1.Action_Reboot{Reboot: &workflowsv1.RebootAction{}}
	case "--drain":
		a.Kind = &workflowsv1.Action_Drain{Drain: &workflowsv1.DrainAction{}}
	case "--configure":
		config, err := readConfig(f.configure, stdin)
		if err != nil {
			return nil, fmt.Errorf("--configure: %w", err)
		}
		a.Kind = &workflowsv1.Action_Configure{Configure: &daemonv1.ConfigurePayload{Config: config}}
	case "--exec":
		a.Kind = &workflowsv1.Action_Exec{Exec: &daemonv1.ExecPayload{Path: f.exec, Args: execArgs}}
	}
	if err := workflow.ValidateAction(a); err != nil {
		return nil, fmt.Errorf("%s: %w", set[0], err)
	}
	return a, nil
}

// readConfig reads a JSON object from file, or from stdin when file is "-".
func readConfig(file string, stdin io.Reader) (*structpb.Struct, error) {
	r := stdin
	if file != "-" {
		fh, err := os.Open(file)
		if err != nil {
			return nil, err
		}
		defer fh.Close()
		r = fh
	}
	data, err := io.ReadAll(io.LimitReader(r, maxConfigureFile+1))
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", file, err)
	}
	if len(data) > maxConfigureFile {
		return nil, fmt.Errorf("%s is larger than %d bytes", file, maxConfigureFile)
	}
	config := &structpb.Struct{}
	if err := protojson.Unmarshal(data, config); err != nil {
		return nil, fmt.Errorf("%s is not a JSON object: %w", file, err)
	}
	return config, nil
}

func (f *runFlags) target(fs *pflag.FlagSet) (*workflowsv1.Target, error) {
	if err := exactlyOne("target", "--pool ID, --selector k=v,... or --nodes ID,ID,...", given(fs, "pool", "selector", "nodes")); err != nil {
		return nil, err
	}
	switch {
	case fs.Changed("pool"):
		if f.pool == "" {
			return nil, errors.New("--pool needs a pool id")
		}
		return &workflowsv1.Target{PoolId: f.pool}, nil
	case fs.Changed("selector"):
		if len(f.selector) == 0 {
			return nil, errors.New("--selector needs at least one k=v (an empty selector would take every node)")
		}
		for k := range f.selector {
			if k == "" {
				return nil, errors.New("--selector: a label key is empty")
			}
		}
		return &workflowsv1.Target{LabelSelector: f.selector}, nil
	}
	seen := make(map[string]bool, len(f.nodes))
	for _, id := range f.nodes {
		switch {
		case id == "":
			return nil, errors.New("--nodes: a node id is empty")
		case seen[id]:
			return nil, fmt.Errorf("--nodes: %s is given twice", id)
		}
		seen[id] = true
	}
	switch {
	case len(f.nodes) == 0:
		return nil, errors.New("--nodes needs at least one node id")
	case len(f.nodes) > workflow.MaxNodes:
		return nil, fmt.Errorf("--nodes: at most %d nodes, got %d", workflow.MaxNodes, len(f.nodes))
	}
	return &workflowsv1.Target{NodeIds: f.nodes}, nil
}

// policy is the policy of the flags; a duration flag not given is left to the API's default.
func (f *runFlags) policy(fs *pflag.FlagSet) (*workflowsv1.Policy, error) {
	if f.maxParallel < 1 || f.maxParallel > workflow.MaxParallelLimit {
		return nil, fmt.Errorf("--max-parallel must be 1 to %d, got %d", workflow.MaxParallelLimit, f.maxParallel)
	}
	if f.maxFailures < 0 {
		return nil, fmt.Errorf("--max-failures must be 0 or more, got %d", f.maxFailures)
	}
	p := &workflowsv1.Policy{MaxParallel: f.maxParallel, MaxFailures: f.maxFailures}
	for _, d := range []struct {
		flag     string
		value    time.Duration
		min, max time.Duration
		field    **durationpb.Duration
	}{
		{"min-healthy", f.minHealthy, 0, workflow.MaxMinHealthy, &p.MinHealthy},
		{"drain-deadline", f.drainDeadline, 0, workflow.MaxDrainDeadline, &p.DrainDeadline},
		{"step-timeout", f.stepTimeout, workflow.MinStepTimeout, workflow.MaxStepTimeout, &p.StepTimeout},
	} {
		if !fs.Changed(d.flag) {
			continue
		}
		if d.value < d.min || d.value > d.max {
			return nil, fmt.Errorf("--%s must be %s to %s, got %s", d.flag, d.min, d.max, d.value)
		}
		*d.field = durationpb.New(d.value)
	}
	return p, nil
}

func newWorkflowRunCommand(wf *workflowFlags) *cobra.Command {
	f := &runFlags{}
	cmd := &cobra.Command{
		Use:   "run (--upgrade VERSION | --reboot | --drain | --configure FILE.json | --exec PATH) (--pool ID | --selector k=v,... | --nodes ID,...) [-- ARGS...]",
		Short: "Start a workflow and follow it until it finishes",
		Long: `Start a workflow: one action (--upgrade, --reboot, --drain, --configure or --exec) over one
target (--pool, --selector or --nodes), taken when it is created, a few nodes at a time as the
policy flags say. Then follow it until it finishes or pauses for failures, showing its progress;
exit 0 when it succeeded, 1 when it failed or was cancelled, 3 when it paused for failures
(resume it with workflow resume). --detach prints its id and exits; with --output json, it prints
the created workflow, otherwise the last workflows/get answer.

  better-compute workflow run --upgrade 1.4.0 --selector role=gpu --max-parallel 2 --min-healthy 30s
  better-compute workflow run --exec /usr/bin/nvidia-smi --nodes ID1,ID2 -- -r`,
		Args: cobra.ArbitraryArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := wf.check(); err != nil {
				return err
			}
			req, err := f.createRequest(cmd.Flags(), args, cmd.ArgsLenAtDash(), cmd.InOrStdin())
			if err != nil {
				return err
			}
			c, err := wf.client()
			if err != nil {
				return err
			}
			ctx, out := cmd.Context(), cmd.OutOrStdout()
			res, err := c.Workflows.Create(ctx, req)
			if err != nil {
				return fmt.Errorf("create the workflow: %w", err)
			}
			created := res.GetWorkflow()
			if f.detach {
				if wf.json() {
					return printJSON(out, res)
				}
				_, err := fmt.Fprintln(out, created.GetId())
				return err
			}
			status := out
			if wf.json() {
				status = cmd.ErrOrStderr() // stdout is for the JSON
			}
			fmt.Fprintf(status, "Workflow %s: %s, %d nodes (Ctrl-C stops following, not the workflow)\n",
				created.GetId(), actionText(created.GetAction()), created.GetCounts().GetTotal())
			return finishFollowing(cmd, wf, c, created.GetId(), printFailedNodes)
		},
	}
	f.add(cmd.Flags())
	return cmd
}
