package cli

import (
	"bytes"
	"strings"
	"testing"

	workflowsv1 "github.com/better-compute/better-compute/gen/go/bettercompute/workflows/v1"
)

func TestProgressLine(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		wf    *workflowsv1.Workflow
		want  string
		count map[string]int // characters of the bar
	}{
		{
			name: "running",
			wf:   &workflowsv1.Workflow{State: "running", Counts: &workflowsv1.Counts{Total: 10, Succeeded: 7, InProgress: 2, Pending: 1}},
			want: "[##############>>>>--] 7/10 done · 2 in progress · 0 failed · running",
		},
		{
			name: "all pending",
			wf:   &workflowsv1.Workflow{State: "running", Counts: &workflowsv1.Counts{Total: 3, Pending: 3}},
			want: "[--------------------] 0/3 done · 0 in progress · 0 failed · running",
		},
		{
			name: "no nodes yet",
			wf:   &workflowsv1.Workflow{State: "running"},
			want: "[--------------------] 0/0 done · 0 in progress · 0 failed · running",
		},
		{
			name: "succeeded with skipped nodes",
			wf:   &workflowsv1.Workflow{State: "succeeded", Reason: "ignored", Counts: &workflowsv1.Counts{Total: 4, Succeeded: 3, Skipped: 1}},
			want: "[####################] 3/4 done · 0 in progress · 0 failed · 1 skipped · succeeded",
		},
		{
			name: "paused for a failure",
			wf: &workflowsv1.Workflow{State: "paused", Reason: "1 node failed (max failures 0)",
				Counts: &workflowsv1.Counts{Total: 10, Succeeded: 4, Failed: 1, InProgress: 1, Pending: 4}},
			want: "[########!!>>--------] 4/10 done · 1 in progress · 1 failed · paused: 1 node failed (max failures 0)",
		},
		{
			name:  "one failure among many still shows",
			wf:    &workflowsv1.Workflow{State: "running", Counts: &workflowsv1.Counts{Total: 10000, Succeeded: 9998, Failed: 1, InProgress: 1}},
			count: map[string]int{"#": 18, "!": 1, ">": 1, "-": 0},
		},
		{
			name: "a long reason is cut, white space folded",
			wf:   &workflowsv1.Workflow{State: "cancelled", Reason: "because\n" + strings.Repeat("x", 100), Counts: &workflowsv1.Counts{Total: 1, Skipped: 1}},
			want: "[####################] 0/1 done · 0 in progress · 0 failed · 1 skipped · cancelled: because " + strings.Repeat("x", 51) + "…",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got := progressLine(tc.wf)
			if tc.want != "" && got != tc.want {
				t.Errorf("progressLine =\n%q, want\n%q", got, tc.want)
			}
			bar := got[1:strings.Index(got, "]")]
			if len(bar) != barWidth {
				t.Errorf("bar %q is %d wide, want %d", bar, len(bar), barWidth)
			}
			for ch, n := range tc.count {
				if c := strings.Count(bar, ch); c != n {
					t.Errorf("bar %q has %d %q, want %d", bar, c, ch, n)
				}
			}
		})
	}
}

func TestProgressViewPrintsChangesOnly(t *testing.T) {
	t.Parallel()
	var out bytes.Buffer
	p := newProgress(&out)
	if p.terminal {
		t.Fatal("a buffer is a terminal")
	}
	running := func(done int32) *workflowsv1.Workflow {
		return &workflowsv1.Workflow{State: "running", Counts: &workflowsv1.Counts{Total: 2, Succeeded: done, Pending: 2 - done}}
	}
	for _, wf := range []*workflowsv1.Workflow{running(0), running(0), running(1), running(1), {State: "succeeded", Counts: &workflowsv1.Counts{Total: 2, Succeeded: 2}}} {
		p.show(wf)
	}
	p.end()
	want := progressLine(running(0)) + "\n" + progressLine(running(1)) + "\n" +
		"[####################] 2/2 done · 0 in progress · 0 failed · succeeded\n"
	if out.String() != want {
		t.Errorf("printed\n%s\nwant\n%s", out.String(), want)
	}
}
