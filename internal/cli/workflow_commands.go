package cli

import (
	"context"
	"fmt"
	"io"

	"github.com/spf13/cobra"
	"google.golang.org/protobuf/proto"

	"github.com/better-compute/better-compute/client"
	workflowsv1 "github.com/better-compute/better-compute/gen/go/bettercompute/workflows/v1"
)

// finishFollowing follows workflow id until it settles and returns its outcome. With --output
// json it prints the last workflows/get answer (progress going to standard error); otherwise
// final prints it.
func finishFollowing(cmd *cobra.Command, wf *workflowFlags, c *client.Client, id string, final func(io.Writer, *workflowsv1.GetResponse) error) error {
	out := cmd.OutOrStdout()
	progressTo := out
	if wf.json() {
		progressTo = cmd.ErrOrStderr()
	}
	last, err := followWorkflow(cmd.Context(), c, id, newProgress(progressTo))
	if last != nil {
		var perr error
		if wf.json() {
			perr = printJSON(out, last)
		} else if err == nil {
			perr = final(out, last)
		}
		if err == nil {
			err = perr
		}
	}
	if err != nil {
		return err
	}
	return outcome(last.GetWorkflow())
}

// printFailedNodes lists the nodes that failed, if any.
func printFailedNodes(w io.Writer, res *workflowsv1.GetResponse) error {
	var failed []*workflowsv1.NodeProgress
	for _, n := range res.GetNodes() {
		if n.GetStep() == "failed" {
			failed = append(failed, n)
		}
	}
	if len(failed) == 0 {
		return nil
	}
	fmt.Fprintln(w, "Failed nodes:")
	return printNodes(w, failed)
}

// printStatus writes a workflow and its nodes.
func printStatus(w io.Writer, res *workflowsv1.GetResponse) error {
	if err := printWorkflow(w, res.GetWorkflow()); err != nil {
		return err
	}
	fmt.Fprintln(w)
	return printNodes(w, res.GetNodes())
}

