package cli

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/better-compute/better-compute/client"
	remediationsv1 "github.com/better-compute/better-compute/gen/go/bettercompute/remediations/v1"
)

// remediationGroup is the generated command group of the remediations API that `follow` joins.
const remediationGroup = "remediations"

// addRemediationsFollow adds `follow` to the generated remediations group below root, beside
// its method commands (create, get, list, cancel, return-from-service). Without the group (a
// registry that did not build) it adds nothing.
func addRemediationsFollow(root *cobra.Command, api *Resolver) {
	if g := findCommand(root, remediationGroup); g != nil {
		g.AddCommand(newRemediationsFollowCommand(api))
	}
}

func newRemediationsFollowCommand(api *Resolver) *cobra.Command {
	f := &workflowFlags{api: api}
	var id string
	cmd := &cobra.Command{
		Use:   "follow --id ID",
		Short: "Follow a remediation step by step until it ends",
		Long: `Follow a remediation, polling remediations/get every second: each step of its ladder is
printed as it ends (action, outcome, duration, detail), with a progress line of where it is on
its ladder ("[#!>---] 3/6 diagnose · running": # passed, ! failed, / skipped, ? unavailable,
> the step running, - to come), then the state it ended in. Ctrl-C stops following, not the
remediation. With -o json the progress goes to standard error and the last remediations/get
answer to standard output.

Exits 0 when it succeeded or was returned from service, 1 when it ended in service (the
hardware needs people; better-compute remediations return-from-service --id ID once repaired),
failed or was cancelled, and as any API command on an API error.

` + ExitCodesHelp,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := f.check(); err != nil {
				return usageError(err)
			}
			if id == "" {
				return usageError(errors.New("--id is required: the remediation's id (better-compute remediations list)"))
			}
			c, err := f.client()
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			progressTo := out
			if f.json() {
				progressTo = cmd.ErrOrStderr() // stdout is for the JSON
			}
			last, err := followRemediation(cmd.Context(), c, id, newProgress(progressTo))
			if err != nil {
				return err
			}
			if f.json() {
				if err := printJSON(out, last); err != nil {
					return err
				}
			}
			return remediationOutcome(last.GetRemediation())
		},
	}
	fs := cmd.Flags()
	fs.StringVar(&id, "id", "", "the remediation's id")
	fs.StringVarP(&f.output, "output", "o", "table", "table, or json: the last remediations/get answer as protojson")
	return cmd
}

// remediationState is a state's name in lower case, as docs/remediation.md writes it: "running".
func remediationState(s remediationsv1.State) string {
	name, ok := strings.CutPrefix(s.String(), "STATE_")
	if !ok {
		return "unknown"
	}
	return strings.ToLower(name)
}

// remediationEnded reports whether r ended: neither waiting nor running.
func remediationEnded(r *remediationsv1.Remediation) bool {
	switch r.GetState() {
	case remediationsv1.State_STATE_WAITING, remediationsv1.State_STATE_RUNNING:
		return false
	}
	return true
}

// followRemediation polls remediation id until it ends, printing on p a line when it is first
// seen, a line for each step as it ends and a progress line, and returns the last answer. When
// ctx ends first it returns the last answer (nil if none) and an error that says the
// remediation goes on.
func followRemediation(ctx context.Context, c *client.Client, id string, p *progressView) (*remediationsv1.GetResponse, error) {
	printed := -1 // history entries printed; -1 before the first answer
	last, err := pollUntil(ctx,
		func(ctx context.Context) (*remediationsv1.GetResponse, error) {
			return c.Remediations.Get(ctx, &remediationsv1.GetRequest{Id: id})
		},
		func(res *remediationsv1.GetResponse) bool {
			r := res.GetRemediation()
			if printed < 0 {
				p.println(remediationHeader(r))
				printed = 0
			}
			for _, e := range r.GetHistory()[min(printed, len(r.GetHistory())):] {
				if e.GetEndTime() == nil && e.GetOutcome() == "" {
					break // the step running
				}
				p.println(historyLine(r, e))
				printed++
			}
			// The time so far only where the line is redrawn: elsewhere a line is printed when it changes.
			p.line(remediationLine(r, time.Now(), p.terminal || remediationEnded(r)))
			return remediationEnded(r)
		},
		"follow remediation "+id,
		func() error {
			return fmt.Errorf("stopped following remediation %s, which goes on (better-compute remediations follow --id %s)", id, id)
		})
	p.end()
	if err == nil {
		fmt.Fprintln(p.w, remediationFinal(last.GetRemediation()))
	}
	return last, err
}

// remediationHeader is the line a followed remediation starts with: "Remediation r1: gpu-1 GPU
// GPU-1a2b, xid 79, ladder reset of 6 steps (Ctrl-C stops following, not the remediation)".
func remediationHeader(r *remediationsv1.Remediation) string {
	what := r.GetHostname()
	if r.GetGpuUuid() != "" {
		what += " GPU " + r.GetGpuUuid()
	}
	return fmt.Sprintf("Remediation %s: %s, %s, ladder %s of %d steps (Ctrl-C stops following, not the remediation)",
		r.GetId(), what, orDash(r.GetReason()), orDash(r.GetLadder()), len(r.GetSteps()))
}

