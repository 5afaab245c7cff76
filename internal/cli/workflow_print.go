package cli

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	workflowsv1 "github.com/better-compute/better-compute/gen/go/bettercompute/workflows/v1"
)

// actionText says what an action does, for people: "upgrade to 1.4.0", "exec /usr/bin/x -y".
func actionText(a *workflowsv1.Action) string {
	switch k := a.GetKind().(type) {
	case *workflowsv1.Action_Upgrade:
		return "upgrade to " + k.Upgrade.GetVersion()
	case *workflowsv1.Action_Reboot:
		return "reboot"
	case *workflowsv1.Action_Drain:
		return "drain"
	case *workflowsv1.Action_Configure:
		return fmt.Sprintf("configure (%d keys)", len(k.Configure.GetConfig().GetFields()))
	case *workflowsv1.Action_Exec:
		return strings.Join(append([]string{"exec", k.Exec.GetPath()}, k.Exec.GetArgs()...), " ")
	}
	return "—"
}

// targetText says which nodes a target named.
func targetText(t *workflowsv1.Target) string {
	switch {
	case t.GetPoolId() != "":
		return "pool " + t.GetPoolId()
	case len(t.GetLabelSelector()) > 0:
		sel := t.GetLabelSelector()
		pairs := make([]string, 0, len(sel))
		for _, k := range slices.Sorted(maps.Keys(sel)) {
			pairs = append(pairs, k+"="+sel[k])
		}
		return "selector " + strings.Join(pairs, ",")
	case len(t.GetNodeIds()) > 0:
		return fmt.Sprintf("%d nodes by id", len(t.GetNodeIds()))
	}
	return "—"
}

// policyText says how carefully a workflow goes, as run's flags would.
func policyText(p *workflowsv1.Policy) string {
	d := func(d *durationpb.Duration) string {
		if d == nil {
			return "default"
		}
		return d.AsDuration().String()
	}
	return fmt.Sprintf("max parallel %d, max failures %d, min healthy %s, drain deadline %s, step timeout %s",
		max(p.GetMaxParallel(), 1), p.GetMaxFailures(), d(p.GetMinHealthy()), d(p.GetDrainDeadline()), d(p.GetStepTimeout()))
}

// timeText is a timestamp in UTC, RFC 3339, or "—" when unset.
func timeText(ts *timestamppb.Timestamp) string {
	if ts == nil {
		return "—"
	}
	return ts.AsTime().UTC().Format(time.RFC3339)
}

// printWorkflow writes a workflow as "Field: value" lines.
func printWorkflow(w io.Writer, wf *workflowsv1.Workflow) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	state := wf.GetState()
	if wf.GetReason() != "" {
		state += ": " + wf.GetReason()
	}
	created := timeText(wf.GetCreateTime())
	if wf.GetCreatedBy() != "" {
		created += " by " + wf.GetCreatedBy()
	}
	if wf.GetOrigin() != "" {
		created += " (" + wf.GetOrigin() + ")"
	}
	for _, kv := range [][2]string{
		{"ID", wf.GetId()},
		{"Name", orDash(wf.GetName())},
		{"Action", actionText(wf.GetAction())},
		{"Target", targetText(wf.GetTarget())},
		{"Policy", policyText(wf.GetPolicy())},
		{"State", state},
		{"Progress", progressLine(wf)},
		{"Created", created},
		{"Updated", timeText(wf.GetUpdateTime())},
		{"Finished", timeText(wf.GetFinishTime())},
	} {
		fmt.Fprintf(tw, "%s:\t%s\n", kv[0], kv[1])
	}
	return tw.Flush()
}

// printNodes writes a table of nodes: hostname (the id when it has none), step, attempt, message
// and when the step began.
func printNodes(w io.Writer, nodes []*workflowsv1.NodeProgress) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "NODE\tSTEP\tATTEMPT\tSINCE\tMESSAGE")
	for _, n := range nodes {
		name := n.GetHostname()
		if name == "" {
			name = n.GetNodeId()
		}
		attempt := "—"
		if n.GetAttempt() > 0 {
			attempt = fmt.Sprint(n.GetAttempt())
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", name, n.GetStep(), attempt, timeText(n.GetStepTime()), orDash(oneLine(n.GetMessage())))
	}
	return tw.Flush()
}

// printWorkflowList writes a table of workflows, one a line.
func printWorkflowList(w io.Writer, wfs []*workflowsv1.Workflow) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tNAME\tACTION\tSTATE\tDONE\tFAILED\tCREATED")
	for _, wf := range wfs {
		c := wf.GetCounts()
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d/%d\t%d\t%s\n", wf.GetId(), oneLine(orDash(wf.GetName())), oneLine(actionText(wf.GetAction())),
			wf.GetState(), c.GetSucceeded(), c.GetTotal(), c.GetFailed(), timeText(wf.GetCreateTime()))
	}
	return tw.Flush()
}

// oneLine folds s's white space, so that a table row stays one line; "—" when empty.
