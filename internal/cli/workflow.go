package cli

import (
	"fmt"
	"io"

	"github.com/spf13/cobra"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"github.com/better-compute/better-compute/client"
)

// workflowFlags are the flags every workflow command shares: where the API is and how to print.
type workflowFlags struct {
	api    *Resolver
	output string
}

// check refuses an --output other than table and json; every command calls it before anything
// else.
func (f *workflowFlags) check() error {
	if f.output != "table" && f.output != "json" {
		return fmt.Errorf("--output must be table or json, got %q", f.output)
	}
	return nil
}

func (f *workflowFlags) json() bool { return f.output == "json" }

func (f *workflowFlags) client() (*client.Client, error) {
	t, err := f.api.Resolve()
	if err != nil {
		return nil, err
	}
	return client.New(t.URL, client.WithAPIKey(t.APIKey)), nil
}

// printJSON writes m as indented protojson, proto field names in camelCase as the API's JSON.
func printJSON(w io.Writer, m proto.Message) error {
	b, err := protojson.MarshalOptions{Multiline: true, Indent: "  "}.Marshal(m)
	if err != nil {
		return fmt.Errorf("encode %s: %w", m.ProtoReflect().Descriptor().Name(), err)
	}
	_, err = fmt.Fprintf(w, "%s\n", b)
	return err
}

func newWorkflowCommand(api *Resolver) *cobra.Command {
	f := &workflowFlags{api: api}
	cmd := &cobra.Command{
		Use:   "workflow",
		Short: "Run rolling operations over many nodes: upgrade, reboot, drain, configure, exec",
		Long: `A workflow does one action to many nodes, a few at a time: each node is cordoned, drained,
acted on, verified and uncordoned, and counts towards --max-parallel until it has been ready (on
the new version, for an upgrade) for --min-healthy. One failed node more than --max-failures
pauses the workflow: nodes in their steps finish them and no new node starts until it is resumed
(resume --retry-failed starts the failed nodes over).

run and status --watch follow a workflow, polling workflows/get every second: on a terminal a
progress line redrawn in place, otherwise a line each time the counts change. They exit 0 when it
succeeded, 1 when it failed or was cancelled, and 3 when it paused for failures; Ctrl-C stops
following, not the workflow.`,
	}
	pf := cmd.PersistentFlags()
	pf.StringVarP(&f.output, "output", "o", "table", "table, or json: the API's response as protojson")
	cmd.AddCommand(
		newWorkflowRunCommand(f),
		newWorkflowStatusCommand(f),
		newWorkflowListCommand(f),
		newWorkflowPauseCommand(f),
		newWorkflowResumeCommand(f),
		newWorkflowCancelCommand(f),
	)
	return cmd
}