func newWorkflowStatusCommand(wf *workflowFlags) *cobra.Command {
	var watch bool
	cmd := &cobra.Command{
		Use:   "status ID [--watch]",
		Short: "Show a workflow and where each of its nodes stands",
		Long: `Show a workflow (action, target, policy, state, counts) and a table of its nodes: step
(pending, cordon, drain, act, verify, uncordon, succeeded, failed or skipped), attempt and
message. --watch follows it first, as run does, with run's exit codes.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := wf.check(); err != nil {
				return err
			}
			c, err := wf.client()
			if err != nil {
				return err
			}
			if watch {
				return finishFollowing(cmd, wf, c, args[0], printStatus)
			}
			res, err := c.Workflows.Get(cmd.Context(), &workflowsv1.GetRequest{Id: args[0]})
			if err != nil {
				return fmt.Errorf("get workflow %s: %w", args[0], err)
			}
			if wf.json() {
				return printJSON(cmd.OutOrStdout(), res)
			}
			return printStatus(cmd.OutOrStdout(), res)
		},
	}
	cmd.Flags().BoolVarP(&watch, "watch", "w", false, "follow it until it finishes or pauses for failures, then show it")
	return cmd
}

func newWorkflowListCommand(wf *workflowFlags) *cobra.Command {
	var (
		states []string
		limit  int
	)
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List the tenant's workflows, newest first",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := wf.check(); err != nil {
				return err
			}
			if limit < 1 {
				return fmt.Errorf("--limit must be 1 or more, got %d", limit)
			}
			c, err := wf.client()
			if err != nil {
				return err
			}
			var wfs []*workflowsv1.Workflow
			for w, err := range client.All(cmd.Context(), func(ctx context.Context, token string) ([]*workflowsv1.Workflow, string, error) {
				res, err := c.Workflows.List(ctx, &workflowsv1.ListRequest{States: states, PageSize: int32(min(limit, 500)), PageToken: token})
				return res.GetWorkflows(), res.GetNextPageToken(), err
			}) {
				if err != nil {
					return fmt.Errorf("list workflows: %w", err)
				}
				wfs = append(wfs, w)
				if len(wfs) == limit {
					break
				}
			}
			if wf.json() {
				return printJSON(cmd.OutOrStdout(), &workflowsv1.ListResponse{Workflows: wfs})
			}
			if len(wfs) == 0 {
				_, err := fmt.Fprintln(cmd.OutOrStdout(), "No workflows.")
				return err
			}
			return printWorkflowList(cmd.OutOrStdout(), wfs)
		},
	}
	cmd.Flags().StringSliceVar(&states, "state", nil, "only these states: running, paused, succeeded, failed, cancelled (comma separated or repeated)")
	cmd.Flags().IntVar(&limit, "limit", 50, "list at most this many")
	return cmd
}

// workflowResponse is what pause, resume and cancel answer.
type workflowResponse interface {
	proto.Message
	GetWorkflow() *workflowsv1.Workflow
}

// printChanged writes what pause, resume or cancel made of a workflow: the response as JSON, or
// a line with the workflow's progress and state.
func printChanged(w io.Writer, wf *workflowFlags, res workflowResponse) error {
	if wf.json() {
		return printJSON(w, res)
	}
	_, err := fmt.Fprintf(w, "Workflow %s: %s\n", res.GetWorkflow().GetId(), progressLine(res.GetWorkflow()))
	return err
}

func newWorkflowPauseCommand(wf *workflowFlags) *cobra.Command {
	var reason string
	cmd := &cobra.Command{
		Use:   "pause ID [--reason TEXT]",
		Short: "Stop admitting nodes; nodes in their steps finish them",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := wf.check(); err != nil {
				return err
			}
			c, err := wf.client()
			if err != nil {
				return err
			}
			res, err := c.Workflows.Pause(cmd.Context(), &workflowsv1.PauseRequest{Id: args[0], Reason: reason})
			if err != nil {
				return fmt.Errorf("pause workflow %s: %w", args[0], err)
			}
			return printChanged(cmd.OutOrStdout(), wf, res)
		},
	}
	cmd.Flags().StringVar(&reason, "reason", "", "why, for people (at most 256 bytes)")
	return cmd
}

func newWorkflowResumeCommand(wf *workflowFlags) *cobra.Command {
	var (
		retryFailed bool
		maxFailures int32
	)
	cmd := &cobra.Command{
		Use:   "resume ID [--retry-failed] [--max-failures N]",
		Short: "Admit nodes again, retrying the failed ones or tolerating more failures",
		Long: `Admit nodes again. --retry-failed starts the failed nodes over (a new attempt); otherwise they
stay failed and count towards max failures, so a workflow paused for failures is resumed with
--retry-failed or a larger --max-failures.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := wf.check(); err != nil {
				return err
			}
			req := &workflowsv1.ResumeRequest{Id: args[0], RetryFailed: retryFailed}
			if cmd.Flags().Changed("max-failures") {
				if maxFailures < 0 {
					return fmt.Errorf("--max-failures must be 0 or more, got %d", maxFailures)
				}
				req.MaxFailures = &maxFailures
			}
			c, err := wf.client()
			if err != nil {
				return err
			}
			res, err := c.Workflows.Resume(cmd.Context(), req)
			if err != nil {
				return fmt.Errorf("resume workflow %s: %w", args[0], err)
			}
			return printChanged(cmd.OutOrStdout(), wf, res)
		},
	}
	cmd.Flags().BoolVar(&retryFailed, "retry-failed", false, "start the failed nodes over")
	cmd.Flags().Int32Var(&maxFailures, "max-failures", 0, "replace the workflow's max failures")
	return cmd
}

func newWorkflowCancelCommand(wf *workflowFlags) *cobra.Command {
	var reason string
	cmd := &cobra.Command{
		Use:   "cancel ID [--reason TEXT]",
		Short: "End a workflow: no node is admitted, and the nodes it cordoned are uncordoned",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := wf.check(); err != nil {
				return err
			}
			c, err := wf.client()
			if err != nil {
				return err
			}
			res, err := c.Workflows.Cancel(cmd.Context(), &workflowsv1.CancelRequest{Id: args[0], Reason: reason})
			if err != nil {
				return fmt.Errorf("cancel workflow %s: %w", args[0], err)
			}
			return printChanged(cmd.OutOrStdout(), wf, res)
		},
	}
	cmd.Flags().StringVar(&reason, "reason", "", "why, for people (at most 256 bytes)")
	return cmd
}