// historyLine is one ended step: "2/6 gpuReset     failed       3s  nvidia-smi: …".
func historyLine(r *remediationsv1.Remediation, e *remediationsv1.HistoryEntry) string {
	line := fmt.Sprintf("%d/%d %-11s %-11s %6s", e.GetStep()+1, len(r.GetSteps()), e.GetAction(), orDash(e.GetOutcome()), span(e.GetStartTime(), e.GetEndTime(), time.Now()))
	if d := oneLine(e.GetDetail()); d != "" {
		line += "  " + d
	}
	return line
}

// span is from a to b (now while b is unset), rounded to the second; "—" without a.
func span(a, b *timestamppb.Timestamp, now time.Time) string {
	if a == nil {
		return "—"
	}
	end := now
	if b != nil {
		end = b.AsTime()
	}
	return max(end.Sub(a.AsTime()), 0).Round(time.Second).String()
}

// stepMarks is the mark of each of r's steps: the outcome of its last history entry, "current"
// for the step a running remediation is in, else "pending". The dashboard draws the same marks.
func stepMarks(r *remediationsv1.Remediation) []string {
	marks := make([]string, len(r.GetSteps()))
	for i := range marks {
		marks[i] = "pending"
	}
	var lastOf *remediationsv1.HistoryEntry
	for _, e := range r.GetHistory() {
		if i := int(e.GetStep()); i >= 0 && i < len(marks) {
			if e.GetOutcome() != "" {
				marks[i] = e.GetOutcome()
			}
			if i == int(r.GetStep()) {
				lastOf = e
			}
		}
	}
	if i := int(r.GetStep()); r.GetState() == remediationsv1.State_STATE_RUNNING && i >= 0 && i < len(marks) &&
		(lastOf == nil || lastOf.GetEndTime() == nil) {
		marks[i] = "current"
	}
	return marks
}

// ladderStrip draws r's steps a character each: # passed (or returned), ! failed, / skipped
// (or cancelled), ? unavailable, > running, - to come.
func ladderStrip(r *remediationsv1.Remediation) string {
	var b strings.Builder
	b.WriteString("[")
	for _, m := range stepMarks(r) {
		switch m {
		case "passed", "returned":
			b.WriteString("#")
		case "failed":
			b.WriteString("!")
		case "skipped", "cancelled":
			b.WriteString("/")
		case "unavailable":
			b.WriteString("?")
		case "current":
			b.WriteString(">")
		default:
			b.WriteString("-")
		}
	}
	b.WriteString("]")
	return b.String()
}

// remediationPosition is where r is on its ladder: "3/6 diagnose"; "0/6 waiting" before its
// first step.
func remediationPosition(r *remediationsv1.Remediation) string {
	n := len(r.GetSteps())
	if n == 0 {
		return "0/0"
	}
	if r.GetState() == remediationsv1.State_STATE_WAITING && len(r.GetHistory()) == 0 {
		return fmt.Sprintf("0/%d waiting", n)
	}
	i := min(max(int(r.GetStep()), 0), n-1)
	return fmt.Sprintf("%d/%d %s", i+1, n, r.GetSteps()[i].GetAction())
}

// remediationLine is the progress line: "[##>---] 3/6 diagnose · running", with elapsed the time
// in remediation so far (the time to repair once ended) after it: " · 2m10s".
func remediationLine(r *remediationsv1.Remediation, now time.Time, elapsed bool) string {
	line := fmt.Sprintf("%s %s · %s", ladderStrip(r), remediationPosition(r), remediationState(r.GetState()))
	if elapsed {
		line += " · " + span(r.GetCreateTime(), r.GetEndTime(), now)
	}
	return line
}

// remediationFinal is the line a followed remediation ends with.
func remediationFinal(r *remediationsv1.Remediation) string {
	line := fmt.Sprintf("Remediation %s %s after %s", r.GetId(), remediationState(r.GetState()), span(r.GetCreateTime(), r.GetEndTime(), time.Now()))
	if r.GetState() == remediationsv1.State_STATE_SERVICE {
		line += fmt.Sprintf(": the hardware needs people; once repaired, better-compute remediations return-from-service --id %s", r.GetId())
	}
	return line
}

// remediationOutcome is how an ended remediation ends `follow`: nil when it succeeded or was
// returned from service, exit code 1 when it is in service, failed or was cancelled.
func remediationOutcome(r *remediationsv1.Remediation) error {
	switch r.GetState() {
	case remediationsv1.State_STATE_SUCCEEDED, remediationsv1.State_STATE_RETURNED:
		return nil
	case remediationsv1.State_STATE_SERVICE:
		return &ExitError{Code: ExitOther, Err: fmt.Errorf("remediation %s of %s ended in service: return it with `better-compute remediations return-from-service --id %s` once repaired",
			r.GetId(), r.GetHostname(), r.GetId())}
	}
	return &ExitError{Code: ExitOther, Err: fmt.Errorf("remediation %s of %s %s", r.GetId(), r.GetHostname(), remediationState(r.GetState()))}
}
